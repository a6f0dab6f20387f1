// The kernel's names of a process's threads, as `top -H`, `perf` and /proc show them.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The names in /proc/<pid>/task/*/comm of `pid`'s threads (this process's when nil), one per thread.
public func threadNames(of pid: pid_t? = nil) throws -> [String] {
    let tasks = "/proc/\(pid.map(String.init) ?? "self")/task"
    return try FileManager.default.contentsOfDirectory(atPath: tasks).compactMap { task in
        try? String(contentsOfFile: "\(tasks)/\(task)/comm", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
