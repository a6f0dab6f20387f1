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
}
