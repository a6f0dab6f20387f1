import CSpawn
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with posix_spawn, its stdin/stdout/stderr connected to files (never pipes: a grandchild
/// such as a daemonised server could hold a pipe open, and the reader would never see EOF).
///
/// Not Foundation.Process: on Linux it notices the exit through an inherited descriptor that such grandchildren keep.
/// Waiting happens on a dedicated thread (waitpid blocks; the cooperative pool must not).
public final class ChildProcess: Sendable {
    /// The child's process id.
    public let pid: pid_t
    /// The raw wait status once reaped.
    private let reaped = Mutex<Int32?>(nil)

    private init(pid: pid_t) { self.pid = pid }

    /// The failure of posix_spawn.
    public struct SpawnError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Where `setpriv` (util-linux) is, if installed: children are started through it with `--pdeathsig KILL`,
    /// so the kernel ends them when the test process dies, even by a crash (no orphaned gateways).
    static let setpriv: String? =
        FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") ? "/usr/bin/setpriv" : nil

    /// Starts `path` with `arguments` and exactly `environment`; stdin reads `stdin`, stdout and stderr are
    /// (truncated and) written to the given files. The child is killed if the test process dies first (see
    /// `setpriv`); its pid is the program's own (setpriv execs it).
    public static func spawn(
        _ path: String, _ arguments: [String], environment: [String: String], stdin: String = "/dev/null",
        stdout: String = "/dev/null", stderr: String = "/dev/null"
    ) throws -> ChildProcess {
        // The parent-death signal is tied to the thread that forked, and the cooperative pool's threads come and
        // go: every spawn runs on one thread that lives as long as the process.
        let (program, argv) =
            setpriv.map { ($0, ["--pdeathsig", "KILL", "--", path] + arguments) } ?? (path, arguments)
        let result = SpawnerThread.shared.run {
            Result {
                try rawSpawn(program, argv, environment: environment, stdin: stdin, stdout: stdout, stderr: stderr)
            }
        }
        return try result.get()
    }

    private static func rawSpawn(
        _ path: String, _ arguments: [String], environment: [String: String], stdin: String, stdout: String,
        stderr: String
    ) throws -> ChildProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        // Nothing else: a test's pipe or socket inherited by a long-lived child (a PostgreSQL server, a gateway)
        // would keep it open, and its reader would wait for an EOF that comes only when that child exits.
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard result == 0 else {
            throw SpawnError(description: "posix_spawn \(path): \(String(cString: strerror(result)))")
        }
        return ChildProcess(pid: pid)
    }

    /// The test runner's environment minus the variables named in `removing` and every variable whose name starts
    /// with one of `removingPrefixes`, plus `adding`.
    public static func environment(
        removing: Set<String> = [], removingPrefixes: [String] = [], adding: [String: String] = [:]
    ) -> [String: String] {
        ProcessInfo.processInfo.environment
            .filter { entry in !removing.contains(entry.key) && !removingPrefixes.contains { entry.key.hasPrefix($0) } }
            .merging(adding) { $1 }
    }

    /// The shell convention: the exit code, or 128 + the signal that ended the process.
    public static func decode(_ raw: Int32) -> Int32 {
        raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
    }

    /// How a process ended.
    public enum Termination: Sendable, Equatable {
        /// It called exit with this code.
        case exit(Int32)
        /// This signal ended it.
        case signal(Int32)
    }

    /// How the child ended, if it has (reaping it); nil while it runs. Never blocks.
    public func termination() -> Termination? {
        reapIfExited().map { raw in raw & 0x7F == 0 ? .exit((raw >> 8) & 0xFF) : .signal(raw & 0x7F) }
    }

    /// The decoded exit status (see `decode(_:)`) if the child has exited (reaping it), nil while it runs. Never
    /// blocks.
    public func exitStatus() -> Int32? { reapIfExited().map(Self.decode) }

    private func reapIfExited() -> Int32? {
        reaped.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == pid { status = raw }
            return status
        }
    }

    /// Whether the child still runs.
    public var isRunning: Bool { exitStatus() == nil }

    /// Sends SIGTERM.
    public func terminate() { signal(SIGTERM) }

    /// Sends SIGKILL.
    public func kill() { signal(SIGKILL) }

    /// Sends `signal` unless the child was already reaped (its pid could belong to another process by then).
    public func signal(_ signal: Int32) {
        reaped.withLock { status in
            if status == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// Blocks the calling thread until the child exits; returns the decoded status (-1 if it is not our child).
    /// Never call it on the cooperative pool.
    public func waitBlocking() -> Int32 {
        while true {
            if let status = exitStatus() { return status }
            // Sleep until it exits without reaping (WNOWAIT): reaping stays under the lock in `exitStatus()`.
            var info = siginfo_t()
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno != EINTR {
                return exitStatus() ?? -1  // ECHILD: reaped meanwhile by `exitStatus()` on another thread
            }
        }
    }

    /// Waits for the exit on a dedicated thread (never blocking the cooperative pool); returns the decoded status.
    public func wait() async -> Int32 {
        if let status = exitStatus() { return status }
        return await onOwnThread { self.waitBlocking() }
    }

    /// `wait()`, sending SIGKILL first if the child still runs after `timeout`.
    public func wait(timeout: Duration) async -> Int32 {
        let killer = Task {
            try await Task.sleep(for: timeout)
            self.kill()
        }
        defer { killer.cancel() }
        return await wait()
    }

    /// What a finished process left behind.
    public struct Outcome: Sendable, CustomStringConvertible {
        /// The decoded exit status.
        public var status: Int32
        public var stdout: String
        public var stderr: String
        public var description: String { "exit \(status)\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
    }

    /// Runs `path` to completion with `input` on stdin and collects stdout/stderr (through files in a scratch
    /// directory); SIGKILL after `timeout`.
    public static func run(
        _ path: String, _ arguments: [String], environment: [String: String], input: String = "",
        timeout: Duration = .seconds(60)
    ) async throws -> Outcome {
        let dir = try PackagePaths.scratch("og-run")
        defer { try? FileManager.default.removeItem(at: dir) }
        let inPath = dir.appendingPathComponent("stdin").path
        let outPath = dir.appendingPathComponent("stdout").path
        let errPath = dir.appendingPathComponent("stderr").path
        try input.write(toFile: inPath, atomically: true, encoding: .utf8)
        let child = try spawn(
            path, arguments, environment: environment, stdin: inPath, stdout: outPath, stderr: errPath)
        let status = await child.wait(timeout: timeout)
        return Outcome(
            status: status,
            stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }
}

/// One thread that lives as long as the process and runs the jobs given to it, one at a time, while the caller
/// waits (see `ChildProcess.spawn`).
///
/// `@unchecked Sendable`: the job queue is only touched under `lock`; the semaphores are thread-safe.
final class SpawnerThread: @unchecked Sendable {
    static let shared = SpawnerThread()

    private let lock = NSLock()
    private var jobs: [() -> Void] = []
    private let available = DispatchSemaphore(value: 0)

    private init() {
        let thread = Thread { [self] in
            while true {
                available.wait()
                let job = lock.withLock { jobs.removeFirst() }
                job()
            }
        }
        thread.name = "offergate-test-spawner"
        thread.start()
    }

    /// Runs `job` on the spawner thread and returns its result (blocks the caller until then).
    func run<T>(_ job: @escaping () -> T) -> T {
        let done = DispatchSemaphore(value: 0)
        var result: T?
        lock.withLock {
            jobs.append {
                result = job()
                done.signal()
            }
        }
        available.signal()
        done.wait()
        return result!  // set by the job before it signalled `done`
    }
}
