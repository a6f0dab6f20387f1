// Blocking work kept off the cooperative pool.
import Foundation

/// Runs blocking `work` (waitpid, a blocking socket, a server tool) on a thread of its own and returns its value or
/// its error. The test process's cooperative pool has one thread per core: one blocked there stalls every test's
/// awaits, and their deadlines run out while they wait.
public func onOwnThread<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
    let result = await withCheckedContinuation { (done: CheckedContinuation<Result<T, E>, Never>) in
        Thread { done.resume(returning: Result { () throws(E) -> T in try work() }) }.start()
    }
    return try result.get()
}

/// Waits for `process` to exit (`waitUntilExit` blocks its thread, so on one of its own) and returns its status.
public func exitStatus(of process: Process) async -> Int32 {
    await onOwnThread {
        process.waitUntilExit()
        return process.terminationStatus
    }
}
