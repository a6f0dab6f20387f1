import Foundation
import OfferDomain

/// `offer-bench best [--seconds S] [--plain | --rank | --compare]`: the pure rules of one `offers.best` call (history
/// derivation, eligibility, ranking over a 20-product × 10-offer group, display copy) in a loop, to see the domain's
/// share of B4. By default on a `RankedCatalog` built once, as the gateway does; `--plain` ranks on the bare catalog;
/// `--rank` builds the `RankedCatalog` itself in the loop instead (what every catalog load costs); `--compare`
/// compares two equal results decided apart (what the gateway's table of shared answers pays for a match).
enum DomainBenchmark {
    static func main(_ arguments: [String]) -> Int32 {
        var seconds = 3.0
        if let index = arguments.firstIndex(of: "--seconds"), index + 1 < arguments.count,
            let value = Double(arguments[index + 1])
        {
            seconds = value
        }
        do {
            let (catalog, histories) = try fixture()
            if arguments.contains("--rank") { return rankings(of: catalog, seconds: seconds) }
            if arguments.contains("--compare") { return try comparisons(catalog, histories, seconds: seconds) }
            let ranked = arguments.contains("--plain") ? nil : RankedCatalog(catalog)
            let at = Date(timeIntervalSince1970: 1_795_089_600)
            let locale = Locale(identifier: "en_US")
            var count = 0
            var winners = 0
            let elapsed = try repeated(for: seconds) {
                for transactions in histories {
                    let history = CustomerHistory.derive(transactions: transactions, catalog: catalog, at: at)
                    let result =
                        if let ranked {
                            try BestOffer.choose(scope: .product("p0"), ranked: ranked, history: history, at: at)
                        } else {
                            try BestOffer.choose(scope: .product("p0"), catalog: catalog, history: history, at: at)
                        }
                    if let winner = result.winner {
                        winners +=
                            DisplayText.make(offer: winner.offer, product: winner.product, locale: locale).count > 0
                            ? 1 : 0
                    }
                    count += 1
                }
            }
            let perSecond = Double(count) / elapsed
            print("best decisions/s: \(Int(perSecond)) (\(winners) with a winner of \(count))")
            return 0
        } catch {
            FileHandle.standardError.write(Data("offer-bench best: \(error)\n".utf8))
            return 1
        }
    }

    /// `RankedCatalog` builds of `catalog` for `seconds`: how many per second, and µs each.
    static func rankings(of catalog: Catalog, seconds: Double) -> Int32 {
        var count = 0
        var offers = 0
        let elapsed = repeated(for: seconds) {
            offers += RankedCatalog(catalog).catalog.offers.count
            count += 1
        }
        print(
            "catalog rankings/s: \(Int(Double(count) / elapsed)) (\(Int(elapsed / Double(count) * 1e6)) µs each, \(offers / max(count, 1)) offers)"
        )
        return 0
    }

    /// `==` between the results of two customers with the same history, decided apart, for `seconds`.
    static func comparisons(_ catalog: Catalog, _ histories: [[Transaction]], seconds: Double) throws -> Int32 {
        let ranked = RankedCatalog(catalog)
        let at = Date(timeIntervalSince1970: 1_795_089_600)
        let pairs = try histories.map { transactions in
            try (0..<2).map { _ in
                try BestOffer.choose(
                    scope: .product("p0"), ranked: ranked,
                    history: CustomerHistory.derive(transactions: transactions, catalog: catalog, at: at), at: at)
            }
        }
        var count = 0
        var equal = 0
        let elapsed = repeated(for: seconds) {
            for pair in pairs {
                if pair[0] == pair[1] { equal += 1 }
                count += 1
            }
        }
        let each = Int(elapsed / Double(count) * 1e9)
        print("result comparisons/s: \(Int(Double(count) / elapsed)) (\(each) ns each, \(equal) equal of \(count))")
        return equal == count ? 0 : 1
    }

    /// Runs `body` again and again for `seconds`; the seconds it took.
    static func repeated(for seconds: Double, _ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline { try body() }
        return (ContinuousClock.now - start) / .seconds(1)
    }

    /// 20 products × 10 offers in one group, and customers in each state (new, active, lapsed, retry).
    static func fixture() throws -> (Catalog, [[Transaction]]) {
        let month = try SubscriptionPeriod.parse("P1M")
        var products: [Product] = []
        var offers: [Offer] = []
        for p in 0..<20 {
            products.append(
                Product(
                    id: "p\(p)", groupId: "g", period: month, price: try Money("9.99", currency: "USD"), level: p + 1))
            offers.append(
                Offer(
                    id: "p\(p).intro", type: .introductory, productId: "p\(p)", paymentMode: .freeTrial,
                    period: try SubscriptionPeriod.parse("P1W")))
            for o in 0..<6 {
                offers.append(
                    Offer(
                        id: "p\(p).promo\(o)", type: .promotional, productId: "p\(p)", paymentMode: .payAsYouGo,
                        period: month, periodCount: o + 1, price: try Money("4.99", currency: "USD"),
                        audience: [.atRisk, .lapsed, .billingRetry, .active]))
            }
            for o in 0..<3 {
                offers.append(
                    Offer(
                        id: "p\(p).wb\(o)", type: .winBack, productId: "p\(p)", paymentMode: .payUpFront,
                        period: try SubscriptionPeriod.parse("P3M"), price: try Money("9.99", currency: "USD"),
                        winBack: WinBackParameters(
                            minPaidMonths: o, monthsSinceLapse: .init(min: 1, max: 24), waitBetweenOffersMonths: 3)))
            }
        }
        let catalog = Catalog(groups: [SubscriptionGroup(id: "g", name: "G")], products: products, offers: offers)
        let day = 86_400.0
        let at = 1_795_089_600.0
        func tx(_ id: String, start: Double, end: Double, autoRenew: Bool = true, retry: Bool = false) -> Transaction {
            Transaction(
                transactionId: id, productId: "p0", purchaseDate: Date(timeIntervalSince1970: start),
                expiresDate: Date(timeIntervalSince1970: end), autoRenew: autoRenew, inBillingRetry: retry)
        }
        let histories: [[Transaction]] = [
            [],
            (0..<12).map {
                tx("a\($0)", start: at - Double(12 - $0) * 30 * day, end: at - Double(11 - $0) * 30 * day + day)
            },
            (0..<6).map {
                tx(
                    "l\($0)", start: at - Double(10 - $0) * 30 * day, end: at - Double(9 - $0) * 30 * day,
                    autoRenew: false)
            },
            [tx("r0", start: at - 40 * day, end: at - 10 * day, retry: true)],
        ]
        return (catalog, histories)
    }
}
