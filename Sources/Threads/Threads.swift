// Threads of our own, named for the kernel: Foundation's `Thread.name` is not the kernel's name on Linux. Every
// thread the shipped binaries start (and offer-bench's) starts here, so each shows under its name in `top -H`,
// `perf` and /proc; test support's short-lived helper threads do not need one.
import CThreadName
import Foundation

/// Starts a thread running `body`, named `name` both for Foundation and for the kernel, as `top -H`, `perf` and
/// /proc/<pid>/task/*/comm show it (at most 15 bytes kept there).
public func startThread(named name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        _ = offergate_name_this_thread(name)
        body()
    }
    thread.name = name
    if let stackSize { thread.stackSize = stackSize }
    thread.start()
}
