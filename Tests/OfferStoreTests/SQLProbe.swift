import Foundation
import OfferTestSupport
import Postgres

@testable import OfferStore

/// SQL run by hand against a test database, as an operator or another program might: for the tests of what the
/// schema itself guarantees, whoever writes.
struct SQLProbe: Sendable {
    let db: OfferDatabase

    /// One integer from a query (-1 when it returned no row).
    func count(_ sql: String) async throws -> Int64 {
        try await db.pool.query(PostgresQuery(unsafeSQL: sql)).scalar(Int64.self) ?? -1
    }

    /// Runs `sql` (one statement) and returns the SQLSTATE it failed with, or nil when it succeeded.
    func failure(_ sql: String) async -> String? {
        do {
            _ = try await db.pool.query(PostgresQuery(unsafeSQL: sql))
            return nil
        } catch let error as PostgresError {
            return error.sqlState
        } catch {
            return "not a PostgreSQL error: \(error)"
        }
    }

    /// Whether a backend running a statement that starts with `prefix` comes to wait for a lock.
    func waitsForALock(_ prefix: String) async throws -> Bool {
        try await eventually {
            try await count(
                """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '\(prefix)%'
                """) > 0
        }
    }
}
