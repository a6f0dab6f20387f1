import Foundation
import OfferTestSupport
import Postgres
import Testing

extension PostgresIntegrationTests {
    /// A task that goes away takes its statement with it (PQcancel), and no statement outlives the timeout.
    @Suite("Cancellation and statement timeout")
    struct CancellationTests {
        /// Waits until some backend of this database runs `pg_sleep` (the statement really started).
        static func waitForSleeper(_ observer: PostgresPool) async throws -> Bool {
            try await eventually(timeout: .seconds(30)) {
                let n = try await observer.query(
                    """
                    SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND state = 'active' AND query LIKE 'SELECT pg_sleep%'
                    """
                ).scalar(Int64.self)
                return (n ?? 0) > 0
            }
        }

        @Test func cancellingTheTaskCancelsTheStatementAndThePoolStillWorks() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                let observer = PostgresPool(configuration: config, maxConnections: 1)
                let pidBefore = try await pool.query("SELECT pg_backend_pid()").scalar(Int32.self)
                let sleeper = Task { () -> PostgresError? in
                    do {
                        try await pool.query("SELECT pg_sleep(120)")
                        return nil
                    } catch let error as PostgresError {
                        return error
                    }
                }
                #expect(try await Self.waitForSleeper(observer))
                let cancelled = ContinuousClock.now
                sleeper.cancel()
                let error = try await sleeper.value
                #expect(ContinuousClock.now - cancelled < .seconds(60))
                #expect(error?.kind == .cancelled, "\(String(describing: error))")
                #expect(error?.isRetryable == false)
                // The server stopped the statement (the backend is gone or idle, not still sleeping).
                #expect(
                    try await eventually(timeout: .seconds(30)) {
                        try await observer.query(
                            """
                            SELECT count(*) FROM pg_stat_activity
                            WHERE datname = current_database() AND query LIKE 'SELECT pg_sleep%' AND state = 'active'
                            """
                        ).scalar(Int64.self) == 0
                    })
                // The one pooled connection was replaced, and the pool serves the next caller at once.
                #expect(pool.stats().inUse == 0)
                let pidAfter = try await pool.query("SELECT pg_backend_pid()").scalar(Int32.self)
                #expect(pidAfter != pidBefore)
                #expect(try await pool.query("SELECT 41 + 1").scalar(Int.self) == 42)
                await pool.close()
                await observer.close()
            }
        }

        @Test func cancellingInsideATransactionRollsItBack() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                let observer = PostgresPool(configuration: config, maxConnections: 1)
                try await pool.query("CREATE TABLE t (n int)")
                let writer = Task {
                    try await pool.withTransaction { tx in
                        try await tx.query("INSERT INTO t VALUES (\(1))")
                        try await tx.query("SELECT pg_sleep(30)")
                    }
                }
                #expect(try await Self.waitForSleeper(observer))
                writer.cancel()
                let outcome = await writer.result
                #expect(throws: PostgresError.self) { try outcome.get() }
                #expect(try await pool.query("SELECT count(*) FROM t").scalar(Int64.self) == 0)
                await pool.close()
                await observer.close()
            }
        }

        @Test func aTaskCancelledBeforeItsStatementRunsNothing() async throws {
            try await TestDatabase.with { config in
                let connection = try await PostgresConnection.connect(configuration: config)
                try await connection.query("CREATE TABLE t (n int)")
                let task = Task {
                    withUnsafeCurrentTask { $0?.cancel() }
                    return try await connection.query("INSERT INTO t VALUES (\(1))")
                }
                let error = await #expect(throws: PostgresError.self) { try await task.value }
                #expect(error?.kind == .cancelled)
                // Nothing was sent, so the connection is still open and in sync.
                #expect(try await connection.query("SELECT count(*) FROM t").scalar(Int64.self) == 0)
                await connection.close()
            }
        }

        @Test func aStatementOverTheTimeoutFailsWith57014AndIsNotRetryable() async throws {
            try await TestDatabase.with { (base: PostgresConfiguration) async throws in
                var config = base
                // 1 s, not less: the `SELECT 1` below runs under the same timeout, and a whole-suite run's start (dozens
                // of tests at once on two cores) can starve a backend for a few hundred milliseconds.
                config.statementTimeout = .seconds(1)
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                #expect(try await pool.query("SHOW statement_timeout").scalar(String.self) == "1s")
                let started = ContinuousClock.now
                let error = await expectPostgresError { try await pool.query("SELECT pg_sleep(120)") }
                #expect(ContinuousClock.now - started < .seconds(60))
                #expect(error?.sqlState == "57014")
                #expect(error?.kind == .server)
                #expect(error?.isStatementTimeout == true)
                #expect(error?.isRetryable == false)
                #expect(error?.description.contains("statement timeout") == true, "\(String(describing: error))")
                // The connection is fine afterwards.
                #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
                await pool.close()

                var unlimited = base
                unlimited.statementTimeout = .zero
                let other = PostgresPool(configuration: unlimited, maxConnections: 1)
                #expect(try await other.query("SHOW statement_timeout").scalar(String.self) == "0")
                await other.close()
            }
        }
    }
}
