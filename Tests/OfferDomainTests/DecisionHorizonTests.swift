import Foundation
import Testing

@testable import OfferDomain

@Suite("Decision horizon")
struct DecisionHorizonTests {
    typealias F = Fixture

    @Test func noTransactionsAndNoDatedOffersNeverChange() {
        #expect(DecisionHorizon.next(after: day("2026-03-01"), transactions: [], catalog: F.standard) == nil)
    }

    @Test func theNearestInstantOfAnyInputWins() {
        let at = day("2026-03-10")
        let offer = Offer(
            id: "spring", type: .promotional, productId: "monthly", paymentMode: .payAsYouGo, period: period("P1M"),
            price: usd("0.99"), startsAt: day("2026-03-20"), endsAt: day("2026-04-01"))
        let catalog = F.catalog([F.promoMonthly, offer])
        #expect(DecisionHorizon.next(after: at, transactions: [], catalog: catalog) == day("2026-03-20"))
        // Active since Feb 15: a paid month completes on Mar 15, before the offer opens.
        let active = F.tx("t1", from: "2026-02-15", to: "2026-04-15")
        #expect(DecisionHorizon.next(after: at, transactions: [active], catalog: catalog) == day("2026-03-15"))
        // A purchase recorded for later becomes visible at its purchase date.
        let later = F.tx("t2", from: "2026-03-12", to: "2026-04-12")
        #expect(DecisionHorizon.next(after: at, transactions: [later], catalog: catalog) == day("2026-03-12"))
        // Expired Jan 31 with billing retry: the retry window closes 60 days after expiry (Apr 1), but the
        // months-since-lapse count steps first, on Mar 31 (Jan 31 + 2 months).
        let retry = F.tx("t3", from: "2025-12-31", to: "2026-01-31", retry: true)
        #expect(DecisionHorizon.next(after: at, transactions: [retry], catalog: F.standard) == day("2026-03-31"))
        let grace = F.tx("t4", from: "2026-02-01", to: "2026-03-01", grace: "2026-03-11")
        #expect(DecisionHorizon.next(after: at, transactions: [grace], catalog: F.standard) == day("2026-03-11"))
    }

    @Test func anInstantExactlyAtTheDecisionTimeIsAlreadyPast() {
        let at = day("2026-03-15")
        let expiring = F.tx("t1", from: "2026-02-15", to: "2026-03-15")
        // The expiry is at `at` (already expired); next: a month after Feb 15 + 1 month, i.e. Apr 15.
        #expect(DecisionHorizon.next(after: at, transactions: [expiring], catalog: F.standard) == day("2026-04-15"))
    }

    /// The property that makes memoised decisions exact: for random histories, catalogs and decision times, the
    /// histories and best offers (every product and group scope) are the same at every instant before the
    /// horizon, including the last millisecond before it. Seconds of CPU in all: each case yields the test process's
    /// cooperative pool (a thread per core), so other tests' awaits are not queued behind the whole loop.
    @Test func decisionsHoldUntilTheHorizon() async throws {
        var rng = SplitMix64(state: 0x0FFE_46A7E)
        var changedAtHorizon = 0
        let cases = 3_000
        for _ in 0..<cases {
            await Task.yield()
            let catalog = Self.randomCatalog(&rng)
            let transactions = Self.randomTransactions(&rng)
            let at = Self.randomInstant(&rng)
            let horizon = DecisionHorizon.next(after: at, transactions: transactions, catalog: catalog)
            let end = horizon ?? at.addingTimeInterval(20 * 365 * 86_400)
            #expect(end > at)
            let base = try Self.decisions(transactions, catalog, at)
            var probes = [end.addingTimeInterval(-0.001)]
            for _ in 0..<3 {
                probes.append(at.addingTimeInterval(Double.random(in: 0..<1, using: &rng) * end.timeIntervalSince(at)))
            }
            for probe in probes where probe >= at {
                if try Self.decisions(transactions, catalog, probe) != base {
                    Issue.record("decision changed before the horizon: at \(at), probe \(probe), horizon \(end)")
                    return
                }
            }
            if let horizon, try Self.decisions(transactions, catalog, horizon) != base { changedAtHorizon += 1 }
        }
        // Not vacuous: the horizon is often exactly where something changes.
        #expect(changedAtHorizon > cases / 4, "only \(changedAtHorizon) of \(cases) decisions changed at the horizon")
    }

