import Foundation
import Testing

@testable import OfferDomain

@Suite("Best offer ranking and savings")
struct BestOfferTests {
    typealias F = Fixture

    static func offer(
        _ id: String, _ type: OfferType, product: String = "monthly", mode: PaymentMode, period: String,
        count: Int = 1, price: String? = nil
    ) -> Offer {
        Offer(
            id: id, type: type, productId: product, paymentMode: mode, period: OfferDomainTests.period(period),
            periodCount: count, price: price.map(usd),
            winBack: type == .winBack
                ? WinBackParameters(
                    minPaidMonths: 0, monthsSinceLapse: .init(min: 0, max: 99),
                    waitBetweenOffersMonths: nil) : nil)
    }

    @Test(
        "savings per APPLE_OFFERS §4",
        arguments: [
            // monthly $4.99 / P1M
            ("monthly", PaymentMode.freeTrial, "P1W", 1, String?.none, "1.164333"),  // 4.99 × 7/30
            ("monthly", .freeTrial, "P3D", 1, nil, "0.499"),
            ("monthly", .freeTrial, "P1M", 1, nil, "4.99"),
            ("monthly", .payAsYouGo, "P1M", 3, "2.99", "6"),  // (4.99 − 2.99) × 3
            ("monthly", .payAsYouGo, "P1M", 12, "0.99", "48"),
            ("monthly", .payUpFront, "P3M", 1, "9.99", "4.98"),  // 4.99 × 3 − 9.99
            // yearly $19.99 / P1Y
            ("yearly", .freeTrial, "P1M", 1, nil, "1.665833"),  // 19.99 / 12
            ("yearly", .payUpFront, "P6M", 1, "9.99", "0.005"),  // 19.99 × 6/12 − 9.99
            ("yearly", .payUpFront, "P1Y", 1, "18.99", "1"),
            // weekly $1.99 / P1W
            ("weekly", .freeTrial, "P1M", 1, nil, "8.528571"),  // 1.99 × 30/7
            ("weekly", .payAsYouGo, "P1W", 4, "0.99", "4"),
        ])
    func savings(product: String, mode: PaymentMode, period: String, count: Int, price: String?, expected: String)
        throws
    {
        let p = try #require(F.catalog([]).product(product))
        let saving = Saving(
            offer: Self.offer(
                "x", .promotional, product: product, mode: mode, period: period,
                count: count, price: price), product: p)
        #expect(saving.description == expected)
        #expect(saving.amount == Decimal(string: expected, locale: Locale(identifier: "en_US_POSIX")))
    }

    @Test("savings on different billing periods compare exactly")
    func exactComparison() throws {
        let monthly = try #require(F.catalog([]).product("monthly"))
        let yearly = try #require(F.catalog([]).product("yearly"))
        let a = Saving(
            offer: Self.offer("a", .promotional, mode: .payAsYouGo, period: "P1M", price: "3.99"),
            product: monthly)
        let b = Saving(
            offer: Self.offer(
                "b", .promotional, product: "yearly", mode: .payUpFront, period: "P1Y",
                price: "18.99"), product: yearly)
        #expect(a == b)
        #expect(a == a, "a saving and its copy")
        #expect(!(a < b) && !(b < a))
        #expect(a.hashValue == b.hashValue)
        let c = Saving(
            offer: Self.offer("c", .promotional, mode: .payAsYouGo, period: "P1M", price: "3.98"),
            product: monthly)
        #expect(b < c)
    }

    static let lapsed = [F.tx("t", from: "2025-01-01", to: "2026-01-01", autoRenew: false)]

