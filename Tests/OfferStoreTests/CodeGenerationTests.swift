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
            let tenantId = try await RepositoryTests.tenantWithCodeOffer(db, slug: "gen")
            _ = try await db.campaigns.create(
                tenant: tenantId, try Campaign(id: "pool", offerId: "code1", kind: .oneTime), productId: "monthly")
            // Only three distinct codes can ever be made: the first round stores them, later rounds add nothing.
            do {
                _ = try await db.campaigns.generateCodes(
                    tenant: tenantId, campaignId: "pool", count: 5, statementRows: 3, statementsPerRound: 1,
                    maxRounds: 4, makeCodes: { n in Array(["AAAA2222", "BBBB3333", "CCCC4444"].prefix(n)) },
                    progress: { _ in })
                Issue.record("an exhausted pattern must be refused")
            } catch StoreError.conflict {}
            let stored = try await db.pool.query(
                "SELECT count(*) FROM offer_codes WHERE tenant_id = \(tenantId)"
            ).scalar(Int64.self)
            #expect(stored == 0)
            #expect(try await db.campaigns.find(tenant: tenantId, campaignId: "pool")?.codesGenerated == 0)
            // The same repository still generates when the codes are new.
            let made = try await db.campaigns.generateCodes(
                tenant: tenantId, campaignId: "pool", count: 3,
                makeCodes: { n in
                    Array(["AAAA2222", "BBBB3333", "CCCC4444"].prefix(n))
                }, progress: { _ in })
            #expect(made == 3)
            #expect(try await db.campaigns.find(tenant: tenantId, campaignId: "pool")?.codesGenerated == 3)
        }
    }
}
