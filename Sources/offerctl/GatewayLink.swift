// How offerctl reaches a gateway: a socket (--connect / OFFERGATE_CONNECT), or an `offergate serve --stdio` child
// it starts itself and speaks to over pipes. Then it authenticates with the admin key.
import CLIKit
import CSpawn
import Foundation
import JSONRPC
import Synchronization
import Threads

#if canImport(Glibc)
    import Glibc
#endif

/// An authenticated admin connection to a gateway.
final class GatewayLink: Sendable {
    let client: RPCClient
    let child: ChildProcess?
    let timeout: Duration
    /// Where the gateway is, for messages.
    let peer: String

    private init(client: RPCClient, child: ChildProcess?, timeout: Duration, peer: String) {
        self.client = client
        self.child = child
        self.timeout = timeout
        self.peer = peer
    }

    /// Connects (or starts a gateway), then authenticates with the admin key.
    static func open(_ command: ParsedCommand) async throws -> GatewayLink {
        let timeoutSeconds = try command.seconds("timeout") ?? 60
        guard timeoutSeconds > 0 else { throw UsageError("--timeout must be more than 0", command: command.path) }
        let timeout = Duration.milliseconds(Int64(timeoutSeconds * 1000))
        let configured = try AdminKey.configured(command)
        let link: GatewayLink
        if let address = command.value("connect") {
            guard configured != nil else { throw AdminKey.missing(command) }
            let parsed: ListenAddress
            do {
                parsed = try ListenAddress(parsing: address)
            } catch {
                throw UsageError("--connect takes unix:PATH or tcp:HOST:PORT (\(error.context))", command: command.path)
            }
            let client: RPCClient
            do {
                client = try await RPCClient.connect(to: parsed)
            } catch let error as JSONRPCError {
                throw Failure("cannot connect to the gateway at \(address): \(Self.explain(error))")
            }
            link = GatewayLink(client: client, child: nil, timeout: timeout, peer: address)
        } else {
            // Embedded mode may create the admin key itself; with a database URL it must be given.
            if configured == nil, command.value("database-url") != nil { throw AdminKey.missing(command) }
            let child = try ChildProcess.startGateway(command)
            let client = try await RPCClient.attach(readFD: child.stdoutFD, writeFD: child.stdinFD)
            link = GatewayLink(client: client, child: child, timeout: timeout, peer: "offergate serve --stdio")
        }
        do {
            try await link.authenticate(command, configured: configured)
        } catch {
            await link.close()
            throw error
        }
        return link
    }

    /// `system.health` first (it works unauthenticated, and a gateway started here is ready once it answers), then
    /// `session.authenticate` with the admin key.
    private func authenticate(_ command: ParsedCommand, configured: String?) async throws {
        _ = try await call("system.health", [:])
        let key: String
        if let configured {
            key = configured
        } else if let found = AdminKey.embedded(command) {
            key = found
        } else {
            throw AdminKey.missing(command)
        }
        let session = try await call("session.authenticate", ["apiKey": .string(key)])
        guard session["role"]?.stringValue == "admin" else {
            throw Failure(
                "the key given is not the admin key (it authenticates a tenant); offerctl needs OFFERGATE_ADMIN_KEY")
        }
    }

    /// Calls `method`; connection failures become `Failure`s that say what happened, `RPCError`s pass through.
    func call(_ method: String, _ params: JSONObject, timeout: Duration? = nil) async throws -> JSONValue {
        do {
            return try await client.call(method: method, params: .object(params), timeout: timeout ?? self.timeout)
        } catch let error as JSONRPCError {
            if let child {
                client.close()
                if error.code == .timeout {
                    _ = await child.wait(killAfter: .zero)
                    throw Failure(
                        "no answer from the gateway offerctl started to \(method) within the timeout (--timeout);"
                            + " it was stopped")
                }
                let status = await child.wait(killAfter: .seconds(5))
                throw Failure(
                    "the gateway offerctl started (offergate serve --stdio) \(status.description) before answering"
                        + " \(method); see its messages above")
            }
            if error.code == .timeout {
                throw Failure("no answer from the gateway at \(peer) to \(method) within the timeout (--timeout)")
            }
            throw Failure("lost the connection to the gateway at \(peer) during \(method): \(Self.explain(error))")
        }
    }

    /// Closes the connection; a gateway started here gets EOF, finishes and exits (killed if it lingers).
    func close() async {
        guard let child else {
            client.close()
            return
        }
        let alreadyReported = child.hasExited
        client.finishWriting()
        let status = await child.wait(killAfter: .seconds(10))
        client.close()
        if !status.isSuccess, !alreadyReported {
            Console.error("offerctl: note: the gateway offerctl started \(status.description)")
        }
    }

    static func explain(_ error: JSONRPCError) -> String {
        if let code = error.errno { return "\(error.context): \(String(cString: strerror(code)))" }
        return error.context
    }
}