    @Test("win-back beats promotional beats introductory; code offers are not considered")
    func typePriority() throws {
        // Promotional saves more (9.00 vs 2.00), yet win-back wins.
        let catalog = F.catalog([
            F.introMonthly,
            Self.offer("promo", .promotional, mode: .payAsYouGo, period: "P1M", count: 3, price: "1.99"),
            Self.offer("wb", .winBack, mode: .payAsYouGo, period: "P1M", count: 1, price: "2.99"),
            F.codeMonthly,
        ])
        let history = F.history(Self.lapsed, at: "2026-03-01", catalog: catalog)
        let result = try BestOffer.choose(
            scope: .product("monthly"), catalog: catalog, history: history,
            at: day("2026-03-01"))
        #expect(result.winner?.offer.id == "wb")
        #expect(result.considered.map(\.offer.id) == ["wb", "promo", "intro-monthly"])
        #expect(result.considered.map(\.rank) == [1, 2, nil])
        #expect(result.considered.map(\.verdict.eligible) == [true, true, false])
        #expect(result.considered[2].verdict.reasons == [.previouslySubscribed])

        // A newcomer only gets the intro.
        let newcomer = try BestOffer.choose(
            scope: .product("monthly"), catalog: catalog,
            history: F.history([], at: "2026-03-01", catalog: catalog), at: day("2026-03-01"))
        #expect(newcomer.winner?.offer.id == "intro-monthly")
        #expect(newcomer.considered.map(\.offer.id) == ["intro-monthly", "wb", "promo"])
        #expect(newcomer.considered.map(\.rank) == [1, nil, nil])
    }

    @Test("within a type the larger saving wins; ties go to the smaller offer id")
    func savingsAndTies() throws {
        let catalog = F.catalog([
            Self.offer("p-small", .promotional, mode: .payUpFront, period: "P1M", price: "4.49"),  // 0.50
            Self.offer("p-b", .promotional, mode: .payAsYouGo, period: "P1M", price: "3.99"),  // 1.00
            Self.offer("p-a", .promotional, product: "yearly", mode: .payUpFront, period: "P1Y", price: "18.99"),
            Self.offer("p-big", .promotional, mode: .payAsYouGo, period: "P1M", count: 2, price: "3.99"),  // 2.00
        ])
        let history = F.history(Self.lapsed, at: "2026-03-01", catalog: catalog)
        let result = try BestOffer.choose(
            scope: .group("g1"), catalog: catalog, history: history,
            at: day("2026-03-01"))
        #expect(result.considered.map(\.offer.id) == ["p-big", "p-a", "p-b", "p-small"])
        #expect(result.considered.map(\.rank) == [1, 2, 3, 4])
        #expect(result.winner?.product.id == "monthly")
        // Only the monthly product: p-a (yearly) is out of scope.
        let single = try BestOffer.choose(
            scope: .product("monthly"), catalog: catalog, history: history,
            at: day("2026-03-01"))
        #expect(single.considered.map(\.offer.id) == ["p-big", "p-b", "p-small"])
    }

    @Test("a group with several products: the best across products wins")
    func groupScope() throws {
        let catalog = F.catalog([
            Self.offer("intro-m", .introductory, mode: .freeTrial, period: "P1W"),  // 1.164
            Self.offer("intro-y", .introductory, product: "yearly", mode: .freeTrial, period: "P1M"),  // 1.666
            Self.offer("intro-w", .introductory, product: "weekly", mode: .freeTrial, period: "P3D"),  // 0.853
            Self.offer("intro-pro", .introductory, product: "pro", mode: .freeTrial, period: "P1Y"),  // other group
        ])
        let history = F.history([], at: "2026-03-01", catalog: catalog)
        let result = try BestOffer.choose(
            scope: .group("g1"), catalog: catalog, history: history,
            at: day("2026-03-01"))
        #expect(result.winner?.offer.id == "intro-y")
        #expect(result.considered.map(\.offer.id) == ["intro-y", "intro-m", "intro-w"])
        #expect(result.considered.map(\.rank) == [1, 2, 3])
    }

    @Test("ineligible offers are ordered by type priority then id, with rank nil; no winner if none is eligible")
    func noneEligible() throws {
        let catalog = F.catalog([
            F.introMonthly,
            Self.offer("z-promo", .promotional, mode: .payUpFront, period: "P1M", price: "1.00"),
            Self.offer("a-promo", .promotional, mode: .payUpFront, period: "P1M", price: "4.00"),
            Self.offer("wb", .winBack, mode: .payUpFront, period: "P1M", price: "1.00"),
        ])
        // Active with auto-renew on: not in the default promotional audience, not lapsed, not new.
        let history = F.history([F.tx("t", from: "2026-02-01", to: "2026-04-01")], at: "2026-03-01", catalog: catalog)
        let result = try BestOffer.choose(
            scope: .product("monthly"), catalog: catalog, history: history,
            at: day("2026-03-01"))
        #expect(result.winner == nil)
        #expect(result.considered.map(\.offer.id) == ["wb", "a-promo", "z-promo", "intro-monthly"])
        #expect(result.considered.allSatisfy { $0.rank == nil })
    }

