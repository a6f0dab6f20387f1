import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// The redemption batch's lookups must stay one index lookup per customer, code and key, whatever the statistics
/// say: with `= ANY(array)` PostgreSQL 15's generic plan once read every redemption of a hot campaign and filtered
/// them, per batch (see `CampaignRepository.batchLookups`). Each lookup's generic plan is checked here, the per-item
/// condition in its index condition (in a filter it would be checked against every row the index returns).
@Suite("Redemption batch query plans")
struct RedemptionQueryPlanTests {
    @Test("every batch lookup is an index lookup per item in its generic plan")
    func lookupsUseThePerItemIndexCondition() async throws {
        try await RepositoryTests.withStore(maxConnections: 1) { database in
            let tenant = UUID()
            let lookups = CampaignRepository.batchLookups(
                tenant: tenant, campaignId: "hot", customers: ["c1", "c2"], oneTimeCodes: ["CODE1"], keys: ["k1"])
            // What each plan must look up by, per item of its array; and the same values as SQL literals, in the
            // order of each statement's parameters (EXECUTE takes no bind parameters).
            let expected = [
                "(customer_id = c.customer_id)", "(code = c.code)", "(idempotency_key = k.key)",
            ]
            let t = "'\(tenant.uuidString.lowercased())'"
            let arguments = [
                "\(t), 'hot', ARRAY['c1', 'c2']", "ARRAY['CODE1'], \(t)", "ARRAY['k1'], \(t)",
            ]
            #expect(lookups.count == expected.count)
            let plans: [String] = try await database.pool.withConnection { connection in
                // Statistics that lag behind a table that grew: analysed at 50 rows, then 20,000 more (foreign-key
                // triggers off for this session, so the rows need no tenant or campaign).
                try await connection.query("SET session_replication_role = replica")
                func fill(_ range: ClosedRange<Int>) async throws {
                    let (tenantLiteral, first, last) = (
                        tenant.uuidString.lowercased(), range.lowerBound, range.upperBound
                    )
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: """
                                INSERT INTO redemptions (tenant_id, redemption_id, campaign_id, code, one_time,
                                                         customer_id, idempotency_key)
                                SELECT '\(tenantLiteral)', gen_random_uuid(), 'hot', 'CODE' || n, n % 2 = 0,
                                       'customer' || n, 'key' || n
                                FROM generate_series(\(first), \(last)) AS n
                                """))
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: """
                                INSERT INTO idempotency_records (tenant_id, idempotency_key, method, request_hash,
                                                                 response)
                                SELECT '\(tenantLiteral)', 'key' || n, 'codes.redeem', '\\x00', '{}'
                                FROM generate_series(\(first), \(last)) AS n
                                """))
                }
                try await fill(1...50)
                try await connection.query("ANALYZE redemptions")
                try await connection.query("ANALYZE idempotency_records")
                try await fill(51...20_050)
                var plans: [String] = []
                for (index, lookup) in lookups.enumerated() {
                    plans.append(
                        try await QueryPlans.generic(
                            lookup, name: "lookup\(index)", arguments: arguments[index], on: connection))
                }
                return plans
            }
            for (plan, condition) in zip(plans, expected) {
                #expect(QueryPlans.indexCondition(of: plan).contains(condition), "plan:\n\(plan)")
                #expect(!plan.contains("ANY"), "plan:\n\(plan)")
            }
        }
    }
}
