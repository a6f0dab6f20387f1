import Foundation
import Testing

@testable import OfferDomain

/// Histories from Apple's verified data (API.md §8), as plain values with a fixed clock.
@Suite("Apple history")
struct AppleHistoryTests {
    static func apple(
        _ id: String, chain: String? = nil, _ product: String = "monthly", from: String, to: String?,
        env: DataEnvironment = .production, offerType: Int? = nil, offerId: String? = nil, family: Bool = false,
        revoked: String? = nil
    ) -> AppleTransactionFacts {
        AppleTransactionFacts(
            transactionId: id, originalTransactionId: chain ?? id, environment: env, productId: product,
            purchaseDate: day(from), expiresDate: to.map(day), appleOfferType: offerType, offerId: offerId,
            familyShared: family, revocationDate: revoked.map(day), signedDate: day(from))
    }

    static func renewal(
        _ chain: String, env: DataEnvironment = .production, autoRenew: Int? = 1, retry: Bool = false,
        grace: String? = nil, winBack: [String]? = nil, signed: String = "2026-01-01"
    ) -> AppleRenewalFacts {
        AppleRenewalFacts(
            originalTransactionId: chain, environment: env, productId: "monthly", autoRenewProductId: "monthly",
            autoRenewStatus: autoRenew, inBillingRetry: retry, gracePeriodExpiresDate: grace.map(day),
            eligibleWinBackOfferIds: winBack, signedDate: day(signed))
    }

    static func history(
        _ records: CustomerRecords, at: String, policy: EnvironmentPolicy = .productionOnly,
        catalog: Catalog = Fixture.standard
    ) -> GroupHistory {
        CustomerHistory.derive(records: records, policy: policy, catalog: catalog, at: day(at)).group("g1")
    }

    struct EnvironmentCase: Sendable, CustomTestStringConvertible {
        let present: [DataEnvironment]
        let recorded: Bool
        let policy: EnvironmentPolicy
        let chosen: DataEnvironment
        var testDescription: String { "\(present.map(\.rawValue)) recorded:\(recorded) \(policy) -> \(chosen)" }
    }

    static let environmentCases: [EnvironmentCase] = [
        .init(
            present: [.production, .sandbox], recorded: false, policy: .init(allowSandbox: true), chosen: .production),
        .init(present: [.sandbox], recorded: false, policy: .init(allowSandbox: true), chosen: .sandbox),
        .init(present: [.sandbox], recorded: false, policy: .init(), chosen: .production),
        .init(present: [.sandbox], recorded: true, policy: .init(allowSandbox: true), chosen: .production),
        .init(present: [.xcode], recorded: false, policy: .init(allowSandbox: true), chosen: .production),
        .init(
            present: [.xcode, .sandbox], recorded: false, policy: .init(allowSandbox: true, allowXcode: true),
            chosen: .sandbox),
        .init(present: [.localTesting], recorded: false, policy: .init(allowXcode: true), chosen: .localTesting),
        .init(present: [], recorded: false, policy: .init(allowSandbox: true, allowXcode: true), chosen: .production),
    ]

    @Test("Which environment decisions use", arguments: environmentCases)
    func environmentChoice(_ c: EnvironmentCase) {
        let records = CustomerRecords(
            recorded: c.recorded ? [Fixture.tx("r1", from: "2025-01-01", to: "2025-02-01")] : [],
            appleTransactions: c.present.enumerated().map {
                Self.apple("a\($0.offset)", from: "2025-03-01", to: "2025-04-01", env: $0.element)
            })
        #expect(records.environment(c.policy) == c.chosen)
    }

    @Test("Renewal info applies to the chain's latest transaction: at risk, billing retry, grace period")
    func renewalStates() {
        let chain = [
            Self.apple("t1", chain: "c", from: "2026-01-01", to: "2026-02-01"),
            Self.apple("t2", chain: "c", from: "2026-02-01", to: "2026-03-01"),
        ]
        func state(_ renewal: AppleRenewalFacts, at: String) -> GroupHistory {
            Self.history(CustomerRecords(recorded: [], appleTransactions: chain, appleRenewals: [renewal]), at: at)
        }
        let atRisk = state(Self.renewal("c", autoRenew: 0), at: "2026-02-15")
        #expect(atRisk.state == .active && atRisk.segment == .atRisk)
        #expect(atRisk.source == .apple && atRisk.environment == .production && atRisk.autoRenewProductId == "monthly")
        #expect(state(Self.renewal("c", autoRenew: 1), at: "2026-02-15").segment == .active)
        #expect(state(Self.renewal("c", autoRenew: nil), at: "2026-02-15").segment == .active)
        #expect(state(Self.renewal("c", retry: true), at: "2026-03-05").state == .billingRetry)
        #expect(state(Self.renewal("c", retry: true, grace: "2026-03-10"), at: "2026-03-05").state == .gracePeriod)
        #expect(state(Self.renewal("c", retry: true, grace: "2026-03-10"), at: "2026-03-10").state == .billingRetry)
        #expect(state(Self.renewal("c"), at: "2026-03-05").state == .expired)
    }