    struct Decisions: Equatable {
        var groups: [String: GroupHistory]
        var best: [BestOfferResult]
    }

    static func decisions(_ transactions: [Transaction], _ catalog: Catalog, _ at: Date) throws -> Decisions {
        let history = CustomerHistory.derive(transactions: transactions, catalog: catalog, at: at)
        var best: [BestOfferResult] = []
        for product in catalog.products {
            best.append(try BestOffer.choose(scope: .product(product.id), catalog: catalog, history: history, at: at))
        }
        for group in catalog.groups {
            best.append(try BestOffer.choose(scope: .group(group.id), catalog: catalog, history: history, at: at))
        }
        return Decisions(groups: history.groups, best: best)
    }

    static let epoch = day("2025-01-01")

    static func randomInstant(_ rng: inout SplitMix64) -> Date {
        // Within three years, on whole hours half of the time (so instants coincide with month steps).
        let hours = Double(Int.random(in: 0..<(3 * 365 * 24), using: &rng))
        let jitter = Bool.random(using: &rng) ? 0 : Double.random(in: 0..<3_600, using: &rng)
        return epoch.addingTimeInterval(hours * 3_600 + jitter)
    }

    static func randomCatalog(_ rng: inout SplitMix64) -> Catalog {
        var offers: [Offer] = [F.introMonthly, F.introYearly, F.codeMonthly]
        for index in 0..<Int.random(in: 1...4, using: &rng) {
            var promo = Offer(
                id: "promo-\(index)", type: .promotional,
                productId: ["monthly", "yearly", "pro"].randomElement(using: &rng)!,
                paymentMode: .payAsYouGo, period: period("P1M"), periodCount: Int.random(in: 1...3, using: &rng),
                price: usd(["0.99", "1.99", "2.99"].randomElement(using: &rng)!),
                audience: Bool.random(using: &rng) ? nil : [.lapsed, .atRisk])
            if Bool.random(using: &rng) { promo.startsAt = randomInstant(&rng) }
            if Bool.random(using: &rng) { promo.endsAt = randomInstant(&rng) }
            offers.append(promo)
        }
        for index in 0..<Int.random(in: 1...3, using: &rng) {
            let low = Int.random(in: 0...3, using: &rng)
            offers.append(
                F.winBack(
                    "wb-\(index)", product: ["monthly", "yearly"].randomElement(using: &rng)!,
                    minPaid: Int.random(in: 0...4, using: &rng), lapse: (low, low + Int.random(in: 0...6, using: &rng)),
                    wait: Bool.random(using: &rng) ? nil : Int.random(in: 1...3, using: &rng)))
        }
        return F.catalog(offers)
    }

    static func randomTransactions(_ rng: inout SplitMix64) -> [Transaction] {
        var result: [Transaction] = []
        for index in 0..<Int.random(in: 0...4, using: &rng) {
            let start = randomInstant(&rng)
            let product = ["monthly", "yearly", "weekly", "pro"].randomElement(using: &rng)!
            let length = Double(Int.random(in: 1...400, using: &rng)) * 86_400
            let end = start.addingTimeInterval(length)
            let offerType: OfferType? = [nil, nil, .introductory, .winBack, .promotional].randomElement(using: &rng)!
            let offerId: String? =
                switch offerType {
                case .winBack: "wb-\(Int.random(in: 0...2, using: &rng))"
                case .introductory: "intro-monthly"
                case .promotional: "promo-0"
                default: nil
                }
            result.append(
                Transaction(
                    transactionId: "t\(index)", productId: product, purchaseDate: start, expiresDate: end,
                    offerType: offerType, offerId: offerId, autoRenew: Bool.random(using: &rng),
                    inBillingRetry: Int.random(in: 0..<4, using: &rng) == 0,
                    gracePeriodExpiresDate: Int.random(in: 0..<4, using: &rng) == 0
                        ? end.addingTimeInterval(Double(Int.random(in: 1...16, using: &rng)) * 86_400) : nil,
                    revocationDate: Int.random(in: 0..<6, using: &rng) == 0
                        ? start.addingTimeInterval(length * Double.random(in: 0...1.2, using: &rng)) : nil))
        }
        return result
    }
}
