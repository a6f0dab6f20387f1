// Runs the built executables as an operator would: offergate on a Unix socket over a fresh database, offerctl as a
// subprocess whose stdout/stderr go to files (not pipes: a grandchild holding a pipe open would hang the reader).
import Foundation
import JSONRPC
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

enum Paths {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    /// Where the built executables are: beside the test runner (so `-c release` tests use release binaries), else
    /// `.build/debug` of the package.
    static let binDir: URL = {
        var candidates: [URL] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        candidates.append(root.appendingPathComponent(".build/debug"))
        return candidates.first { dir in
            ["offerctl", "offergate"].allSatisfy { access(dir.appendingPathComponent($0).path, X_OK) == 0 }
        } ?? candidates[candidates.count - 1]
    }()
    static let offerctl = binDir.appendingPathComponent("offerctl").path
    static let offergate = binDir.appendingPathComponent("offergate").path

    struct MissingBinary: Error, CustomStringConvertible {
        let path: String
        var description: String { "\(path) is missing: build first (swift build --build-tests)" }
    }

    static func check() throws {
        for path in [offerctl, offergate] where access(path, X_OK) != 0 { throw MissingBinary(path: path) }
    }

    /// A fresh scratch directory.
    static func scratch() throws -> URL {
        let url = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("offerctl-test-" + UUID().uuidString.prefix(8).lowercased())
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// What a finished process left behind.
struct Outcome: Sendable, CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var description: String { "exit \(status)\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }

    /// stdout parsed as JSON (fails the test when it is not).
    func json(sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
        do {
            return try JSONParsing.parse(stdout)
        } catch {
            Issue.record("stdout is not JSON: \(stdout)", sourceLocation: sourceLocation)
            throw error
        }
    }
}

struct SpawnError: Error, CustomStringConvertible {
    let description: String
}

enum Spawn {
    /// The test runner's environment without anything that would steer offerctl or offergate.
    static func baseEnvironment() -> [String: String] {
        ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("OFFERGATE_") && $0.key != "DATABASE_URL" }
    }

    /// Starts `path` with stdin from /dev/null and stdout/stderr into the given files.
    static func start(
        _ path: String, _ arguments: [String], environment: [String: String], stdout: String, stderr: String
    )
        throws -> pid_t
    {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
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
        return pid
    }

    /// Waits for `pid` on a dedicated thread (waitpid blocks; the cooperative pool must not); SIGKILL after
    /// `timeout`. Returns the exit status, or 128 + signal.
    static func wait(_ pid: pid_t, timeout: Duration) async -> Int32 {
        let killer = Task {
            try await Task.sleep(for: timeout)
            kill(pid, SIGKILL)
        }
        defer { killer.cancel() }
        let raw: Int32 = await withCheckedContinuation { continuation in
            let thread = Thread {
                var raw: Int32 = 0
                while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: raw)
            }
            thread.start()
        }
        return raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
    }

    /// Runs `path` to completion and collects its output.
    static func run(
        _ path: String, _ arguments: [String], environment: [String: String], timeout: Duration = .seconds(60)
    )
        async throws -> Outcome
    {
        let dir = try Paths.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("stdout").path
        let err = dir.appendingPathComponent("stderr").path
        let pid = try start(path, arguments, environment: environment, stdout: out, stderr: err)
        let status = await wait(pid, timeout: timeout)
        return Outcome(
            status: status,
            stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// offerctl with exactly this environment (plus the base one).
    static func offerctl(_ arguments: [String], environment: [String: String] = [:]) async throws -> Outcome {
        try Paths.check()
        return try await run(Paths.offerctl, arguments, environment: baseEnvironment().merging(environment) { $1 })
    }
}

/// Random secrets for one test.
enum Secrets {
    static func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }
    static func masterKey() -> String { Data(bytes(32)).base64EncodedString() }
    static func adminKey() -> String { "adm_" + bytes(24).map { String(format: "%02x", $0) }.joined() }
}

/// One `offergate serve --listen unix:…` over a fresh database, stopped (SIGTERM, then SIGKILL) at the end.
struct TestGateway: Sendable {
    let pid: pid_t
    let socketPath: String
    let databaseURL: String
    let adminKey: String
    let masterKey: String
    let scratch: URL

