import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// Every statement of the store's pool runs under the statement timeout given to `OfferDatabase.connect`.
@Suite("OfferStore statement timeout")
struct StatementTimeoutTests {
    @Test func connectAppliesTheDefaultAndAGivenTimeout() async throws {
        try await TestDatabase.withConninfo { url in
            let standard = try OfferDatabase.connect(url: url, maxConnections: 1)
            #expect(try await standard.pool.query("SHOW statement_timeout").scalar(String.self) == "30s")
            await standard.close()
            let off = try OfferDatabase.connect(url: url, maxConnections: 1, statementTimeout: .zero)
            #expect(try await off.pool.query("SHOW statement_timeout").scalar(String.self) == "0")
            await off.close()
        }
    }

    @Test func aStatementOverTheTimeoutIsADatabaseErrorNotUnavailable() async throws {
        try await TestDatabase.withConninfo { url in
            // 1 s, not less: the ping below runs under the same timeout, and at the start of a whole-suite run (dozens of
            // tests at once on two cores) a `SELECT 1` was once starved past 100 ms.
            let database = try OfferDatabase.connect(url: url, maxConnections: 1, statementTimeout: .seconds(1))
            let error = await #expect(throws: StoreError.self) {
                try await storeCall { try await database.pool.query("SELECT pg_sleep(10)") }
            }
            guard case .database(let failure) = error else {
                Issue.record("expected .database, got \(String(describing: error))")
                await database.close()
                return
            }
            #expect(failure.sqlState == "57014")
            #expect(failure.isStatementTimeout)
            #expect(!failure.isCancelled)
            #expect(!failure.isRetryable)
            #expect(failure.description.contains("statement timeout"))
            // Still answering afterwards.
            #expect(await database.ping())
            await database.close()
        }
    }
}
