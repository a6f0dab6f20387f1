import Foundation
import Testing

@testable import OfferDomain

@Suite("Billing plans: only the offers that apply to the plan are considered")
struct BillingPlanTests {
    typealias F = Fixture

    static func promo(_ id: String, price: String, plan: BillingPlan?) -> Offer {
        Offer(
            id: id, type: .promotional, productId: "monthly", paymentMode: .payAsYouGo, period: period("P1M"),
            periodCount: 3, price: usd(price), billingPlan: plan)
    }

    /// Savings: promo-any 3.00 (every plan), promo-up 6.00 (upFront), promo-mo 9.00 (monthly); wb-mo is a
    /// monthly win-back offer, which beats every promotional offer when considered.
    static let catalog: Catalog = {
        var winBack = F.winBack("wb-mo")
        winBack.billingPlan = .monthly
        return F.catalog([
            promo("promo-any", price: "3.99", plan: nil), promo("promo-up", price: "2.99", plan: .upFront),
            promo("promo-mo", price: "1.99", plan: .monthly), winBack,
        ])
    }()

    /// Lapsed in g1 with auto-renew off: every offer above is eligible.
    static let history = F.history(
        [F.tx("t1", from: "2025-01-01", to: "2025-06-01", autoRenew: false)], at: "2026-03-01", catalog: catalog)

    @Test(
        "Offer.applies(to:): a nil plan on either side applies",
        arguments: [
            (BillingPlan?.none, BillingPlan?.none, true), (nil, .upFront, true), (nil, .monthly, true),
            (.upFront, nil, true), (.upFront, .upFront, true), (.upFront, .monthly, false),
            (.monthly, nil, true), (.monthly, .monthly, true), (.monthly, .upFront, false),
        ])
    func applies(offerPlan: BillingPlan?, asked: BillingPlan?, expected: Bool) {
        #expect(Self.promo("o", price: "1.99", plan: offerPlan).applies(to: asked) == expected)
    }

    @Test(
        "offers.best and offers.eligibility per plan (ranked and unranked agree)",
        arguments: [
            (
                BillingPlan?.none, ["wb-mo", "promo-mo", "promo-up", "promo-any"],
                ["promo-any", "promo-mo", "promo-up", "wb-mo"]
            ),
            (.upFront, ["promo-up", "promo-any"], ["promo-any", "promo-up"]),
            (.monthly, ["wb-mo", "promo-mo", "promo-any"], ["promo-any", "promo-mo", "wb-mo"]),
        ])
    func perPlan(plan: BillingPlan?, best: [String], eligibility: [String]) throws {
        let at = day("2026-03-01")
        let unranked = try BestOffer.choose(
            scope: .group("g1"), catalog: Self.catalog, history: Self.history, at: at, billingPlan: plan)
        let ranked = try BestOffer.choose(
            scope: .group("g1"), ranked: RankedCatalog(Self.catalog), history: Self.history, at: at, billingPlan: plan)
        for result in [unranked, ranked] {
            #expect(result.considered.map(\.offer.id) == best)
            #expect(result.considered.map(\.rank) == Array(1...best.count))
            #expect(result.winner?.offer.id == best.first)
        }
        let verdicts = try Eligibility.evaluate(
            productId: "monthly", catalog: Self.catalog, history: Self.history, at: at, billingPlan: plan)
        #expect(verdicts.map(\.offerId) == eligibility)
        #expect(verdicts.allSatisfy { $0.eligible })
    }

    @Test("no plan given decides exactly as a catalog without plans did")
    func noPlanIsOldBehaviour() throws {
        let at = day("2026-03-01")
        var plain = Self.catalog.offers
        for i in plain.indices { plain[i].billingPlan = nil }
        let old = F.catalog(plain)
        let oldHistory = F.history(
            [F.tx("t1", from: "2025-01-01", to: "2025-06-01", autoRenew: false)], at: "2026-03-01", catalog: old)
        for scope in [BestOffer.Scope.group("g1"), .product("monthly"), .product("yearly")] {
            let now = try BestOffer.choose(
                scope: scope, ranked: RankedCatalog(Self.catalog), history: Self.history, at: at)
            let before = try BestOffer.choose(scope: scope, ranked: RankedCatalog(old), history: oldHistory, at: at)
            #expect(now.considered.map(\.offer.id) == before.considered.map(\.offer.id))
            #expect(now.considered.map(\.rank) == before.considered.map(\.rank))
            #expect(now.considered.map(\.verdict) == before.considered.map(\.verdict))
        }
        let now = try Eligibility.evaluate(productId: "monthly", catalog: Self.catalog, history: Self.history, at: at)
        let before = try Eligibility.evaluate(productId: "monthly", catalog: old, history: oldHistory, at: at)
        #expect(now == before)
    }

    @Test("a plan filters, it never makes an ineligible offer eligible")
    func filteringKeepsVerdicts() throws {
        // A newcomer: promotional offers need history, so every considered offer stays ineligible.
        let newcomer = F.history([], at: "2026-03-01", catalog: Self.catalog)
        let result = try BestOffer.choose(
            scope: .product("monthly"), catalog: Self.catalog, history: newcomer, at: day("2026-03-01"),
            billingPlan: .upFront)
        #expect(result.winner == nil)
        #expect(result.considered.map(\.offer.id) == ["promo-any", "promo-up"])
        #expect(result.considered.map(\.verdict.reasons) == [[.noHistory], [.noHistory]])
    }

    @Test("the catalog JSON carries billingPlan only when set")
    func coding() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let up = try encoder.encode(Self.promo("o", price: "1.99", plan: .upFront))
        #expect(String(decoding: up, as: UTF8.self).contains(#""billingPlan":"upFront""#))
        #expect(try JSONDecoder().decode(Offer.self, from: up).billingPlan == .upFront)
        let none = try encoder.encode(Self.promo("o", price: "1.99", plan: nil))
        #expect(!String(decoding: none, as: UTF8.self).contains("billingPlan"))
        #expect(try JSONDecoder().decode(Offer.self, from: none).billingPlan == nil)
    }
}
