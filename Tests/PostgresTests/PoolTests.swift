import Foundation
import OfferTestSupport
import Postgres
import Synchronization
import Testing

/// A one-shot signal a test can wait on.
actor Gate {
    private var open = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if open { return }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        open = true
        for continuation in waiting { continuation.resume() }
        waiting.removeAll()
    }
}

extension PostgresIntegrationTests {
    @Suite("Pool")
    struct PoolTests {
        @Test func opensLazilyAndReusesConnections() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 3)
                #expect(pool.stats() == .init(open: 0, idle: 0, inUse: 0, connecting: 0, waiters: 0, maxConnections: 3))
                let pid1 = try await pool.query("SELECT pg_backend_pid()").scalar(Int32.self)
                let pid2 = try await pool.query("SELECT pg_backend_pid()").scalar(Int32.self)
                #expect(pid1 == pid2)
                #expect(pool.stats().open == 1)
                #expect(pool.stats().idle == 1)
                // Session settings applied at connect.
                let settings = try await pool.query(
                    """
                    SELECT current_setting('TimeZone'), current_setting('DateStyle'),
                           current_setting('extra_float_digits'), current_setting('client_encoding')
                    """)
                let (tz, style, digits, encoding) = try settings[0].decode(
                    String.self, String.self, String.self, String.self)
                #expect([tz, style, digits, encoding] == ["UTC", "ISO, MDY", "3", "UTF8"])
                // Concurrent work opens more, never beyond max: four holders on a pool of three, held by a gate
                // until the pool is seen with three in use and the fourth waiting.
                let gate = Gate()
                let holders = Task {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for _ in 0..<4 {
                            group.addTask { try await pool.withConnection { _ in await gate.wait() } }
                        }
                        try await group.waitForAll()
                    }
                }
                #expect(await eventually { pool.stats().inUse == 3 && pool.stats().waiters == 1 })
                #expect(pool.stats().open == 3)
                await gate.release()
                try await holders.value
                let stats = pool.stats()
                #expect(stats.open <= 3 && stats.open >= 2)
                #expect(stats.inUse == 0 && stats.waiters == 0)
                await pool.close()
                #expect(pool.stats().open == 0)
                let closed = await expectPostgresError { try await pool.query("SELECT 1") }
                #expect(closed?.kind == .poolClosed)
            }
        }

        @Test func exhaustionTimesOutWaitersAndRecoversWhenReleased() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1, acquireTimeout: .milliseconds(200))
                let gate = Gate()
                let holder = Task {
                    try await pool.withConnection { connection in
                        try await connection.query("SELECT 1")
                        await gate.wait()
                    }
                }
                #expect(await eventually { pool.stats().inUse == 1 })
                let started = ContinuousClock.now
                let error = await expectPostgresError { try await pool.query("SELECT 1") }
                #expect(error?.kind == .poolTimeout)
                #expect(error?.isRetryable == true)
                #expect(ContinuousClock.now - started >= .milliseconds(200))
                #expect(pool.stats().waiters == 0)
                await gate.release()
                try await holder.value
                #expect(try await pool.query("SELECT 7").scalar(Int.self) == 7)
                await pool.close()
            }
        }

        @Test func closeFailsWaiters() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1, acquireTimeout: .seconds(30))
                let gate = Gate()
                let holder = Task {
                    try await pool.withConnection { _ in await gate.wait() }
                }
                #expect(await eventually { pool.stats().inUse == 1 })
                let waiter = Task { try await pool.query("SELECT 1") }
                #expect(await eventually { pool.stats().waiters == 1 })
                await pool.close()
                let error = await expectPostgresError { _ = try await waiter.value }
                #expect(error?.kind == .poolClosed)
                await gate.release()
                try await holder.value
                #expect(await eventually { pool.stats().open == 0 })
            }
        }

        @Test func connectionFailureIsARetryableConnectionError() async throws {
            let bad = try PostgresConfiguration(conninfo: "host=/nonexistent/socket/dir user=postgres dbname=x")
            let pool = PostgresPool(configuration: bad, maxConnections: 1, acquireTimeout: .seconds(5))
            let error = await expectPostgresError { try await pool.query("SELECT 1") }
            #expect(error?.kind == .connection)
            #expect(error?.isRetryable == true)
            #expect(error?.connectionMessage?.isEmpty == false)
            #expect(pool.stats().open == 0 && pool.stats().connecting == 0)
            await pool.close()
        }

        @Test func preparedStatementsAreCachedPerConnection() async throws {
            try await TestDatabase.with { config in
                let connection = try await PostgresConnection.connect(configuration: config)
                for i in 0..<5 {
                    let rows = try await connection.query("SELECT \(i) + 1, \("x")::text", prepared: true)
                    #expect(try rows[0].decode(Int.self, at: 0) == i + 1)
                }
                #expect(await connection.preparedStatementCount == 1)
                let serverSide = try await connection.query("SELECT count(*) FROM pg_prepared_statements")
                #expect(try serverSide.scalar(Int.self) == 1)
                // A reconnect starts with an empty cache and re-prepares on use.
                try await connection.connect()
                #expect(await connection.preparedStatementCount == 0)
                #expect(try await connection.query("SELECT \(41) + 1", prepared: true).scalar(Int.self) == 42)
                #expect(await connection.preparedStatementCount == 1)
                // DEALLOCATE behind the cache's back: outside a transaction the statement is re-prepared.
                try await connection.query("DEALLOCATE ALL")
                #expect(try await connection.query("SELECT \(1) + 1", prepared: true).scalar(Int.self) == 2)
                // Inside a transaction the failure surfaces (the transaction is aborted), then it re-prepares.
                try await connection.query("BEGIN")
                try await connection.query("DEALLOCATE ALL")
                let gone = await expectPostgresError { try await connection.query("SELECT \(1) + 1", prepared: true) }
                #expect(gone?.sqlState == "26000")
                try await connection.query("ROLLBACK")
                #expect(try await connection.query("SELECT \(2) + 1", prepared: true).scalar(Int.self) == 3)
                #expect(await connection.isOnDedicatedQueue)
                await connection.close()
            }
        }
    }
}
