import Foundation
import Postgres
import Testing

/// A fresh database per test on the server named by OFFERGATE_TEST_DATABASE_URL (copied from PostgresTests).
struct TestDatabase {
    struct MissingEnvironment: Error, CustomStringConvertible {
        var variable: String
        var description: String {
            "\(variable) is not set: run the tests through `ops/test` (it starts PostgreSQL and sets it)"
        }
    }

    /// The server's admin configuration. `restartable` picks the server that tests may stop and start
    /// (OFFERGATE_TEST_RESTART_DATABASE_URL in OFFERGATE_TEST_PG_DIR).
    static func serverConfiguration(restartable: Bool = false) throws -> PostgresConfiguration {
        let variable = restartable ? "OFFERGATE_TEST_RESTART_DATABASE_URL" : "OFFERGATE_TEST_DATABASE_URL"
        guard let url = ProcessInfo.processInfo.environment[variable], !url.isEmpty else {
            throw MissingEnvironment(variable: variable)
        }
        return try PostgresConfiguration(conninfo: url, applicationName: "offergate-tests")
    }

    /// Creates `og_test_<random>`, runs `body` with its configuration, drops it (also when `body` throws).
    static func with<T>(restartable: Bool = false, _ body: (PostgresConfiguration) async throws -> T) async throws
        -> T
    {
        let server = try serverConfiguration(restartable: restartable)
        let name = "og_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try await PostgresConnection.connect(configuration: server)
        try await admin.simpleQuery(unsafeSQL: "CREATE DATABASE \(name)")
        let configuration = try server.with(database: name)
        do {
            let value = try await body(configuration)
            try await drop(name, admin: admin)
            return value
        } catch {
            try? await drop(name, admin: admin)
            throw error
        }
    }

    private static func drop(_ name: String, admin: PostgresConnection) async throws {
        // The server may have been restarted during the test: reconnect the admin connection if needed.
        if await !admin.isConnected { try await admin.connect() }
        do {
            try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        } catch let error as PostgresError where error.kind == .connection {
            try await admin.connect()
            try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
        await admin.close()
    }

    /// Runs `ops/pg <command> $OFFERGATE_TEST_PG_DIR` (the restartable server) without blocking the cooperative
    /// pool. Not Foundation.Process: the daemonised server keeps inherited descriptors open, so it would never
    /// notice the script's exit; system(3) on a dedicated thread waits for the script only.
    static func pg(_ command: String) async throws {
        guard let dir = ProcessInfo.processInfo.environment["OFFERGATE_TEST_PG_DIR"], !dir.isEmpty else {
            throw MissingEnvironment(variable: "OFFERGATE_TEST_PG_DIR")
        }
        let script = packageRoot.appendingPathComponent("ops/pg")
        func quoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        // Close every inherited descriptor above stderr first: the daemonised server would otherwise keep open the
        // pipes of processes other tests spawned at the same moment (so those would never see EOF).
        let closeAll = #"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null; "#
        let line = "/bin/bash -c \(quoted(closeAll + "exec /bin/bash \(quoted(script.path)) \(command) \(quoted(dir))"))"
            + " </dev/null >/dev/null 2>&1"
        let status: Int32 = await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: system(line)) }
            thread.start()
        }
        #expect(status == 0, "ops/pg \(command) failed with status \(status)")
    }

    /// The package root (three levels above this file).
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
}

/// Polls `condition` until true or `timeout` passes.
func eventually(
    timeout: Duration = .seconds(10), _ condition: @Sendable () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
