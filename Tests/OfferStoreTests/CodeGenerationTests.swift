import Foundation
import OfferDomain
import Postgres
import Testing

@testable import OfferStore

/// `CampaignRepository.generateCodes` against a real PostgreSQL.
@Suite("One-time code generation")
struct CodeGenerationTests {
    @Test("a pattern that runs out of new codes stores nothing, not the rounds made before")
    func exhaustedPatternRollsEverythingBack() async throws {
        try await RepositoryTests.withStore { db in
            let tenant = try await db.tenants.create(
                slug: "gen", bundleId: "com.gen", name: nil,
                apiKey: StoredApiKey(lookup: "genlookup123", hash: Array(repeating: 7, count: 32)))
            let product = Product(
                id: "monthly", groupId: "g", period: try SubscriptionPeriod.parse("P1M"),
                price: try Money("4.99", currency: "USD"), level: 1)
            let offer = Offer(
                id: "code1", type: .code, productId: "monthly", paymentMode: .freeTrial,
                period: try SubscriptionPeriod.parse("P1M"))
            try await db.catalog.upsert(
                tenant: tenant.id, groups: [SubscriptionGroup(id: "g", name: "G")], products: [product],
                offers: [offer], actor: "admin")
            _ = try await db.campaigns.create(
                tenant: tenant.id, try Campaign(id: "pool", offerId: "code1", kind: .oneTime), productId: "monthly")
            // Only three distinct codes can ever be made: the first round stores them, later rounds add nothing.
            do {
                _ = try await db.campaigns.generateCodes(
                    tenant: tenant.id, campaignId: "pool", count: 5, statementRows: 3, statementsPerRound: 1,
                    maxRounds: 4, makeCodes: { n in Array(["AAAA2222", "BBBB3333", "CCCC4444"].prefix(n)) },
                    progress: { _ in })
                Issue.record("an exhausted pattern must be refused")
            } catch StoreError.conflict {}
            let stored = try await db.pool.query(
                "SELECT count(*) FROM offer_codes WHERE tenant_id = \(tenant.id)"
            ).scalar(Int64.self)
            #expect(stored == 0)
            #expect(try await db.campaigns.find(tenant: tenant.id, campaignId: "pool")?.codesGenerated == 0)
            // The same repository still generates when the codes are new.
            let made = try await db.campaigns.generateCodes(
                tenant: tenant.id, campaignId: "pool", count: 3,
                makeCodes: { n in
                    Array(["AAAA2222", "BBBB3333", "CCCC4444"].prefix(n))
                }, progress: { _ in })
            #expect(made == 3)
            #expect(try await db.campaigns.find(tenant: tenant.id, campaignId: "pool")?.codesGenerated == 3)
        }
    }
}
