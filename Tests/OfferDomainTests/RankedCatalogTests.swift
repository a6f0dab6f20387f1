import Foundation
import Testing

@testable import OfferDomain

/// `BestOffer.choose(scope:ranked:…)` (savings and order computed once per catalog) must decide exactly like
/// `choose(scope:catalog:…)` (everything computed per call): same winner, same considered offers, same ranks.
@Suite("Best offer on a ranked catalog")
struct RankedCatalogTests {
    typealias F = Fixture

    static let prices = ["0.99", "1.99", "2.99", "4.99", "9.99"]
    static let periods: [String: String] = ["monthly": "P1M", "yearly": "P1Y", "weekly": "P1W", "pro": "P1M"]

    /// A random offer of `product`; few distinct prices and periods, so equal savings (ties broken by type
    /// priority, then offer id) are common.
    static func randomOffer(_ id: String, product: String, rng: inout SplitMix64) -> Offer {
        let types: [OfferType] = [.introductory, .promotional, .winBack, .code]
        let type = types[Int(rng.next() % 4)]
        let mode = [PaymentMode.freeTrial, .payAsYouGo, .payUpFront][Int(rng.next() % 3)]
        let price = usd(prices[Int(rng.next() % UInt64(prices.count))])
        var offer: Offer
        switch mode {
        case .freeTrial:
            offer = Offer(
                id: id, type: type, productId: product, paymentMode: mode,
                period: period(["P3D", "P1W", "P1M"][Int(rng.next() % 3)]))
        case .payAsYouGo:
            offer = Offer(
                id: id, type: type, productId: product, paymentMode: mode, period: period(periods[product] ?? "P1M"),
                periodCount: Int(rng.next() % 4) + 1, price: price)
        case .payUpFront:
            offer = Offer(
                id: id, type: type, productId: product, paymentMode: mode,
                period: period(["P1M", "P3M", "P6M", "P1Y"][Int(rng.next() % 4)]), price: price)
        }
        if type == .winBack {
            offer.winBack = WinBackParameters(
                minPaidMonths: Int(rng.next() % 2), monthsSinceLapse: .init(min: 0, max: 99),
                waitBetweenOffersMonths: nil)
        }
        if type == .promotional && rng.next() % 2 == 0 { offer.audience = Set(PromotionalAudience.allCases) }
        return offer
    }

    /// Customers in each state: new, active (auto-renew on), at risk, lapsed, in billing retry, lapsed from another
    /// product of the group.
    static let histories: [[Transaction]] = [
        [],
        [F.tx("a1", from: "2026-01-15", to: "2026-02-15"), F.tx("a2", from: "2026-02-15", to: "2026-03-15")],
        [F.tx("r1", from: "2026-02-15", to: "2026-03-15", autoRenew: false)],
        [F.tx("l1", from: "2025-01-01", to: "2025-02-01"), F.tx("l2", from: "2025-02-01", to: "2025-03-01")],
        [F.tx("b1", from: "2026-01-20", to: "2026-02-20", retry: true)],
        [F.tx("y1", "yearly", from: "2024-06-01", to: "2025-06-01", autoRenew: false)],
    ]

    static var scopes: [BestOffer.Scope] {
        [.product("monthly"), .product("yearly"), .product("weekly"), .product("pro"), .group("g1"), .group("g2")]
    }

    /// Compares both paths on every scope and history; returns how many decisions had two or more eligible offers,
    /// and how many two or more ineligible ones (where the order matters: each kind is ranked on its own).
    static func compare(_ catalog: Catalog, at: String = "2026-03-01") throws -> (eligible: Int, ineligible: Int) {
        let ranked = RankedCatalog(catalog)
        var contested = 0
        var ineligible = 0
        for transactions in histories {
            let history = F.history(transactions, at: at, catalog: catalog)
            for scope in scopes {
                let plain = try BestOffer.choose(scope: scope, catalog: catalog, history: history, at: day(at))
                let fast = try BestOffer.choose(scope: scope, ranked: ranked, history: history, at: day(at))
                #expect(fast == plain, "scope \(scope), \(transactions.count) transactions")
                if plain.considered.filter({ $0.rank != nil }).count >= 2 { contested += 1 }
                if plain.considered.filter({ !$0.verdict.eligible }).count >= 2 { ineligible += 1 }
            }
        }
        return (contested, ineligible)
    }

