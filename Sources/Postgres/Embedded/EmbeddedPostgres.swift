import CSpawn
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A PostgreSQL cluster that OfferGate starts for itself when no database URL is given.
///
/// Layout under `baseDirectory`: `pgdata/` (the cluster), `run/` (its Unix socket; no TCP port is opened) and
/// `postgres.log`. The cluster is initialised on first use and reused afterwards. When the current process is
/// root, the cluster runs as an unprivileged user (`postgres` by default) because `initdb` refuses root.
///
/// `start()` and `stop()` block while the server binaries run: call them at start-up and shutdown, from the main
/// thread or a dedicated thread, never from a task on the cooperative pool.
public struct EmbeddedPostgres: Sendable {
    public let baseDirectory: URL
    public let databaseName: String
    public let runAsUser: String?
    private let binDirectory: URL

    /// The per-user default base directory: `/var/lib/offergate` for root, else
    /// `$XDG_DATA_HOME/offergate` (or `~/.local/share/offergate`).
    public static func defaultBaseDirectory(environment: [String: String] = ProcessInfo.processInfo.environment)
        -> URL
    {
        if geteuid() == 0 { return URL(fileURLWithPath: "/var/lib/offergate") }
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("offergate")
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/share/offergate")
    }

    /// - Parameters:
    ///   - binDirectory: where `initdb`/`pg_ctl` live; found with `pg_config --bindir` or under
    ///     `/usr/lib/postgresql/*/bin` (newest first) when nil.
    ///   - runAsUser: the unprivileged owner when running as root (default `postgres`); ignored otherwise.
    public init(
        baseDirectory: URL, databaseName: String = "offergate", binDirectory: URL? = nil,
        runAsUser: String? = "postgres"
    ) throws(EmbeddedPostgresError) {
        self.baseDirectory = baseDirectory.standardizedFileURL
        self.databaseName = databaseName
        self.runAsUser = geteuid() == 0 ? (runAsUser ?? "postgres") : nil
        guard let bin = binDirectory ?? Self.findBinDirectory() else {
            throw .serverBinariesNotFound
        }
        self.binDirectory = bin
        // sockaddr_un.sun_path holds 108 bytes including the terminator; "/.s.PGSQL.5432" adds 15.
        guard socketDirectory.path.utf8.count + 15 < 108 else {
            throw .socketPathTooLong(socketDirectory.path)
        }
    }

    public var dataDirectory: URL { baseDirectory.appendingPathComponent("pgdata") }
    public var socketDirectory: URL { baseDirectory.appendingPathComponent("run") }
    public var logFile: URL { baseDirectory.appendingPathComponent("postgres.log") }

    /// The libpq connection string of the cluster's database.
    public var connectionString: String {
        "host=\(socketDirectory.path) user=postgres dbname=\(databaseName)"
    }

    /// Initialises the cluster if needed, starts it unless it is already running, and makes sure the database
    /// exists. Returns whether this call started the server (only then should `stop()` be called on exit).
    @discardableResult
    public func start() throws(EmbeddedPostgresError) -> Bool {
        try prepareDirectories()
        if !FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) {
            try run(
                "initdb",
                ["-D", dataDirectory.path, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale"],
                step: "initdb")
        }
        var startedHere = false
        if !isRunning() {
            try run(
                "pg_ctl",
                [
                    "-D", dataDirectory.path, "-l", logFile.path, "-w", "-t", "60",
                    "-o", "-k \(socketDirectory.path) -c listen_addresses='' -c max_connections=200", "start",
                ], step: "pg_ctl start")
            startedHere = true
        }
        try createDatabaseIfMissing()
        return startedHere
    }

    /// Stops the cluster with a fast shutdown (active sessions are rolled back, data is safe).
    public func stop() throws(EmbeddedPostgresError) {
        guard isRunning() else { return }
        try run("pg_ctl", ["-D", dataDirectory.path, "-m", "fast", "-w", "-t", "60", "stop"], step: "pg_ctl stop")
    }

    public func isRunning() -> Bool {
        (try? run("pg_ctl", ["-D", dataDirectory.path, "status"], step: "pg_ctl status")) != nil
    }

    // MARK: - Internals

