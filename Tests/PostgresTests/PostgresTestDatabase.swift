import Foundation
import Postgres
import Synchronization
import Testing

/// A fresh database per test on the server named by OFFERGATE_TEST_DATABASE_URL (other test targets: copy this).
struct PostgresTestDatabase {
    struct MissingEnvironment: Error, CustomStringConvertible {
        var variable: String
        var description: String {
            "\(variable) is not set: run the tests through `ops/test` (it starts PostgreSQL and sets it)"
        }
    }

    /// The server's admin configuration (usually dbname=postgres). `restartable` picks the second server that
    /// `ops/test` starts for tests that restart PostgreSQL (OFFERGATE_TEST_RESTART_DATABASE_URL, in
    /// OFFERGATE_TEST_PG_DIR), so restarts never disturb tests running beside them.
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
        // The server may have restarted during the test: reconnect the admin connection if needed.
        if await !admin.isConnected { try await admin.connect() }
        do {
            try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        } catch let error as PostgresError where error.kind == .connection {
            try await admin.connect()
            try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
        await admin.close()
    }

    /// `ops/pg restart $OFFERGATE_TEST_PG_DIR`, awaited without blocking the cooperative pool.
    static func restartServer() async throws {
        guard let dir = ProcessInfo.processInfo.environment["OFFERGATE_TEST_PG_DIR"], !dir.isEmpty else {
            throw MissingEnvironment(variable: "OFFERGATE_TEST_PG_DIR")
        }
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ops/pg")
        // Not Foundation.Process: on Linux it notices the child's exit through an inherited descriptor, which the
        // daemonised server keeps open, so it would wait forever. system(3) on a dedicated thread waits for the
        // script only. The server must not inherit the runner's stdout/stderr either.
        func quoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let command = "/bin/bash \(quoted(script.path)) restart \(quoted(dir)) </dev/null >/dev/null 2>&1"
        let status: Int32 = await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: system(command)) }
            thread.start()
        }
        #expect(status == 0, "ops/pg restart failed with status \(status)")
    }
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

/// Expects `body` to throw a `PostgresError` and returns it.
func expectPostgresError(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> PostgresError? {
    do {
        try await body()
        Issue.record("expected a PostgresError, got success", sourceLocation: sourceLocation)
        return nil
    } catch let error as PostgresError {
        return error
    } catch {
        Issue.record("expected a PostgresError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