    @Test("Apple's win-back list replaces our rules: listed is eligible, unlisted refused, empty refuses all")
    func winBackPerApple() {
        let catalog = Fixture.catalog([
            Fixture.winBack("wb-a", minPaid: 6, lapse: (3, 24)), Fixture.winBack("wb-b", price: "0.99"),
        ])
        // Lapsed one month after one paid month: our rules refuse wb-a (paid too short, lapsed too recently).
        let records = { (winBack: [String]?) in
            CustomerRecords(
                recorded: [],
                appleTransactions: [Self.apple("t1", from: "2026-01-01", to: "2026-02-01")],
                appleRenewals: [Self.renewal("t1", autoRenew: 0, winBack: winBack)])
        }
        func reasons(_ offer: String, _ winBack: [String]?) -> [ReasonCode] {
            let group = Self.history(records(winBack), at: "2026-03-01", catalog: catalog)
            return Eligibility.evaluate(offer: catalog.offers(withId: offer)[0], history: group, at: day("2026-03-01"))
                .reasons
        }
        #expect(reasons("wb-a", nil) == [.paidTooShort, .lapsedTooRecently])
        #expect(reasons("wb-b", nil) == [])
        #expect(reasons("wb-a", ["wb-a"]) == [])
        #expect(reasons("wb-b", ["wb-a"]) == [.notEligiblePerApple])
        #expect(reasons("wb-a", []) == [.notEligiblePerApple])
        // offers.best: Apple's first choice first, though wb-b saves more.
        let group = CustomerHistory.derive(
            records: records(["wb-a", "wb-b"]), policy: .productionOnly, catalog: catalog, at: day("2026-03-01"))
        let best = try? BestOffer.choose(
            scope: .product("monthly"), catalog: catalog, history: group, at: day("2026-03-01"))
        #expect(best?.winner?.offer.id == "wb-a")
        let ranked = try? BestOffer.choose(
            scope: .product("monthly"), ranked: RankedCatalog(catalog), history: group, at: day("2026-03-01"))
        #expect(ranked?.winner?.offer.id == "wb-a")
        #expect(ranked?.considered.map(\.offer.id) == best?.considered.map(\.offer.id))
        let ours = CustomerHistory.derive(
            records: records(nil), policy: .productionOnly, catalog: catalog, at: day("2026-03-01"))
        let oursBest = try? BestOffer.choose(
            scope: .product("monthly"), catalog: catalog, history: ours, at: day("2026-03-01"))
        #expect(oursBest?.winner?.offer.id == "wb-b")
    }

    @Test("Sources combine: Apple supersedes the same transaction id; other recorded ones stay (mixed)")
    func sources() {
        let recorded = [
            Fixture.tx("r1", from: "2025-01-01", to: "2025-02-01"),
            Fixture.tx("same", from: "2025-03-01", to: "2026-03-01"),
        ]
        let apple = [Self.apple("same", from: "2025-03-01", to: "2025-04-01", revoked: "2025-03-15")]
        let both = Self.history(CustomerRecords(recorded: recorded, appleTransactions: apple), at: "2025-06-01")
        #expect(both.source == .mixed)
        #expect(both.state == .revoked)
        #expect(Self.history(CustomerRecords(recorded: recorded), at: "2025-06-01").source == .recorded)
        #expect(
            Self.history(CustomerRecords(recorded: [], appleTransactions: apple), at: "2025-06-01").source == .apple)
        #expect(Self.history(CustomerRecords(recorded: []), at: "2025-06-01").source == nil)
    }

    @Test("Offer types 5 and unknown are no offer the rules know; family sharing is not paid tenure")
    func offerTypesAndFamily() {
        let records = CustomerRecords(
            recorded: [],
            appleTransactions: [
                Self.apple("t1", from: "2025-01-01", to: "2025-04-01", offerType: 5, offerId: "retention"),
                Self.apple("t2", from: "2025-04-01", to: "2025-07-01", offerType: 99),
                Self.apple("t3", from: "2025-07-01", to: "2025-10-01", family: true),
                Self.apple("t4", from: "2025-10-01", to: nil),
            ])
        let group = Self.history(records, at: "2025-10-01")
        #expect(group.paidMonths == 6)
        #expect(group.introOfferUsed == false && group.winBackRedemptions.isEmpty)
        #expect(records.effective(.productionOnly).transactions.count == 3)
    }

    @Test("Sandbox data never enters a Production customer's decisions")
    func sandboxKeptApart() {
        let records = CustomerRecords(
            recorded: [],
            appleTransactions: [
                Self.apple("p", from: "2025-01-01", to: "2025-02-01"),
                Self.apple("s", from: "2025-05-01", to: "2025-12-01", env: .sandbox),
            ],
            appleRenewals: [Self.renewal("s", env: .sandbox, winBack: [])])
        let group = Self.history(
            records, at: "2025-06-01", policy: EnvironmentPolicy(allowSandbox: true, allowXcode: true))
        #expect(group.state == .expired)
        #expect(group.environment == .production)
        #expect(group.appleWinBackOfferIds == nil)
    }
}