    private func prepareDirectories() throws(EmbeddedPostgresError) {
        let fm = FileManager.default
        do {
            try fm.createDirectory(at: baseDirectory, withIntermediateDirectories: true)
            try fm.createDirectory(at: socketDirectory, withIntermediateDirectories: true)
        } catch {
            throw .filesystem(path: baseDirectory.path, message: "\(error)")
        }
        guard let user = runAsUser else { return }
        guard let pw = getpwnam(user) else { throw .noSuchUser(user) }
        let uid = pw.pointee.pw_uid
        let gid = pw.pointee.pw_gid
        // The server user must own its data and socket directories and reach them through every parent.
        for dir in [baseDirectory, socketDirectory] {
            guard chown(dir.path, uid, gid) == 0 else {
                throw .filesystem(path: dir.path, message: String(cString: strerror(errno)))
            }
        }
        chmod(baseDirectory.path, 0o755)
        var parent = baseDirectory.deletingLastPathComponent()
        while parent.path != "/" && !parent.path.isEmpty {
            var st = stat()
            if stat(parent.path, &st) == 0, st.st_mode & 0o001 == 0 {
                chmod(parent.path, st.st_mode & 0o7777 | 0o001)
            }
            parent = parent.deletingLastPathComponent()
        }
    }

    private func createDatabaseIfMissing() throws(EmbeddedPostgresError) {
        do {
            try run(
                "createdb", ["-h", socketDirectory.path, "-U", "postgres", databaseName], step: "createdb")
        } catch .commandFailed(_, _, let output) where output.contains("already exists") {
            return
        }
    }

    /// Runs a server tool and waits for it. Uses `posix_spawn` + `waitpid` with output to a file rather than
    /// Foundation's `Process` and a pipe: `pg_ctl start` leaves the postmaster running with inherited descriptors,
    /// which makes pipe- or descriptor-based exit detection wait for the server instead of the tool.
    @discardableResult
    private func run(_ tool: String, _ arguments: [String], step: String) throws(EmbeddedPostgresError) -> String {
        let executable = binDirectory.appendingPathComponent(tool).path
        var argv: [String]
        if let user = runAsUser {
            let runuser =
                FileManager.default.isExecutableFile(atPath: "/sbin/runuser") ? "/sbin/runuser" : "/usr/sbin/runuser"
            argv = [runuser, "-u", user, "--", executable] + arguments
        } else {
            argv = [executable] + arguments
        }
        let outputPath = baseDirectory.appendingPathComponent(".\(tool).\(getpid()).out").path
        defer { unlink(outputPath) }
        let outputFD = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard outputFD >= 0 else {
            throw .filesystem(path: outputPath, message: String(cString: strerror(errno)))
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outputFD, 1)
        posix_spawn_file_actions_adddup2(&actions, outputFD, 2)
        // The server outlives this call: it must not hold the caller's sockets or pipes open.
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArgs { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, &cArgs, environ)
        close(outputFD)
        guard spawned == 0 else {
            throw .commandFailed(step: step, status: -1, output: String(cString: strerror(spawned)))
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw .commandFailed(step: step, status: -1, output: "waitpid failed") }
        }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED / WEXITSTATUS are macros: decode the wait status by hand.
        let exitStatus: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exitStatus == 0 else {
            throw .commandFailed(step: step, status: exitStatus, output: text)
        }
        return text
    }

    static func findBinDirectory() -> URL? {
        let fm = FileManager.default
        if let env = ProcessInfo.processInfo.environment["OFFERGATE_PG_BINDIR"], !env.isEmpty {
            return URL(fileURLWithPath: env)
        }
        for pgConfig in ["/usr/bin/pg_config", "/usr/local/bin/pg_config"] where fm.isExecutableFile(atPath: pgConfig) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: pgConfig)
            process.arguments = ["--bindir"]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            if (try? process.run()) != nil {
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                let path = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                if fm.isExecutableFile(atPath: path + "/initdb") { return URL(fileURLWithPath: path) }
            }
        }
        let root = "/usr/lib/postgresql"
        let versions = ((try? fm.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted(by: >)
        for version in versions where fm.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return URL(fileURLWithPath: "\(root)/\(version)/bin")
        }
        return nil
    }
}

/// Why the embedded cluster could not be prepared, started or stopped.
public enum EmbeddedPostgresError: Error, CustomStringConvertible, Equatable {
    case serverBinariesNotFound
    case socketPathTooLong(String)
    case noSuchUser(String)
    case filesystem(path: String, message: String)
    case commandFailed(step: String, status: Int32, output: String)

    public var description: String {
        switch self {
        case .serverBinariesNotFound:
            return "PostgreSQL server binaries (initdb, pg_ctl) not found: install postgresql-15 "
                + "or set OFFERGATE_PG_BINDIR, or pass --database-url"
        case .socketPathTooLong(let path):
            return "socket directory path is too long for a Unix socket: \(path) (choose a shorter --data-dir)"
        case .noSuchUser(let user):
            return "running as root needs an unprivileged user for PostgreSQL, but user '\(user)' does not exist"
        case .filesystem(let path, let message):
            return "cannot prepare \(path): \(message)"
        case .commandFailed(let step, let status, let output):
            let tail = output.split(separator: "\n").suffix(5).joined(separator: "\n")
            return "\(step) failed (exit \(status)): \(tail)"
        }
    }
}
