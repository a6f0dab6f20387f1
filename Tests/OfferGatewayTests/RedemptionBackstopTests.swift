import Foundation
import Postgres
import Testing

@testable import OfferGateway
@testable import OfferStore

@Suite("Redemption backstops in the database")
struct RedemptionBackstopTests {
    /// Even a batch whose decision ignored the limit cannot commit: the conditional counter update (and the CHECK
    /// behind it) refuses it, and the whole transaction, its inserted rows included, rolls back.
    @Test func aBatchOverTheLimitIsRolledBackWhole() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            _ = try await RedemptionSupport.seedTenant(admin, slug: "backstop")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "backstop", "campaignId": "c", "offerId": "code1", "kind": "custom", "code": "LIMIT3",
                    "totalLimit": 3,
                ])
            let database = try gateways.database()
            let tenant = try #require(try await database.tenants.find(slug: "backstop"))
            let repository = database.campaigns
            let customers = (0..<4).map { "greedy-\($0)" }
            do {
                _ = try await repository.commitRedemptionBatch(
                    tenant: tenant.id, campaignId: "c", customers: customers, oneTimeCodes: [], keys: []
                ) { snapshot in
                    #expect(snapshot.record.redeemed == 0)
                    let rows = customers.map {
                        NewRedemption(
                            redemptionId: UUID(), code: "LIMIT3", oneTime: false, customerId: $0, idempotencyKey: nil)
                    }
                    return (RedemptionWrites(redemptions: rows, idempotency: []), rows.count)
                }
                Issue.record("a batch of 4 on a limit of 3 must not commit")
            } catch let error as StoreError {
                guard case .corrupt = error else {
                    Issue.record("expected the counter guard to refuse the batch, got \(error)")
                    return
                }
            }
            #expect(
                try await RedemptionRows.read(database, campaignId: "c")
                    == RedemptionRows(live: 0, rolledBack: 0, counter: 0))

            // A batch within the limit commits, and the decision saw the locked counters.
            let written = try await repository.commitRedemptionBatch(
                tenant: tenant.id, campaignId: "c", customers: ["ok"], oneTimeCodes: [], keys: []
            ) { snapshot in
                let rows = [
                    NewRedemption(
                        redemptionId: UUID(), code: "LIMIT3", oneTime: false, customerId: "ok", idempotencyKey: nil)
                ]
                return (RedemptionWrites(redemptions: rows, idempotency: []), snapshot.record.redeemed)
            }
            #expect(written == 0)
            #expect(
                try await RedemptionRows.read(database, campaignId: "c")
                    == RedemptionRows(live: 1, rolledBack: 0, counter: 1))

            // The CHECK constraint itself: no statement can push the counter over the limit.
            await #expect(throws: PostgresError.self) {
                try await database.pool.query("UPDATE campaigns SET redeemed = 4 WHERE campaign_id = 'c'")
            }
            await database.pool.close()
        }
    }

    /// A claim batch whose decision ignored the limit fails its own write statement, so its pipelined COMMIT never
    /// runs: no code is claimed and the counter stays.
    @Test func aClaimBatchOverTheLimitClaimsNothing() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            _ = try await RedemptionSupport.seedTenant(admin, slug: "claim-backstop")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "claim-backstop", "campaignId": "asc", "offerId": "code1", "kind": "appleOneTime",
                    "totalLimit": 2,
                ])
            _ = try await admin.call(
                method: "campaigns.importCodes",
                params: ["tenant": "claim-backstop", "campaignId": "asc", "codes": ["AAAA1", "BBBB2", "CCCC3"]])
            let database = try gateways.database()
            let tenant = try #require(try await database.tenants.find(slug: "claim-backstop"))
            let customers = ["a", "b", "c"]
            func claimed() async throws -> Int {
                let rows = try await database.pool.query(
                    """
                    SELECT (SELECT count(*) FROM apple_codes WHERE claim_id IS NOT NULL)
                           + (SELECT redeemed FROM campaigns WHERE campaign_id = 'asc')
                    """)
                return try #require(rows.first).decode(Int.self, at: 0)
            }
            do {
                _ = try await database.campaigns.commitClaimBatch(
                    tenant: tenant.id, campaignId: "asc", customers: customers, keys: [], wanted: 3, at: Date()
                ) { snapshot in
                    #expect(snapshot.freeCodes.count == 3)
                    let claims = zip(customers, snapshot.freeCodes).map {
                        (claim: StoredClaim(claimId: UUID(), code: $1, customerId: $0), idempotencyKey: String?.none)
                    }
                    return (ClaimWrites(claims: claims, idempotency: []), claims.count)
                }
                Issue.record("a claim batch of 3 on a limit of 2 must not commit")
            } catch {
                #expect("\(error)".contains("claim batch refused") || error is StoreError, "\(error)")
            }
            #expect(try await claimed() == 0)
            await database.pool.close()
        }
    }
}
