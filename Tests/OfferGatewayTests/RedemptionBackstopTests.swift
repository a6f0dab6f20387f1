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
}
