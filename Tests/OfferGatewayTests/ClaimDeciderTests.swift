import Foundation
import OfferDomain
import OfferStore
import Testing

@testable import OfferGateway

@Suite("ClaimDecider: the pure decision of a claim batch")
struct ClaimDeciderTests {
    static let now = Date(timeIntervalSince1970: 1_795_089_600)

    static func attempt(_ customer: String, key: String? = nil, eligible: Bool = true) -> ClaimAttempt {
        ClaimAttempt(
            customerId: customer, eligible: eligible, idempotencyKey: key,
            requestHash: ClaimCoordinator.requestHash(campaignId: "asc", customerId: customer), claimId: UUID())
    }

    static func campaign(total: Int? = nil, expiresAt: Date? = nil) throws -> Campaign {
        try Campaign(id: "asc", offerId: "code1", kind: .appleOneTime, totalLimit: total, expiresAt: expiresAt)
    }

    @Test("free codes in order; the same customer twice is one claim; none left is code_exhausted")
    func handsOutInOrder() throws {
        let verdicts = ClaimDecider.decide(
            [Self.attempt("a"), Self.attempt("b"), Self.attempt("a"), Self.attempt("c")], campaign: try Self.campaign(),
            at: Self.now, claimed: 0, claims: [:], freeCodes: ["C1", "C2"], records: [:])
        #expect(verdicts == [.accepted(code: "C1"), .accepted(code: "C2"), .sameAs(0), .refused(.codeExhausted)])
    }

    @Test("a customer holding a claim gets it again, even after the campaign expired; keys conflict on other params")
    func replaysAndConflicts() throws {
        let held = StoredClaim(claimId: UUID(), code: "OLD", customerId: "a")
        let record = IdempotencyRecord(
            requestHash: ClaimCoordinator.requestHash(campaignId: "asc", customerId: "a"), responseJSON: "{}")
        let verdicts = ClaimDecider.decide(
            [
                Self.attempt("a", key: "k"), Self.attempt("b", key: "k"), Self.attempt("c"),
                Self.attempt("d", eligible: false),
            ],
            campaign: try Self.campaign(expiresAt: Self.now), at: Self.now, claimed: 1, claims: ["a": held],
            freeCodes: ["C1"], records: ["k": record])
        #expect(verdicts == [.replay(held), .keyConflict, .refused(.campaignExpired), .refused(.campaignExpired)])
    }

    @Test("the total limit counts claims, and eligibility refuses before any code is used")
    func limitAndEligibility() throws {
        let verdicts = ClaimDecider.decide(
            [Self.attempt("x", eligible: false), Self.attempt("a"), Self.attempt("b")],
            campaign: try Self.campaign(total: 2), at: Self.now, claimed: 1, claims: [:], freeCodes: ["C1", "C2"],
            records: [:])
        #expect(verdicts == [.refused(.notInCampaignEligibility), .accepted(code: "C1"), .refused(.codeExhausted)])
    }
}