/// Where the admin key comes from: `--admin-key-file` (explicit, wins), else OFFERGATE_ADMIN_KEY, else (a gateway
/// started here in embedded mode) the `admin.key` it keeps in its data directory. Never from a flag's value.
enum AdminKey {
    static func configured(_ command: ParsedCommand) throws -> String? {
        if let path = command.value("admin-key-file") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw Failure("cannot read the admin key file \(path)")
            }
            let key = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !key.isEmpty else { throw Failure("the admin key file \(path) is empty") }
            return key
        }
        if let key = ProcessInfo.processInfo.environment["OFFERGATE_ADMIN_KEY"], !key.isEmpty { return key }
        return nil
    }

    /// `admin.key` in the embedded cluster's directory (created by the gateway on its first start).
    static func embedded(_ command: ParsedCommand) -> String? {
        let base = command.value("data-dir").map { URL(fileURLWithPath: $0) } ?? defaultDataDirectory()
        guard let data = FileManager.default.contents(atPath: base.appendingPathComponent("admin.key").path) else {
            return nil
        }
        let key = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return key.isEmpty ? nil : key
    }

    /// The gateway's default data directory (mirrors `EmbeddedPostgres.defaultBaseDirectory`).
    static func defaultDataDirectory() -> URL {
        let environment = ProcessInfo.processInfo.environment
        if geteuid() == 0 { return URL(fileURLWithPath: "/var/lib/offergate") }
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("offergate")
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/share/offergate")
    }

    static func missing(_ command: ParsedCommand) -> UsageError {
        UsageError("no admin key: set OFFERGATE_ADMIN_KEY or pass --admin-key-file FILE", command: command.path)
    }
}

/// How a child process ended.
struct ExitDescription: Sendable, CustomStringConvertible {
    let raw: Int32
    var isSuccess: Bool { raw == 0 }
    var exitCode: Int32? { raw & 0x7F == 0 ? (raw >> 8) & 0xFF : nil }
    var description: String {
        if let code = exitCode { return "exited with status \(code)" }
        return "was killed by signal \(raw & 0x7F)"
    }
}

/// A child process started with posix_spawn (not Foundation's Process, which on Linux can wait forever on a pipe a
/// grandchild inherited). Only its pid and our pipe ends are kept.
final class ChildProcess: Sendable {
    let pid: pid_t
    let stdinFD: Int32
    let stdoutFD: Int32
    private let status = Mutex<Int32?>(nil)

    private init(pid: pid_t, stdinFD: Int32, stdoutFD: Int32) {
        self.pid = pid
        self.stdinFD = stdinFD
        self.stdoutFD = stdoutFD
    }

    /// `offergate serve --stdio` with the database options passed through the environment (a URL may hold a
    /// password: it stays off the command line other users can read).
    static func startGateway(_ command: ParsedCommand) throws -> ChildProcess {
        guard let path = locate("offergate") else {
            throw Failure("cannot find the offergate executable next to offerctl or on PATH (or pass --connect ADDR)")
        }
        // One operator's command at a time: a small pool is plenty, and spares the database's connection slots.
        var arguments = [path, "serve", "--stdio", "--log-level", "warning", "--pool-size", "4"]
        var environment = ProcessInfo.processInfo.environment
        if let file = command.value("admin-key-file") {
            arguments += ["--admin-key-file", file]
            environment["OFFERGATE_ADMIN_KEY"] = nil
        }
        if let url = command.value("database-url") { environment["DATABASE_URL"] = url }
        if let dir = command.value("data-dir") { environment["OFFERGATE_DATA_DIR"] = dir }
        return try spawn(path: path, arguments: arguments, environment: environment)
    }

    /// Finds `name` next to this executable (/proc/self/exe, then argv[0]), else on PATH.
    static func locate(_ name: String) -> String? {
        var candidates: [String] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(name).path)
        }
        let argv0 = CommandLine.arguments.first ?? ""
        if argv0.contains("/") {
            candidates.append(URL(fileURLWithPath: argv0).deletingLastPathComponent().appendingPathComponent(name).path)
        }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") where !dir.isEmpty {
            candidates.append(String(dir) + "/" + name)
        }
        return candidates.first { access($0, X_OK) == 0 }
    }

    static func spawn(path: String, arguments: [String], environment: [String: String]) throws -> ChildProcess {
        var toChild: [Int32] = [-1, -1]
        var fromChild: [Int32] = [-1, -1]
        guard pipe(&toChild) == 0 else { throw Failure("pipe(2): \(String(cString: strerror(errno)))") }
        guard pipe(&fromChild) == 0 else {
            close(toChild[0])
            close(toChild[1])
            throw Failure("pipe(2): \(String(cString: strerror(errno)))")
        }
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on 0 and 1; every other descriptor is closed in the child (stderr stays ours).
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, envp)
        close(toChild[0])
        close(fromChild[1])
        guard result == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw Failure("cannot start \(path): \(String(cString: strerror(result)))")
        }
        return ChildProcess(pid: pid, stdinFD: toChild[1], stdoutFD: fromChild[0])
    }

    /// Whether `wait` has seen the exit already.
    var hasExited: Bool { status.withLock { $0 != nil } }

    /// Waits for the exit (on a dedicated thread: waitpid blocks); sends SIGTERM after `killAfter`, SIGKILL 5 s later.
    func wait(killAfter: Duration) async -> ExitDescription {
        if let known = status.withLock({ $0 }) { return ExitDescription(raw: known) }
        let pid = self.pid
        let killer = Task {
            try await Task.sleep(for: killAfter)
            kill(pid, SIGTERM)
            try await Task.sleep(for: .seconds(5))
            kill(pid, SIGKILL)
        }
        defer { killer.cancel() }
        let raw: Int32 = await withCheckedContinuation { continuation in
            startThread(named: "offerctl-waitpid") {
                var raw: Int32 = 0
                while waitpid(pid, &raw, 0) < 0 {
                    if errno != EINTR {
                        raw = 0
                        break
                    }
                }
                continuation.resume(returning: raw)
            }
        }
        status.withLock { $0 = raw }
        return ExitDescription(raw: raw)
    }
}
