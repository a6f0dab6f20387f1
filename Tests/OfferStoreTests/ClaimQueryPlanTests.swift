import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// The claim batch's lookups stay index probes per customer and key, and a walk of the free codes' index, in their
/// generic plans on a table whose statistics lag (as `RedemptionQueryPlanTests` checks for redemptions): without
/// the `LIMIT 1`, PostgreSQL 15 read every claim of the campaign per batch. The walk starts at the claim cursor.
@Suite("Claim batch query plans")
struct ClaimQueryPlanTests {
    @Test("every claim lookup is an index lookup per item, the free codes an index walk")
    func lookupsUseTheirIndexes() async throws {
        try await RepositoryTests.withStore(maxConnections: 1) { database in
            let tenant = UUID()
            let lookups = CampaignRepository.claimLookups(
                tenant: tenant, campaignId: "asc", customers: ["c1", "c2"], keys: ["k1"], wanted: 64)
            let t = "'\(tenant.uuidString.lowercased())'"
            let arguments = ["ARRAY['c1', 'c2'], \(t), 'asc'", "\(t), 'asc', \(t), 'asc', 64", "ARRAY['k1'], \(t)"]
            let expected = [
                "(customer_id = c.customer_id)", "apple_codes_free", "(idempotency_key = k.key)",
            ]
            #expect(lookups.count == expected.count)
            let plans: [String] = try await database.pool.withConnection { connection in
                try await connection.query("SET session_replication_role = replica")
                func fill(_ range: ClosedRange<Int>) async throws {
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: """
                                INSERT INTO apple_codes (tenant_id, code, campaign_id, claim_id, customer_id, claimed_at)
                                SELECT \(t), 'CODE' || n, 'asc', gen_random_uuid(), 'customer' || n, now()
                                FROM generate_series(\(range.lowerBound), \(range.upperBound)) AS n
                                """))
                }
                try await fill(1...50)
                try await connection.query("ANALYZE apple_codes")
                try await fill(51...20_050)
                var plans: [String] = []
                for (index, lookup) in lookups.enumerated() {
                    plans.append(
                        try await QueryPlans.generic(
                            lookup, name: "claim\(index)", arguments: arguments[index], on: connection))
                }
                return plans
            }
            for (plan, condition) in zip(plans, expected) {
                #expect(plan.contains("Index") && plan.contains(condition), "plan:\n\(plan)")
                #expect(!plan.contains("Seq Scan") && !plan.contains("Join Filter"), "plan:\n\(plan)")
            }
            // The free codes' walk starts at the claim cursor (migration 0015): a bound of the index scan, not a
            // filter over the codes before it.
            #expect(QueryPlans.indexCondition(of: plans[1]).contains("(code > "), "plan:\n\(plans[1])")
        }
    }

    @Test("the write updates the codes it names: its scan of them is bounded by the batch's first and last code")
    func writeIsBoundedByTheBatchsCodes() async throws {
        try await RepositoryTests.withStore(maxConnections: 1) { database in
            let tenant = UUID()
            let t = "'\(tenant.uuidString.lowercased())'"
            let codes = (1...30).map { String(format: "FREE%06d", 10_000 + $0) }
            let writes = ClaimWrites(
                claims: codes.enumerated().map { index, code in
                    (StoredClaim(claimId: UUID(), code: code, customerId: "new\(index)"), "key\(index)")
                },
                idempotency: (0..<30).map {
                    ("key\($0)", IdempotencyRecord(requestHash: String(repeating: "a", count: 64), responseJSON: "{}"))
                })
            let span = try #require(ClaimedSpan(free: codes, claimed: codes))
            let write = CampaignRepository.claimWrite(
                tenant: tenant, campaignId: "asc", writes: writes, span: span, at: Date())
            let plans: [String] = try await database.pool.withConnection { connection in
                try await connection.query("SET session_replication_role = replica")
                // Statistics taken while every code of the table was claimed, then a new campaign's free codes:
                // the planner takes the campaign's free codes for almost none (as on a busy table before autovacuum
                // analyzes it), which made it hash all of them per batch.
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO apple_codes (tenant_id, code, campaign_id, claim_id, customer_id, claimed_at)
                            SELECT \(t), 'OLD' || n, 'old', gen_random_uuid(), 'customer' || n, now()
                            FROM generate_series(1, 5000) AS n
                            """))
                try await connection.query("ANALYZE apple_codes")
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO apple_codes (tenant_id, code, campaign_id)
                            SELECT \(t), 'FREE' || lpad(n::text, 6, '0'), 'asc' FROM generate_series(1, 20000) AS n
                            """))
                var plans: [String] = []
                for mode in ["auto", "force_generic_plan"] {
                    try await connection.query(PostgresQuery(unsafeSQL: "SET plan_cache_mode = \(mode)"))
                    let explained = try await connection.query(
                        PostgresQuery(unsafeSQL: "EXPLAIN (COSTS OFF) " + write.sql, binds: write.binds))
                    plans.append(try explained.map { try $0.decode(String.self, at: 0) }.joined(separator: "\n"))
                }
                return plans
            }
            for plan in plans {
                // Every scan of apple_codes has the codes' bounds in its index condition, whatever index it uses.
                let lines = plan.split(separator: "\n").map(String.init)
                let scans = lines.indices.filter {
                    lines[$0].contains("Scan") && lines[$0].contains(" on apple_codes a")
                }
                #expect(!scans.isEmpty, "plan:\n\(plan)")
                for scan in scans {
                    #expect(lines[scan].contains("Index"), "plan:\n\(plan)")
                    let condition = lines[(scan + 1)...].first { $0.contains("Index Cond:") } ?? ""
                    #expect(condition.contains("code >=") && condition.contains("code <="), "plan:\n\(plan)")
                }
            }
        }
    }
}