    var connect: String { "unix:" + socketPath }

    /// Runs `body` with a started gateway over its own database; everything is torn down afterwards.
    static func with(_ body: (TestGateway) async throws -> Void) async throws {
        try Paths.check()
        try await PostgresTestDatabase.with { configuration in
            let gateway = try await start(databaseURL: configuration.conninfo)
            do {
                try await body(gateway)
            } catch {
                await gateway.stop()
                throw error
            }
            await gateway.stop()
        }
    }

    static func start(databaseURL: String) async throws -> TestGateway {
        let scratch = try Paths.scratch()
        // Unix socket paths are short (108 bytes): keep it in /tmp.
        let socketPath = "/tmp/ogctl-\(UUID().uuidString.prefix(8).lowercased()).sock"
        let adminKey = Secrets.adminKey()
        let masterKey = Secrets.masterKey()
        var environment = Spawn.baseEnvironment()
        environment["OFFERGATE_ADMIN_KEY"] = adminKey
        environment["OFFERGATE_MASTER_KEY"] = masterKey
        let pid = try Spawn.start(
            Paths.offergate,
            [
                "serve", "--listen", "unix:" + socketPath, "--database-url", databaseURL, "--log-level", "warning",
                "--shutdown-grace", "2", "--pool-size", "4",
            ],
            environment: environment, stdout: scratch.appendingPathComponent("gateway.out").path,
            stderr: scratch.appendingPathComponent("gateway.err").path)
        let gateway = TestGateway(
            pid: pid, socketPath: socketPath, databaseURL: databaseURL, adminKey: adminKey, masterKey: masterKey,
            scratch: scratch)
        // Ready once it answers system.health on its socket.
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == pid {
                let log =
                    (try? String(contentsOf: scratch.appendingPathComponent("gateway.err"), encoding: .utf8)) ?? ""
                throw SpawnError(description: "offergate exited early (status \(raw)): \(log)")
            }
            if FileManager.default.fileExists(atPath: socketPath),
                let client = try? await RPCClient.connect(to: "unix:" + socketPath),
                (try? await client.call(method: "system.health", timeout: .seconds(5))) != nil
            {
                client.close()
                return gateway
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        await gateway.stop()
        throw SpawnError(description: "offergate did not answer on \(socketPath) within 30 s")
    }

    func stop() async {
        kill(pid, SIGTERM)
        _ = await Spawn.wait(pid, timeout: .seconds(10))
        try? FileManager.default.removeItem(atPath: socketPath)
        try? FileManager.default.removeItem(at: scratch)
    }

    /// offerctl against this gateway: `--connect` and the admin key in the environment (override with `environment`).
    func ctl(_ arguments: [String], environment: [String: String] = [:]) async throws -> Outcome {
        var env = ["OFFERGATE_ADMIN_KEY": adminKey]
        env.merge(environment) { $1 }
        return try await Spawn.offerctl(arguments + ["--connect", connect], environment: env)
    }

    /// A direct JSON-RPC client (to check what offerctl did, e.g. that a rotated key works).
    func authenticate(apiKey: String) async throws -> JSONValue {
        let client = try await RPCClient.connect(to: connect)
        defer { client.close() }
        return try await client.call(
            method: "session.authenticate", params: ["apiKey": .string(apiKey)], timeout: .seconds(10))
    }

    /// Writes a scratch file for offerctl to read.
    func file(_ name: String, _ contents: String) throws -> String {
        let url = scratch.appendingPathComponent(name)
        try contents.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }
}
