import Foundation
import Testing

@testable import OfferDomain

@Suite("Campaigns: state, eligibility, limits; customer ids")
struct CampaignTests {
    @Test(
        "campaign state at an instant",
        arguments: [
            ("2026-02-28T23:59:59Z", String?.none, CampaignState.notStarted),
            ("2026-03-01", nil, .active),
            ("2026-03-31T23:59:59Z", nil, .active),
            ("2026-04-01", nil, .expired),
            ("2026-03-15", "2026-03-15", .deactivated),
            ("2026-03-15", "2026-03-16", .active),
            ("2026-02-01", "2026-01-01", .deactivated),  // deactivation wins over not started
            ("2026-05-01", "2026-01-01", .deactivated),  // and over expired
        ])
    func state(at: String, deactivatedAt: String?, expected: CampaignState) {
        #expect(
            CampaignState.at(
                day(at), startsAt: day("2026-03-01"), expiresAt: day("2026-04-01"),
                deactivatedAt: deactivatedAt.map(day)) == expected)
    }

    @Test("no dates: always active")
    func openEnded() {
        #expect(CampaignState.at(.distantFuture, startsAt: nil, expiresAt: nil, deactivatedAt: nil) == .active)
    }

    @Test(
        "eligibility sets from the group state (revoked counts as expired)",
        arguments: [
            (GroupState.never, CampaignAudience.new), (.active, .existing), (.billingRetry, .existing),
            (.gracePeriod, .existing), (.expired, .expired), (.revoked, .expired),
        ])
    func audience(state: GroupState, audience: CampaignAudience) throws {
        #expect(CampaignAudience(state) == audience)
        let campaign = try Campaign(id: "c", offerId: "o", kind: .custom, code: "x1", eligibility: [audience])
        #expect(campaign.admits(state))
        let others = Set(CampaignAudience.allCases).subtracting([audience])
        #expect(!(try Campaign(id: "c", offerId: "o", kind: .custom, code: "x1", eligibility: others).admits(state)))
    }

    @Test("audience ordering")
    func audienceOrder() {
        #expect(CampaignAudience.allCases.sorted() == [.new, .existing, .expired])
        #expect(PromotionalAudience.allCases.sorted() == [.active, .atRisk, .billingRetry, .lapsed])
    }

    @Test(
        "limits: the customer's own limit first, then the total",
        arguments: [
            (Int?.some(3), 1, 1, 0, CampaignLimits.Decision.accepted),
            (3, 1, 1, 1, .customerLimitReached),
            (3, 3, 1, 1, .customerLimitReached),
            (3, 3, 1, 0, .exhausted),
            // over-full (e.g. after a limit was lowered) stays exhausted
            (5, 7, 1, 0, .exhausted),
            (nil, 1_000_000, 2, 1, .accepted),
            (nil, 0, 2, 2, .customerLimitReached),
        ])
    func decide(total: Int?, redeemed: Int, perCustomer: Int, mine: Int, expected: CampaignLimits.Decision) {
        let limits = CampaignLimits(totalLimit: total, perCustomerLimit: perCustomer)
        #expect(limits.decide(redeemed: redeemed, customerRedeemed: mine) == expected)
    }

    @Test("remaining capacity", arguments: [(Int?.some(10), 3, Int?.some(7)), (10, 10, 0), (10, 12, 0), (nil, 5, nil)])
    func remaining(total: Int?, redeemed: Int, expected: Int?) {
        #expect(CampaignLimits(totalLimit: total).remaining(redeemed: redeemed) == expected)
        #expect(CampaignLimits(totalLimit: total).perCustomerLimit == 1)
    }

    static func spring() throws -> Campaign {
        try Campaign(
            id: "spring", offerId: "o", kind: .custom, code: "spring-2026", totalLimit: 2, perCustomerLimit: 1,
            startsAt: day("2026-03-01"), expiresAt: day("2026-04-01"), eligibility: [.expired])
    }

    @Test(
        "refusals in order: state, eligibility, used code, customer limit, total",
        arguments: [
            (
                facts("2026-02-01", eligible: false, used: true, redeemed: 2, mine: 1),
                Campaign.Refusal?.some(.campaignNotStarted)
            ),
            (facts("2026-04-01", eligible: false, used: true), .campaignExpired),
            (facts("2026-03-10", eligible: false, used: true, redeemed: 2, mine: 1), .notInCampaignEligibility),
            (facts("2026-03-10", used: true, redeemed: 2, mine: 1), .codeExhausted),
            (facts("2026-03-10", redeemed: 2, mine: 1), .customerLimitReached),
            (facts("2026-03-10", redeemed: 2), .codeExhausted),
            (facts("2026-03-10", redeemed: 1), nil),
        ])
    func refusals(facts: RedemptionFacts, expected: Campaign.Refusal?) throws {
        let spring = try Self.spring()
        #expect(spring.code == "SPRING2026")
        #expect(spring.refusal(facts) == expected)
    }

    @Test("a deactivated campaign refuses first")
    func deactivated() throws {
        var campaign = try Self.spring()
        campaign.deactivatedAt = day("2026-03-05")
        #expect(campaign.state(at: day("2026-03-10")) == .deactivated)
        #expect(campaign.refusal(facts("2026-03-10", eligible: false, used: true)) == .campaignDeactivated)
    }

    @Test("eligibility from the group state, and who needs no history")
    func eligibility() throws {
        let spring = try Self.spring()
        #expect(spring.admits(.expired) && spring.admits(.revoked))
        #expect(!spring.admits(.active) && !spring.admits(.never) && !spring.admitsEveryone)
        let open = try Campaign(id: "o", offerId: "o", kind: .custom, code: "OPEN")
        #expect(open.admitsEveryone && GroupState.allCases.allSatisfy(open.admits))
    }

    struct InvalidCase: Sendable, CustomTestStringConvertible {
        let name: String
        let make: @Sendable () throws(OfferDomainError) -> Campaign
        let code: OfferDomainError.Code
        let field: String
        var testDescription: String { name }
    }

    static let invalid: [InvalidCase] = [
        InvalidCase(
            name: "empty id",
            make: { () throws(OfferDomainError) in
                try Campaign(id: "", offerId: "o", kind: .oneTime)
            }, code: .invalidCampaign, field: "campaignId"),
        InvalidCase(
            name: "custom without code",
            make: { () throws(OfferDomainError) in
                try Campaign(id: "c", offerId: "o", kind: .custom)
            }, code: .invalidCampaign, field: "code"),
        InvalidCase(
            name: "oneTime with code",
            make: { () throws(OfferDomainError) in
                try Campaign(id: "c", offerId: "o", kind: .oneTime, code: "X")
            }, code: .invalidCampaign, field: "code"),
        InvalidCase(
            name: "bad custom code",
            make: { () throws(OfferDomainError) in
                try Campaign(id: "c", offerId: "o", kind: .custom, code: "a_b")
            }, code: .invalidCode, field: "code"),
        InvalidCase(
            name: "zero total",
            make: { () throws(OfferDomainError) in
                try Campaign(id: "c", offerId: "o", kind: .oneTime, totalLimit: 0)
            }, code: .invalidCampaign,
            field: "totalLimit"),
        InvalidCase(
            name: "zero per customer",
            make: { () throws(OfferDomainError) in
                try Campaign(id: "c", offerId: "o", kind: .oneTime, perCustomerLimit: 0)
            }, code: .invalidCampaign,
            field: "perCustomerLimit"),
        InvalidCase(
            name: "expires at start",
            make: { () throws(OfferDomainError) in
                try Campaign(
                    id: "c", offerId: "o", kind: .oneTime, startsAt: day("2026-01-01"),
                    expiresAt: day("2026-01-01"))
            }, code: .invalidCampaign, field: "expiresAt"),
        InvalidCase(
            name: "empty eligibility",
            make: { () throws(OfferDomainError) in
                try Campaign(id: "c", offerId: "o", kind: .oneTime, eligibility: [])
            }, code: .invalidCampaign,
            field: "eligibility"),
    ]

    @Test("invalid campaigns name the field", arguments: invalid)
    func invalidCampaigns(_ c: InvalidCase) {
        do {
            _ = try c.make()
            Issue.record("accepted \(c.name)")
        } catch {
            #expect(error.code == c.code)
            #expect(error.field == c.field)
        }
    }

    @Test("Apple cap warnings")
    func warnings() throws {
        let created = day("2026-01-01")
        let ok = try Campaign(
            id: "c", offerId: "o", kind: .oneTime, totalLimit: 1_000_000,
            expiresAt: day("2026-07-01"))
        #expect(ok.appleCapWarnings(createdAt: created).isEmpty)
        let long = try Campaign(
            id: "c", offerId: "o", kind: .oneTime, totalLimit: 1_000_001,
            startsAt: day("2026-02-01"), expiresAt: day("2026-08-01T00:00:01Z"))
        #expect(
            long.appleCapWarnings(createdAt: created) == [
                "totalLimit exceeds Apple's 1,000,000 code redemptions per app per quarter",
                "one-time codes are valid at most 6 months at Apple; set expiresAt accordingly",
            ])
        let openEnded = try Campaign(id: "c", offerId: "o", kind: .oneTime)
        #expect(openEnded.appleCapWarnings(createdAt: created).count == 1)
        let custom = try Campaign(id: "c", offerId: "o", kind: .custom, code: "VIP")
        #expect(custom.appleCapWarnings(createdAt: created).isEmpty)
        #expect(custom.eligibility == [.new, .existing, .expired])
        #expect(custom.limits == CampaignLimits(totalLimit: nil, perCustomerLimit: 1))
    }

    @Test(
        "customer ids: UUIDs lowercased, others verbatim",
        arguments: [
            ("E621E1F8-C36C-495A-93FC-0C247A3E6E5F", "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"),
            ("e621e1f8-c36c-495a-93fc-0c247a3e6e5f", "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"),
            ("User-42", "User-42"),
            ("E621E1F8C36C495A93FC0C247A3E6E5F", "E621E1F8C36C495A93FC0C247A3E6E5F"),  // not UUID-shaped
            ("E621E1F8-C36C-495A-93FC-0C247A3E6E5G", "E621E1F8-C36C-495A-93FC-0C247A3E6E5G"),
            ("E621E1F8_C36C-495A-93FC-0C247A3E6E5F", "E621E1F8_C36C-495A-93FC-0C247A3E6E5F"),
            ("Ünïcode", "Ünïcode"),
        ])
    func customerIds(raw: String, expected: String) throws {
        #expect(try CustomerID.normalize(raw) == expected)
    }

    @Test("control characters are exactly Unicode's Cc category")
    func controlCharactersAreCc() {
        for value in Array(UInt32(0)..<0x1_0000) + [0x1_F600, 0x10_FFFF] {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let isControl = scalar.properties.generalCategory == .control
            let id = "a" + String(Character(scalar)) + "b"
            let rejected = (try? CustomerID.normalize(id)) == nil
            #expect(rejected == isControl, "U+\(String(value, radix: 16))")
            // The byte scan itself, wherever the character stands and beside a two-byte neighbour (C2 A2, C3 82).
            for text in [String(Character(scalar)), "¢" + String(Character(scalar)), String(Character(scalar)) + "Â"] {
                #expect(text.hasControlCharacters == isControl, "U+\(String(value, radix: 16)) in \(Array(text.utf8))")
            }
        }
        #expect("¢Â€ü".hasControlCharacters == false)
    }

    @Test(
        "invalid customer ids",
        arguments: ["", String(repeating: "x", count: 257), "a\u{0}b", "line\nbreak", "del\u{7F}", "nel\u{85}"])
    func invalidCustomerIds(raw: String) {
        do {
            _ = try CustomerID.normalize(raw)
            Issue.record("accepted")
        } catch {
            #expect(error.code == .invalidCustomerId)
            #expect(error.field == "customerId")
        }
    }
}

/// The facts of one redemption decision on `at` (a day).
private func facts(
    _ at: String, eligible: Bool = true, used: Bool = false, redeemed: Int = 0, mine: Int = 0
) -> RedemptionFacts {
    RedemptionFacts(
        at: day(at), customerEligible: eligible, oneTimeCodeUsed: used, redeemed: redeemed, customerRedeemed: mine)
}
