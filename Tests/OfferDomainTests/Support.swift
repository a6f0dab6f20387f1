import Foundation
import Testing

@testable import OfferDomain

/// `2026-01-31` or `2026-01-31T12:00:00Z` as a UTC instant. Test inputs are literals; a typo fails the test.
func day(_ text: String) -> Date {
    let full = text.count == 10 ? text + "T00:00:00Z" : text
    do {
        return try Date(full, strategy: .iso8601)
    } catch {
        Issue.record("bad test date \(text)")
        return Date(timeIntervalSince1970: 0)
    }
}

func usd(_ text: String) -> Money { money(text, "USD") }

func money(_ text: String, _ currency: String) -> Money {
    do {
        return try Money(text, currency: currency)
    } catch {
        Issue.record("bad test money \(text)")
        return .zero(currency)
    }
}

func period(_ text: String) -> SubscriptionPeriod {
    guard let value = SubscriptionPeriod(iso8601: text) else {
        Issue.record("bad test period \(text)")
        return SubscriptionPeriod(iso8601: "P1M")!  // a constant literal
    }
    return value
}

/// A deterministic generator (SplitMix64) so generated codes are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The shared fixture: group `g1` (monthly $4.99 P1M level 2, yearly $19.99 P1Y level 1, weekly $1.99 P1W) and
/// group `g2` (pro $9.99 P1M).
enum Fixture {
    static let groups = [SubscriptionGroup(id: "g1", name: "Premium"), SubscriptionGroup(id: "g2", name: "Pro")]
    static let monthly = Product(id: "monthly", groupId: "g1", period: period("P1M"), price: usd("4.99"), level: 2)
    static let yearly = Product(id: "yearly", groupId: "g1", period: period("P1Y"), price: usd("19.99"), level: 1)
    static let weekly = Product(id: "weekly", groupId: "g1", period: period("P1W"), price: usd("1.99"), level: 3)
    static let pro = Product(id: "pro", groupId: "g2", period: period("P1M"), price: usd("9.99"), level: 1)
    static let products = [monthly, yearly, weekly, pro]

    static func winBack(
        _ id: String, product: String = "monthly", minPaid: Int = 0, lapse: (Int, Int) = (0, 24), wait: Int? = nil,
        mode: PaymentMode = .payAsYouGo, price: String? = "1.99", count: Int = 3
    ) -> Offer {
        Offer(
            id: id, type: .winBack, productId: product, paymentMode: mode, period: period("P1M"),
            periodCount: count, price: price.map(usd),
            winBack: WinBackParameters(
                minPaidMonths: minPaid, monthsSinceLapse: .init(min: lapse.0, max: lapse.1),
                waitBetweenOffersMonths: wait))
    }

    static let introMonthly = Offer(
        id: "intro-monthly", type: .introductory, productId: "monthly", paymentMode: .freeTrial, period: period("P1W"))
    static let introYearly = Offer(
        id: "intro-yearly", type: .introductory, productId: "yearly", paymentMode: .freeTrial, period: period("P1M"))
    static let promoMonthly = Offer(
        id: "promo-monthly", type: .promotional, productId: "monthly", paymentMode: .payAsYouGo,
        period: period("P1M"), periodCount: 3, price: usd("2.99"))
    static let codeMonthly = Offer(
        id: "code-monthly", type: .code, productId: "monthly", paymentMode: .freeTrial, period: period("P1M"))

    static func catalog(_ offers: [Offer]) -> Catalog {
        Catalog(groups: groups, products: products, offers: offers)
    }

    static let standard = catalog([introMonthly, introYearly, promoMonthly, codeMonthly, winBack("wb-monthly")])

    static func tx(
        _ id: String, _ product: String = "monthly", from: String, to: String, offer: OfferType? = nil,
        offerId: String? = nil, mode: PaymentMode? = nil, autoRenew: Bool = true, retry: Bool = false,
        grace: String? = nil, revoked: String? = nil
    ) -> Transaction {
        Transaction(
            transactionId: id, productId: product, purchaseDate: day(from), expiresDate: day(to), offerType: offer,
            offerId: offerId, offerPaymentMode: mode, autoRenew: autoRenew, inBillingRetry: retry,
            gracePeriodExpiresDate: grace.map(day), revocationDate: revoked.map(day))
    }

    static func history(_ transactions: [Transaction], at: String, catalog: Catalog = standard) -> CustomerHistory {
        CustomerHistory.derive(transactions: transactions, catalog: catalog, at: day(at))
    }
}
