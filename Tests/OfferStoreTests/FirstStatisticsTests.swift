import Foundation
import OfferTestSupport
import Postgres
import Synchronization
import Testing

@testable import OfferStore

/// `OfferDatabase.analyzeNeverAnalysed`: a table PostgreSQL never analysed gets its first statistics once enough of
/// its rows changed, and the redemption batch's per-customer lookup is then planned on its own index.
@Suite("First statistics")
struct FirstStatisticsTests {
    @Test("a never-analysed table with enough changes is analysed once; one with fewer is left and counted")
    func analysesTablesThatGrew() async throws {
        try await RepositoryTests.withStore(maxConnections: 2) { db in
            let tenant = UUID()
            try await db.pool.withConnection { connection in
                // Autovacuum off for these two tables: it analyses a grown table too (setting `last_autoanalyze`,
                // which the sweep rightly skips), and with dozens of test databases its launcher visits each one
                // every few seconds, so under a loaded suite it could win the race this test is not about.
                try await connection.query("ALTER TABLE redemptions SET (autovacuum_enabled = off)")
                try await connection.query("ALTER TABLE idempotency_records SET (autovacuum_enabled = off)")
                // Triggers and foreign keys off for this session: the rows need no tenant, campaign or code.
                try await connection.query("SET session_replication_role = replica")
                let t = tenant.uuidString.lowercased()
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO redemptions (tenant_id, redemption_id, campaign_id, code, one_time, customer_id)
                            SELECT '\(t)', gen_random_uuid(), 'hot', 'HOT', false, 'customer' || n
                            FROM generate_series(1, 600) AS n
                            """))
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO idempotency_records (tenant_id, idempotency_key, method, request_hash, response)
                            SELECT '\(t)', 'key' || n, 'codes.redeem', '\\x00', '{}' FROM generate_series(1, 10) AS n
                            """))
            }
            // The inserts' counts reach pg_stat_user_tables within about a second of the session going idle.
            let analysed = Mutex<[String]>([])
            let sawRedemptions = try await eventually {
                let sweep = try await db.analyzeNeverAnalysed(minimumChanges: 500)
                analysed.withLock { $0 += sweep.analysed }
                return analysed.withLock { $0.contains { $0.hasSuffix(".redemptions") } }
            }
            #expect(sawRedemptions)
            #expect(!analysed.withLock { $0.contains { $0.hasSuffix(".idempotency_records") } })
            let lastAnalyze: @Sendable (String) async throws -> Bool = { table in
                try await db.pool.query(
                    "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = \(table)"
                ).scalar(Bool.self) ?? false
            }
            #expect(try await eventually { try await lastAnalyze("redemptions") })
            #expect(try await !lastAnalyze("idempotency_records"))
            // Once analysed, a table is not analysed again; the small one is still waiting.
            let again = try await db.analyzeNeverAnalysed(minimumChanges: 500)
            #expect(!again.analysed.contains { $0.hasSuffix(".redemptions") })
            #expect(again.stillUnanalysed >= 1)
            // With statistics, the per-customer count's generic plan looks each customer up in its own index.
            let lookup = CampaignRepository.batchLookups(
                tenant: tenant, campaignId: "hot", customers: ["customer1"], oneTimeCodes: [], keys: [])[0]
            let plan = try await db.pool.withConnection { connection in
                try await QueryPlans.generic(
                    lookup, name: "perCustomer",
                    arguments: "'\(tenant.uuidString.lowercased())', 'hot', ARRAY['customer1']",
                    on: connection)
            }
            #expect(plan.contains("redemptions_by_customer"), "plan:\n\(plan)")
            #expect(
                QueryPlans.indexCondition(of: plan).contains("(customer_id = c.customer_id)"),
                "plan:\n\(plan)")
        }
    }
}