    @Test("random catalogs: same decisions with and without the precomputed ranking")
    func randomCatalogs() throws {
        var rng = SplitMix64(state: 0xC0FF_EE)
        var contested = 0
        var ineligible = 0
        for _ in 0..<40 {
            var offers: [Offer] = []
            for product in ["monthly", "yearly", "weekly", "pro"] {
                for _ in 0..<Int(rng.next() % 8) {
                    // ids in no particular relation to catalog order
                    offers.append(Self.randomOffer("o\(rng.next() % 1000)", product: product, rng: &rng))
                }
            }
            offers.shuffle(using: &rng)
            let counts = try Self.compare(F.catalog(offers))
            contested += counts.eligible
            ineligible += counts.ineligible
        }
        // The comparison only means something when orders were actually decided.
        #expect(contested > 200)
        #expect(ineligible > 200)
    }

    @Test("unvalidated catalogs: duplicate offer and product ids, offers of unknown products")
    func unvalidatedCatalogs() throws {
        var rng = SplitMix64(state: 99)
        for _ in 0..<20 {
            var offers: [Offer] = []
            for product in ["monthly", "yearly", "ghost"] {
                for _ in 0..<6 {
                    // few ids: many duplicates, some with different savings
                    offers.append(Self.randomOffer("d\(rng.next() % 4)", product: product, rng: &rng))
                }
            }
            // A second "monthly" with another price: its savings differ from the first one's.
            let cheaperMonthly = Product(
                id: "monthly", groupId: "g1", period: period("P1M"), price: usd("3.99"), level: 4)
            let catalog = Catalog(groups: F.groups, products: F.products + [cheaperMonthly], offers: offers)
            _ = try Self.compare(catalog)
        }
    }

    @Test("ranks follow type priority, then the larger saving, then the offer id")
    func ranks() {
        let catalog = F.catalog([
            F.introMonthly,  // saving 1.164333
            F.promoMonthly,  // saving 6
            Offer(
                id: "a-promo", type: .promotional, productId: "monthly", paymentMode: .payAsYouGo,
                period: period("P1M"), periodCount: 3, price: usd("2.99")),  // saving 6, smaller id
            F.winBack("wb", price: "4.99", count: 1),  // saving 0
            Offer(
                id: "ghost-offer", type: .promotional, productId: "ghost", paymentMode: .freeTrial,
                period: period("P1W")),
        ])
        let ranked = RankedCatalog(catalog)
        #expect((0..<5).map { ranked.rank(at: $0) } == [3, 2, 1, 0, nil])
        #expect(ranked.saving(at: 1)?.amount == 6)
        #expect(ranked.saving(at: 4) == nil)
        #expect(ranked.offerPositions(forProduct: "monthly") == [0, 1, 2, 3])
    }

    @Test("savings over a common denominator order exactly as the savings do; unusual periods fall back")
    func commonDenominatorKeys() {
        var rng = SplitMix64(state: 24)
        // Products of every period an App Store subscription has, and offers of every kind on each.
        let periods = ["P1W", "P1M", "P2M", "P3M", "P6M", "P1Y"]
        let products = periods.enumerated().map { i, p in
            Product(
                id: "p\(i)", groupId: "g1", period: period(p), price: usd(["0.99", "4.99", "19.99", "99.99"][i % 4]),
                level: i + 1)
        }
        var savings: [Saving?] = []
        var denominators: [Int] = []
        for product in products {
            for i in 0..<12 {
                let offer = Self.randomOffer("o\(i)", product: product.id, rng: &rng)
                savings.append(Saving(offer: offer, product: product))
                denominators.append(product.period.thirtiethsOfMonth)
            }
            savings.append(nil)  // an offer of an unknown product
            denominators.append(1)
        }
        let keys = RankedCatalog.commonDenominatorKeys(savings, denominators)
        #expect(keys != nil)
        var distinct = 0
        for i in savings.indices {
            for j in savings.indices {
                guard let a = savings[i], let b = savings[j], let ka = keys?[i], let kb = keys?[j] else { continue }
                #expect((a < b) == (ka < kb) && (a == b) == (ka == kb), "\(a) vs \(b)")
                if a != b { distinct += 1 }
            }
        }
        #expect(distinct > 1_000)
        // Periods of 13, 17, 19, 23, 29, 31 and 37 days: their common multiple is past 10^9.
        let odd = [13, 17, 19, 23, 29, 31, 37].map { days in
            Product(id: "d\(days)", groupId: "g1", period: period("P\(days)D"), price: usd("4.99"), level: 1)
        }
        let oddSavings = odd.map {
            Saving(
                offer: Offer(
                    id: "t", type: .introductory, productId: $0.id, paymentMode: .freeTrial, period: period("P3D")),
                product: $0)
        }
        #expect(RankedCatalog.commonDenominatorKeys(oddSavings, odd.map { $0.period.thirtiethsOfMonth }) == nil)
        #expect(RankedCatalog.commonDenominatorKeys(Array(oddSavings.prefix(3)), [13, 17, 19]) != nil)
    }
}
