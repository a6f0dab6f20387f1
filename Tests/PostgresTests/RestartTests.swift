import Foundation
import OfferTestSupport
import Postgres
import Synchronization
import Testing

/// Collects a listener's events on a background task.
final class EventLog: Sendable {
    let events = Mutex<[PostgresListenerEvent]>([])

    var notifications: [PostgresNotification] {
        events.withLock { $0.compactMap { if case .notification(let n) = $0 { n } else { nil } } }
    }

    var reconnects: Int {
        events.withLock { $0.filter { $0 == .reconnected }.count }
    }
}

extension PostgresIntegrationTests {
    @Suite("Server restarts and LISTEN/NOTIFY")
    struct RestartTests {
        /// This suite's own cluster: its restarts never disturb suites running beside it.
        static let server = TestServer.restartable("postgres-restart")

        @Test func poolRecoversAfterServerRestart() async throws {
            try await TestDatabase.with(on: RestartTests.server) { config in
                let pool = PostgresPool(configuration: config, maxConnections: 2, acquireTimeout: .seconds(10))
                try await pool.query("CREATE TABLE t (n int)")
                let pidBefore = try await pool.query("SELECT pg_backend_pid()").scalar(Int32.self)

                // A connection in use across the restart: its next query fails with a retryable error.
                let inFlight = await expectPostgresError {
                    try await pool.withConnection { connection in
                        try await connection.query("SELECT 1")
                        try await RestartTests.server.pg("restart")
                        try await connection.query("INSERT INTO t VALUES (\(1))")
                    }
                }
                #expect(inFlight?.isRetryable == true)
                #expect(inFlight?.kind == .connection || inFlight?.sqlState == "57P01")
                // The broken connection was discarded, not returned to the pool.
                #expect(pool.stats().inUse == 0)

                // The next calls work without restarting anything: broken/idle-dead connections are replaced.
                try await pool.query("INSERT INTO t VALUES (\(2))")
                let pidAfter = try await pool.query("SELECT pg_backend_pid()").scalar(Int32.self)
                #expect(pidAfter != pidBefore)

                // Idle connections that died during a restart are noticed on lease (the server's goodbye and EOF
                // are already in the socket) and reconnected in place: the very next call works.
                #expect(pool.stats().idle >= 1)
                try await RestartTests.server.pg("restart")
                try await pool.query("INSERT INTO t VALUES (\(3))")
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for n in 4...6 { group.addTask { try await pool.query("INSERT INTO t VALUES (\(n))") } }
                    try await group.waitForAll()
                }
                let values = try await pool.query("SELECT array_agg(n ORDER BY n) FROM t").scalar([Int64].self)
                #expect(values == [2, 3, 4, 5, 6])
                await pool.close()
            }
        }

        @Test func listenerDeliversNotificationsAndRelistensAfterRestart() async throws {
            try await TestDatabase.with(on: RestartTests.server) { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                let listener = try await PostgresListener.start(
                    configuration: config, channels: ["catalog", "Mixed Case \"chan\""],
                    reconnectDelay: .milliseconds(100))
                // Its thread carries its name for the kernel (`top -H`, `perf`), not only for Foundation.
                #expect(try threadNames().contains("pg-listener"))
                let log = EventLog()
                let consumer = Task {
                    for await event in listener.events { log.events.withLock { $0.append(event) } }
                }
                try await pool.notify(channel: "catalog", payload: "tenant-1 ü")
                try await pool.notify(channel: "Mixed Case \"chan\"", payload: "")
                try await pool.notify(channel: "not-listened", payload: "x")
                #expect(await eventually { log.notifications.count >= 2 })
                #expect(log.notifications.map(\.channel) == ["catalog", "Mixed Case \"chan\""])
                #expect(log.notifications.first?.payload == "tenant-1 ü")

                // Channels can be added later.
                listener.listen("late")
                #expect(
                    await eventually {
                        try? await pool.notify(channel: "late", payload: "l")
                        return log.notifications.contains { $0.channel == "late" }
                    })

                try await RestartTests.server.pg("restart")
                #expect(await eventually(timeout: .seconds(15)) { log.reconnects == 1 })
                // The pool's idle connection died too; the listener re-LISTENed on every channel.
                try await pool.notify(channel: "catalog", payload: "after-restart")
                try await pool.notify(channel: "late", payload: "late-after-restart")
                #expect(
                    await eventually {
                        Set(log.notifications.map(\.payload)).isSuperset(of: ["after-restart", "late-after-restart"])
                    })
                // Order: the reconnect marker comes before post-restart notifications.
                let events = log.events.withLock { $0 }
                let marker = events.firstIndex(of: .reconnected)
                let after = events.firstIndex {
                    if case .notification(let n) = $0 { n.payload == "after-restart" } else { false }
                }
                #expect(marker != nil && after != nil && marker! < after!)

                listener.stop()
                await consumer.value
                await pool.close()
            }
        }
    }
}