    @Test("results compare offer by offer: equal for two customers alike, not for a reason, a rank or an offer more")
    func resultEquality() throws {
        // An introductory, a promotional and a win-back offer; the promotional one at `promo`.
        func catalog(promo: String) -> Catalog {
            F.catalog(
                [F.introMonthly]
                    + [("promo", OfferType.promotional, promo), ("wb", .winBack, "1.00")].map {
                        Self.offer($0.0, $0.1, mode: .payUpFront, period: "P1M", price: $0.2)
                    })
        }
        let ranked = RankedCatalog(catalog(promo: "1.00"))
        let at = day("2026-03-01")
        func decide(_ transactions: [Transaction], on catalog: Catalog? = nil) throws -> BestOfferResult {
            let catalog = catalog ?? ranked.catalog
            let history = F.history(transactions, at: "2026-03-01", catalog: catalog)
            return try BestOffer.choose(
                scope: .product("monthly"), ranked: RankedCatalog(catalog), history: history, at: at)
        }
        let newcomer = try decide([])
        let lapsed = try decide(Self.lapsed)
        let active = try decide([F.tx("t", from: "2026-02-01", to: "2026-04-01")])
        #expect(newcomer.winner?.offer.id == "intro-monthly")
        #expect(try decide([]) == newcomer, "decided apart, equal")
        #expect(try decide(Self.lapsed) == lapsed)
        #expect(newcomer != lapsed)
        #expect(lapsed != active)
        #expect(active.winner == nil)

        // One reason more on one offer, one rank changed, one offer less: each tells them apart.
        var reason = newcomer
        reason.considered[1].verdict.reasons.append(.offerEnded)
        #expect(reason != newcomer)
        var rank = newcomer
        rank.considered[0].rank = 2
        #expect(rank != newcomer)
        #expect(rank.winner == nil, "the winner is the first offer when it ranks first")
        var fewer = newcomer
        fewer.considered.removeLast()
        #expect(fewer != newcomer)
        // The same decision over a catalog whose promotional offer costs more: its saving and price differ.
        let dearer = catalog(promo: "2.00")
        #expect(try decide([], on: dearer) != newcomer)
        #expect(try decide([], on: dearer).considered.map(\.offer.id) == newcomer.considered.map(\.offer.id))
    }

    @Test("one offer id on two products: both compete in the group, the product id breaks the tie")
    func sharedOfferId() throws {
        let catalog = F.catalog([
            Self.offer("shared", .promotional, product: "yearly", mode: .payUpFront, period: "P1M", price: "1.00"),
            Self.offer("shared", .promotional, mode: .payUpFront, period: "P1M", price: "1.00"),
        ])
        // Active with auto-renew on: not in the default promotional audience, so both are ineligible and ordered by
        // type, then offer id, then product id.
        let history = F.history([F.tx("t", from: "2026-02-01", to: "2026-04-01")], at: "2026-03-01", catalog: catalog)
        let plain = try BestOffer.choose(scope: .group("g1"), catalog: catalog, history: history, at: day("2026-03-01"))
        let ranked = try BestOffer.choose(
            scope: .group("g1"), ranked: RankedCatalog(catalog), history: history, at: day("2026-03-01"))
        for result in [plain, ranked] {
            #expect(
                result.considered.map(\.offer.key) == [
                    OfferKey(productId: "monthly", offerId: "shared"), OfferKey(productId: "yearly", offerId: "shared"),
                ])
        }
    }

    @Test("unknown product or group")
    func unknown() {
        let history = F.history([], at: "2026-03-01")
        for (scope, code, field) in [
            (BestOffer.Scope.product("ghost"), OfferDomainError.Code.unknownProduct, "productId"),
            (.group("ghost"), .unknownGroup, "groupId"),
        ] {
            do {
                _ = try BestOffer.choose(scope: scope, catalog: F.standard, history: history, at: day("2026-03-01"))
                Issue.record("accepted \(scope)")
            } catch {
                #expect(error.code == code)
                #expect(error.field == field)
            }
        }
    }
}
