import Foundation
import OfferDomain
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// A redemption's code and campaign (migration 0011): checked once per statement instead of by row-level foreign
/// keys, with what the keys guaranteed kept: a redemption names a code of its own campaign, a redeemed code (or its
/// campaign) cannot be removed, changed or truncated away, and a redemption's references never change, also
/// against a concurrent transaction.
@Suite("Redemption references")
struct RedemptionReferenceTests {
    /// A tenant with a custom campaign `hot` (code HOTCODE) and a one-time campaign `pool` (POOLAAA1, POOLBBB2),
    /// one redemption of each made through the batch path (HOTCODE by c1, POOLAAA1 by c2).
    struct Seeded {
        let db: OfferDatabase
        let tenant: UUID

        var probe: SQLProbe { SQLProbe(db: db) }

        func count(_ sql: String) async throws -> Int64 { try await probe.count(sql) }

        func redemptions() async throws -> Int64 {
            try await count("SELECT count(*) FROM redemptions WHERE tenant_id = '\(tenantLiteral)'")
        }

        var tenantLiteral: String { tenant.uuidString.lowercased() }

        /// Runs `sql` (one statement) and returns the SQLSTATE it failed with, or nil when it succeeded.
        func failure(_ sql: String) async -> String? { await probe.failure(sql) }

        /// A batch of `campaign` whose `decide` writes the given codes, as the gateway's batch path would.
        func redeem(_ campaign: String, _ rows: [(code: String, oneTime: Bool, customer: String)]) async throws {
            let writes = rows.map {
                NewRedemption(
                    redemptionId: UUID(), code: $0.code, oneTime: $0.oneTime, customerId: $0.customer,
                    idempotencyKey: nil)
            }
            try await db.campaigns.commitRedemptionBatch(
                tenant: tenant, campaignId: campaign, customers: rows.map(\.customer),
                oneTimeCodes: rows.filter(\.oneTime).map(\.code), keys: []
            ) { _ in (RedemptionWrites(redemptions: writes, idempotency: []), ()) }
        }
    }

    static func withSeeded(_ body: (Seeded) async throws -> Void) async throws {
        try await RepositoryTests.withStore { db in
            let tenant = try await RepositoryTests.tenantWithCodeOffer(db, slug: "refs")
            _ = try await db.campaigns.create(
                tenant: tenant, try Campaign(id: "hot", offerId: "code1", kind: .custom, code: "HOTCODE"),
                productId: "monthly")
            _ = try await db.campaigns.create(
                tenant: tenant, try Campaign(id: "pool", offerId: "code1", kind: .oneTime), productId: "monthly")
            _ = try await db.campaigns.generateCodes(
                tenant: tenant, campaignId: "pool", count: 2,
                makeCodes: { n in
                    Array(["POOLAAA1", "POOLBBB2"].prefix(n))
                }, progress: { _ in })
            let seeded = Seeded(db: db, tenant: tenant)
            try await seeded.redeem("hot", [("HOTCODE", false, "c1")])
            try await seeded.redeem("pool", [("POOLAAA1", true, "c2")])
            #expect(try await seeded.redemptions() == 2)
            try await body(seeded)
        }
    }

    @Test("a batch naming another campaign's code, or no code at all, is refused whole and changes nothing")
    func batchWithForeignCodeIsRefused() async throws {
        try await Self.withSeeded { s in
            for bad in ["POOLBBB2", "NOSUCHCODE"] {
                do {
                    // Two good rows around the bad one: the statement fails as a whole.
                    try await s.redeem(
                        "hot", [("HOTCODE", false, "c7"), (bad, false, "c8"), ("HOTCODE", false, "c9")])
                    Issue.record("a redemption of hot with code \(bad) must be refused")
                } catch StoreError.database(let failure) {
                    #expect(failure.sqlState == "23503", "\(failure)")
                    // The code is a secret: the server's message names the campaign, not the code.
                    #expect(!failure.debugDescription.contains(bad), "\(failure.debugDescription)")
                }
            }
            #expect(try await s.redemptions() == 2)
            #expect(try await s.db.campaigns.find(tenant: s.tenant, campaignId: "hot")?.redeemed == 1)
            // And the path still writes a good batch afterwards.
            try await s.redeem("hot", [("HOTCODE", false, "c7"), ("HOTCODE", false, "c8")])
            #expect(try await s.redemptions() == 4)
        }
    }

