// The kernel's name for a thread of our own: Foundation's `Thread.name` is not it on Linux.
import CEpoll

/// Names the calling thread as `top -H`, `perf` and /proc/<pid>/task/*/comm show it (at most 15 bytes kept).
public func nameThisThread(_ name: String) {
    _ = offergate_name_this_thread(name)
}
