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
                try await Self.open(pool)
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

        /// `pipeline(_:prepared:reply:)`: the same results as the async pipeline, given outside any task on the
        /// connection's queue; the connection goes back to the pool; errors (a statement's, the pool's) reach
        /// the reply.
        @Test func pipelineWithAReplyAnswersOutsideAnyTask() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1, acquireTimeout: .milliseconds(200))
                try await Self.open(pool)
                try await pool.query("CREATE TABLE pr (k int PRIMARY KEY, v text)")
                try await pool.query("INSERT INTO pr SELECT g, 'v' || g FROM generate_series(1, 20) g")
                let queries: [PostgresQuery] = [
                    "SELECT v FROM pr WHERE k = ANY(\([3, 5, 7])) ORDER BY k", "SELECT count(*) FROM pr",
                    "SELECT 1 / \(0)", "SELECT 2",
                ]
                for prepared in [false, true] {
                    let (outcome, inTask) = await Self.pipelined(pool, queries, prepared: prepared)
                    #expect(!inTask)
                    let results = try outcome.get()
                    let expected = try await pool.pipeline(queries, prepared: prepared)
                    #expect(results.count == 4 && expected.count == 4)
                    #expect(try results[0].get().map { try $0.decode(String.self, at: 0) } == ["v3", "v5", "v7"])
                    #expect(
                        try results[0].get().map { try $0.decode(String.self, at: 0) }
                            == expected[0].get().map { try $0.decode(String.self, at: 0) })
                    #expect(try results[1].get().scalar(Int.self) == 20)
                    guard case .failure(let failed) = results[2], case .failure(let aborted) = results[3] else {
                        Issue.record("expected the third and fourth statements to fail")
                        continue
                    }
                    #expect(failed.sqlState == "22012")
                    #expect(aborted.kind == .pipelineAborted)
                    #expect(await eventually { pool.stats().idle == 1 && pool.stats().inUse == 0 })
                }
                // Every connection busy: the pool's timeout reaches the reply.
                let gate = Gate()
                let holder = Task { try await pool.withConnection { _ in await gate.wait() } }
                #expect(await eventually { pool.stats().inUse == 1 })
                let (timedOut, _) = await Self.pipelined(pool, ["SELECT 1"], prepared: false)
                guard case .failure(let error) = timedOut else {
                    Issue.record("expected a pool timeout, got \(timedOut)")
                    return
                }
                #expect(error.kind == .poolTimeout)
                await gate.release()
                try await holder.value
                let (after, _) = await Self.pipelined(pool, ["SELECT 9"], prepared: true)
                #expect(try after.get()[0].get().scalar(Int.self) == 9)
                await pool.close()
                let (closed, _) = await Self.pipelined(pool, ["SELECT 1"], prepared: false)
                guard case .failure(let closedError) = closed else {
                    Issue.record("expected the closed pool's error")
                    return
                }
                #expect(closedError.kind == .poolClosed)
            }
        }

        /// Opens the pool's (one) connection. A 200 ms `acquireTimeout` also bounds opening it, and on a loaded CI
        /// machine opening one took longer: the tests about waiting for a busy connection start from an open one.
        static func open(_ pool: PostgresPool) async throws {
            let deadline = ContinuousClock.now + .seconds(60)
            while true {
                do {
                    try await pool.query("SELECT 1")
                    return
                } catch let error as PostgresError where error.kind == .poolTimeout && ContinuousClock.now < deadline {
                    continue
                }
            }
        }

        /// A reply-style pipeline's outcome, and whether the reply ran inside a Swift task.
        static func pipelined(_ pool: PostgresPool, _ queries: [PostgresQuery], prepared: Bool) async -> (
            Result<[Result<PostgresRows, PostgresError>], PostgresError>, Bool
        ) {
            await withCheckedContinuation { continuation in
                pool.pipeline(queries, prepared: prepared) { outcome in
                    continuation.resume(returning: (outcome, withUnsafeCurrentTask { $0 != nil }))
                }
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

        @Test func preparedStatementsAreKeyedByTextAndParameterTypes() async throws {
            try await TestDatabase.with { config in
                let connection = try await PostgresConnection.connect(configuration: config)
                // The same text with an int8 and a text parameter is two statements; twelve texts in turn, more than
                // the connection's short list of recent ones, each found again with its own types.
                for round in 0..<3 {
                    for k in 0..<12 {
                        let sql = "SELECT $1::text || '-\(k)'"
                        let number = PostgresQuery(unsafeSQL: sql, binds: [Int64(round).postgresBind()])
                        let text = PostgresQuery(unsafeSQL: sql, binds: ["t\(round)".postgresBind()])
                        #expect(
                            try await connection.query(number, prepared: true).scalar(String.self) == "\(round)-\(k)")
                        #expect(
                            try await connection.query(text, prepared: true).scalar(String.self) == "t\(round)-\(k)")
                    }
                }
                #expect(await connection.preparedStatementCount == 24)
                let serverSide = try await connection.query("SELECT count(*) FROM pg_prepared_statements")
                #expect(try serverSide.scalar(Int.self) == 24)
                await connection.close()
            }
        }
    }
}
