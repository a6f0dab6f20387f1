import Foundation
import Postgres

/// A fresh database per test: `og_test_<uuid>` on a `TestServer`, dropped afterwards (`WITH (FORCE)`), also when the
/// test throws. The admin connection is reconnected first if the server restarted during the test.
public enum TestDatabase {
    /// Creates the database, runs `body` with its configuration, drops it.
    public static func with<T>(
        on server: TestServer = .main, applicationName: String = "offergate-tests",
        _ body: (PostgresConfiguration) async throws -> T
    ) async throws -> T {
        let admin = try await server.configuration(applicationName: applicationName)
        let name = "og_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let connection = try await PostgresConnection.connect(configuration: admin)
        do {
            try await connection.simpleQuery(unsafeSQL: "CREATE DATABASE \(name)")
        } catch {
            await connection.close()
            throw error
        }
        let configuration = try admin.with(database: name)
        do {
            let value = try await body(configuration)
            try await drop(name, admin: connection)
            return value
        } catch {
            try? await drop(name, admin: connection)
            throw error
        }
    }

    /// Like `with(on:applicationName:_:)`, handing `body` the database's conninfo string.
    public static func withConninfo<T>(
        on server: TestServer = .main, applicationName: String = "offergate-tests",
        _ body: (String) async throws -> T
    ) async throws -> T {
        try await with(on: server, applicationName: applicationName) { configuration in
            try await body(configuration.conninfo)
        }
    }

    private static func drop(_ name: String, admin: PostgresConnection) async throws {
        do {
            // The server may have restarted during the test: reconnect the admin connection if needed.
            if await !admin.isConnected { try await admin.connect() }
            do {
                try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            } catch let error as PostgresError where error.kind == .connection {
                try await admin.connect()
                try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            }
        } catch {
            await admin.close()
            throw error
        }
        await admin.close()
    }
}

/// Waits until `condition` holds, or `timeout` passes; returns its last value. The one deadline-bound wait the
/// tests share: use it to wait for a state or an event (a notification seen, a pool state, a process answering),
/// never a fixed sleep. The 20 ms pause is only the interval between two looks; the wait ends at the first look
/// that sees the condition. The default is long because the test process, on 2 cores with every target running,
/// stalls for seconds at a time; only a failing wait takes that long.
public func eventually(
    timeout: Duration = .seconds(30), _ condition: @Sendable () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// Waits until `condition` holds for as long as `progress` keeps moving: gives up once `progress` has not changed
/// for `stall` (or after `limit` in all); returns `condition`'s last value. For waits on a storm whose speed is the
/// machine's (a storm of redemptions until a limit is reached): a slow, loaded run still finishes, a stuck one
/// fails after `stall`, and what is checked afterwards is the same.
public func eventually(
    progressing progress: @Sendable () -> Int, stall: Duration, limit: Duration = .seconds(300),
    _ condition: @Sendable () -> Bool
) async -> Bool {
    let clock = ContinuousClock()
    let end = clock.now + limit
    var last = progress()
    var lastMoved = clock.now
    while clock.now < end, clock.now - lastMoved < stall {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
        let now = progress()
        if now != last { (last, lastMoved) = (now, clock.now) }
    }
    return condition()
}