    @Test("a redeemed code, its campaign or its tenant cannot be removed, re-keyed or truncated away")
    func redeemedCodesStay() async throws {
        try await Self.withSeeded { s in
            let t = s.tenantLiteral
            let refused = [
                "DELETE FROM offer_codes WHERE tenant_id = '\(t)' AND code = 'POOLAAA1'",
                "DELETE FROM offer_codes WHERE tenant_id = '\(t)'",
                "UPDATE offer_codes SET campaign_id = 'hot' WHERE tenant_id = '\(t)' AND code = 'POOLAAA1'",
                "UPDATE offer_codes SET code = 'POOLCCC3' WHERE tenant_id = '\(t)' AND code = 'POOLAAA1'",
                "DELETE FROM campaigns WHERE tenant_id = '\(t)' AND campaign_id = 'hot'",
                "DELETE FROM tenants WHERE tenant_id = '\(t)'",
                "TRUNCATE offer_codes CASCADE",
            ]
            for sql in refused {
                #expect(await s.failure(sql) == "23503", "\(sql)")
            }
            let codes = try await s.count("SELECT count(*) FROM offer_codes WHERE tenant_id = '\(t)'")
            let campaigns = try await s.count("SELECT count(*) FROM campaigns WHERE tenant_id = '\(t)'")
            #expect(codes == 3 && campaigns == 2)
            // What touches no redeemed code still works.
            #expect(await s.failure("UPDATE offer_codes SET created_at = now() WHERE tenant_id = '\(t)'") == nil)
            #expect(
                await s.failure("DELETE FROM offer_codes WHERE tenant_id = '\(t)' AND code = 'POOLBBB2'") == nil)
            let left = try await s.count("SELECT count(*) FROM offer_codes WHERE tenant_id = '\(t)'")
            #expect(left == 2)
        }
    }

    @Test("a redemption's tenant, campaign and code never change; its other columns do")
    func redemptionReferencesAreFixed() async throws {
        try await Self.withSeeded { s in
            let t = s.tenantLiteral
            for change in ["code = 'POOLBBB2'", "campaign_id = 'hot'", "tenant_id = gen_random_uuid()"] {
                let sql = "UPDATE redemptions SET \(change) WHERE tenant_id = '\(t)' AND code = 'POOLAAA1'"
                #expect(await s.failure(sql) == "23000", "\(sql)")
            }
            let unchanged = try await s.count(
                "SELECT count(*) FROM redemptions WHERE tenant_id = '\(t)' AND code = 'POOLAAA1' AND campaign_id = 'pool'"
            )
            #expect(unchanged == 1)
            let rollback =
                "UPDATE redemptions SET rolled_back_at = now() WHERE tenant_id = '\(t)' AND code = 'POOLAAA1'"
            #expect(await s.failure(rollback) == nil)
        }
    }

    @Test(
        "removing a code waits for an open redemption of it and then fails; a redemption of a code being removed fails")
    func concurrentRemovalAndRedemption() async throws {
        try await Self.withSeeded { s in
            let t = s.tenantLiteral
            // 1. A redemption of POOLBBB2 open in one transaction; the code's removal in another waits for it, and
            //    once the redemption commits, is refused.
            try await s.db.pool.withConnection { holder in
                try await holder.query("BEGIN")
                try await holder.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO redemptions (tenant_id, redemption_id, campaign_id, code, one_time, customer_id)
                            VALUES ('\(t)', gen_random_uuid(), 'pool', 'POOLBBB2', true, 'c3')
                            """))
                let removal = Task {
                    await s.failure("DELETE FROM offer_codes WHERE tenant_id = '\(t)' AND code = 'POOLBBB2'")
                }
                #expect(try await s.probe.waitsForALock("DELETE FROM offer_codes"))
                try await holder.query("COMMIT")
                #expect(await removal.value == "23503")
            }
            #expect(try await s.count("SELECT count(*) FROM offer_codes WHERE code = 'POOLBBB2'") == 1)
            // 2. The other order: a removal of an unredeemed code open first; a redemption of that code waits for
            //    it, and once the removal commits, is refused.
            _ = try await s.db.campaigns.generateCodes(
                tenant: s.tenant, campaignId: "pool", count: 1, makeCodes: { _ in ["POOLCCC3"] }, progress: { _ in })
            try await s.db.pool.withConnection { remover in
                try await remover.query("BEGIN")
                try await remover.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM offer_codes WHERE tenant_id = '\(t)' AND code = 'POOLCCC3'"))
                let redemption = Task {
                    await s.failure(
                        """
                        INSERT INTO redemptions (tenant_id, redemption_id, campaign_id, code, one_time, customer_id)
                        VALUES ('\(t)', gen_random_uuid(), 'pool', 'POOLCCC3', true, 'c4')
                        """)
                }
                #expect(try await s.probe.waitsForALock("INSERT INTO redemptions"))
                try await remover.query("COMMIT")
                #expect(await redemption.value == "23503")
            }
            #expect(try await s.count("SELECT count(*) FROM redemptions WHERE code = 'POOLCCC3'") == 0)
        }
    }
}
