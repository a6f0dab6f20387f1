import Foundation
import Testing

@testable import OfferDomain

@Suite("Customer history derived from transactions")
struct HistoryTests {
    typealias F = Fixture

    struct StateCase: Sendable, CustomTestStringConvertible {
        let name: String
        let transactions: [Transaction]
        let at: String
        let state: GroupState
        let autoRenew: Bool?
        let lapsedAt: String?
        var testDescription: String { name }
    }

    static let stateCases: [StateCase] = [
        StateCase(
            name: "no transactions", transactions: [], at: "2026-03-01", state: .never, autoRenew: nil,
            lapsedAt: nil),
        StateCase(
            name: "active mid-period", transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01")],
            at: "2026-02-15", state: .active, autoRenew: true, lapsedAt: nil),
        StateCase(
            name: "active at the purchase instant",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01")], at: "2026-02-01", state: .active,
            autoRenew: true, lapsedAt: nil),
        StateCase(
            name: "one second before expiry is active",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01", autoRenew: false)],
            at: "2026-02-28T23:59:59Z", state: .active, autoRenew: false, lapsedAt: nil),
        StateCase(
            name: "expiry exactly at `at` is expired",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01", autoRenew: false)], at: "2026-03-01",
            state: .expired, autoRenew: false, lapsedAt: "2026-03-01"),
        StateCase(
            name: "billing retry after expiry",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01", retry: true)], at: "2026-03-05",
            state: .billingRetry, autoRenew: true, lapsedAt: nil),
        StateCase(
            name: "grace period beats billing retry",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01", retry: true, grace: "2026-03-07")],
            at: "2026-03-05", state: .gracePeriod, autoRenew: true, lapsedAt: nil),
        StateCase(
            name: "grace period ended, still retrying",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01", retry: true, grace: "2026-03-07")],
            at: "2026-03-07", state: .billingRetry, autoRenew: true, lapsedAt: nil),
        StateCase(
            name: "grace ended, retry over: expired",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01", grace: "2026-03-07")],
            at: "2026-03-08", state: .expired, autoRenew: true, lapsedAt: "2026-03-01"),
        StateCase(
            name: "billing retry on its 60th day",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01", retry: true)], at: "2026-04-29T23:59:59Z",
            state: .billingRetry, autoRenew: true, lapsedAt: nil),
        StateCase(
            name: "a retry flag older than 60 days is stale: expired",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01", retry: true)], at: "2026-04-30",
            state: .expired, autoRenew: true, lapsedAt: "2026-03-01"),
        StateCase(
            name: "retry flag while unexpired is still active",
            transactions: [F.tx("t1", from: "2026-02-01", to: "2026-03-01", retry: true)], at: "2026-02-10",
            state: .active, autoRenew: true, lapsedAt: nil),
        StateCase(
            name: "revoked latest transaction",
            transactions: [
                F.tx("t1", from: "2026-01-01", to: "2026-02-01"),
                F.tx("t2", from: "2026-02-01", to: "2026-03-01", revoked: "2026-02-10"),
            ], at: "2026-02-15", state: .revoked, autoRenew: true, lapsedAt: "2026-02-10"),
        StateCase(
            name: "revocation after `at` is not yet known",
            transactions: [F.tx("t2", from: "2026-02-01", to: "2026-03-01", revoked: "2026-02-20")],
            at: "2026-02-15", state: .active, autoRenew: true, lapsedAt: nil),
        StateCase(
            name: "revoked earlier transaction, active newer one",
            transactions: [
                F.tx("t1", from: "2026-01-01", to: "2026-02-01", revoked: "2026-01-05"),
                F.tx("t2", "yearly", from: "2026-02-01", to: "2027-02-01", autoRenew: false),
            ], at: "2026-03-01", state: .active, autoRenew: false, lapsedAt: nil),
        StateCase(
            name: "expired on a sibling product, latest by purchase wins",
            transactions: [
                F.tx("t1", "yearly", from: "2025-01-01", to: "2026-01-01", autoRenew: false),
                F.tx("t2", from: "2026-01-01", to: "2026-02-01", autoRenew: false),
            ], at: "2026-05-01", state: .expired, autoRenew: false, lapsedAt: "2026-02-01"),
        StateCase(
            name: "future purchases are ignored",
            transactions: [F.tx("t1", from: "2026-06-01", to: "2026-07-01")], at: "2026-05-01", state: .never,
            autoRenew: nil, lapsedAt: nil),
    ]

    @Test("group state at an instant", arguments: stateCases)
    func state(_ c: StateCase) {
        let group = F.history(c.transactions, at: c.at).group("g1")
        #expect(group.state == c.state)
        #expect(group.autoRenew == c.autoRenew)
        #expect(group.lapsedAt == c.lapsedAt.map(day))
        #expect(group.state.isSubscribed == [.active, .billingRetry, .gracePeriod].contains(c.state))
        #expect(group.state.isLapsed == [.expired, .revoked].contains(c.state))
    }

    struct PaidCase: Sendable, CustomTestStringConvertible {
        let name: String
        let transactions: [Transaction]
        let at: String
        let paidMonths: Int
        var testDescription: String { name }
    }

    static let paidCases: [PaidCase] = [
        PaidCase(
            name: "twelve contiguous monthly renewals",
            transactions: (0..<12).map { i in
                F.tx(
                    "m\(i)", from: String(format: "2025-%02d-10", i + 1),
                    to: i == 11 ? "2026-01-10" : String(format: "2025-%02d-10", i + 2))
            }, at: "2026-06-01", paidMonths: 12),
        PaidCase(
            name: "one day short of a month", transactions: [F.tx("t", from: "2026-01-10", to: "2026-02-09")],
            at: "2026-06-01", paidMonths: 0),
        PaidCase(
            name: "a free trial is not paid time (payment mode from the catalog)",
            transactions: [
                // The offer is looked up under the transaction's product (offers are named by product and id).
                F.tx(
                    "t0", "yearly", from: "2026-01-01", to: "2026-02-01", offer: .introductory, offerId: "intro-yearly"),
                F.tx("t1", from: "2026-02-01", to: "2026-04-01"),
            ], at: "2026-06-01", paidMonths: 2),
        PaidCase(
            name: "a free trial is not paid time (Apple's offerDiscountType)",
            transactions: [
                F.tx(
                    "t0", from: "2026-01-01", to: "2026-02-01", offer: .promotional, offerId: "unknown",
                    mode: .freeTrial),
                F.tx("t1", from: "2026-02-01", to: "2026-04-01"),
            ], at: "2026-06-01", paidMonths: 2),
        PaidCase(
            name: "a discounted (pay as you go) offer is paid time",
            transactions: [
                F.tx(
                    "t0", from: "2026-01-01", to: "2026-04-01", offer: .promotional,
                    offerId: "promo-monthly")
            ], at: "2026-06-01", paidMonths: 3),
        PaidCase(
            name: "an unknown offer id counts as paid",
            transactions: [F.tx("t0", from: "2026-01-01", to: "2026-04-01", offer: .promotional, offerId: "gone")],
            at: "2026-06-01", paidMonths: 3),
        PaidCase(
            name: "overlaps count once (upgrade to a sibling)",
            transactions: [
                F.tx("a", from: "2026-01-01", to: "2026-03-01"),
                F.tx("b", "yearly", from: "2026-02-01", to: "2026-05-01"),
            ], at: "2026-06-01", paidMonths: 4),
        PaidCase(
            name: "gaps split the tenure; each stretch rounds down",
            transactions: [
                F.tx("a", from: "2026-01-01", to: "2026-02-20"),
                F.tx("b", from: "2026-03-01", to: "2026-04-20"),
            ], at: "2026-06-01", paidMonths: 2),
        PaidCase(
            name: "revocation cuts the paid time",
            transactions: [F.tx("a", "yearly", from: "2025-01-01", to: "2026-01-01", revoked: "2025-04-15")],
            at: "2026-06-01", paidMonths: 3),
        PaidCase(
            name: "revoked at purchase counts zero",
            transactions: [F.tx("a", "yearly", from: "2025-01-01", to: "2026-01-01", revoked: "2025-01-01")],
            at: "2026-06-01", paidMonths: 0),
        PaidCase(
            name: "revoked before purchase counts zero",
            transactions: [F.tx("a", "yearly", from: "2025-01-01", to: "2026-01-01", revoked: "2024-12-01")],
            at: "2026-06-01", paidMonths: 0),
        PaidCase(
            name: "active subscription counts only elapsed time",
            transactions: [F.tx("a", "yearly", from: "2026-01-01", to: "2027-01-01")], at: "2026-06-01",
            paidMonths: 5),
        PaidCase(
            name: "other groups don't count",
            transactions: [F.tx("a", "pro", from: "2025-01-01", to: "2026-01-01")], at: "2026-06-01",
            paidMonths: 0),
    ]

    @Test("paid months", arguments: paidCases)
    func paid(_ c: PaidCase) {
        #expect(F.history(c.transactions, at: c.at).group("g1").paidMonths == c.paidMonths)
    }

    @Test("an intro offer used on a sibling product counts for the whole group")
    func introOnSibling() {
        let history = F.history(
            [F.tx("t", "yearly", from: "2026-01-01", to: "2026-01-08", offer: .introductory, offerId: "intro-yearly")],
            at: "2026-03-01")
        #expect(history.group("g1").introOfferUsed)
        #expect(!history.group("g2").introOfferUsed)
        #expect(history.group("g2").state == .never)
    }

    @Test("win-back redemptions: consecutive renewals of one offer are one redemption")
    func winBackRedemptions() {
        let transactions = [
            F.tx("a", from: "2025-01-01", to: "2025-02-01", offer: .winBack, offerId: "wb-monthly"),
            F.tx("b", from: "2025-02-01", to: "2025-03-01", offer: .winBack, offerId: "wb-monthly"),
            F.tx("c", from: "2025-03-01", to: "2025-04-01"),
            F.tx("d", from: "2025-09-01", to: "2025-10-01", offer: .winBack, offerId: "wb-monthly"),
            F.tx("e", from: "2025-10-01", to: "2025-11-01", offer: .winBack, offerId: "wb-other"),
            F.tx("f", from: "2025-12-01", to: "2026-01-01", offer: .winBack, offerId: nil),
        ]
        let group = F.history(transactions, at: "2026-06-01").group("g1")
        #expect(
            group.winBackRedemptions == [
                WinBackRedemption(offerId: "wb-monthly", startedAt: day("2025-01-01"), endedAt: day("2025-03-01")),
                WinBackRedemption(offerId: "wb-monthly", startedAt: day("2025-09-01"), endedAt: day("2025-10-01")),
                WinBackRedemption(offerId: "wb-other", startedAt: day("2025-10-01"), endedAt: day("2025-11-01")),
            ])
        #expect(group.lastRedemptionEnd(ofOffer: "wb-monthly") == day("2025-10-01"))
        #expect(group.lastRedemptionEnd(ofOffer: "nope") == nil)
        #expect(group.firstPurchaseDate == day("2025-01-01"))
        #expect(group.lastExpiresDate == day("2026-01-01"))
    }

    @Test("unknown products are reported and ignored; unknown groups read as never")
    func unknownProducts() {
        let history = F.history(
            [
                F.tx("z2", "ghost", from: "2026-01-01", to: "2026-02-01"),
                F.tx("z1", "ghost", from: "2026-01-01", to: "2026-02-01"),
            ], at: "2026-03-01")
        #expect(history.ignoredTransactionIds == ["z1", "z2"])
        #expect(history.group("g1").state == .never)
        #expect(history.group("nope") == GroupHistory.never(groupId: "nope"))
        #expect(history.groups.keys.sorted() == ["g1", "g2"])
        #expect(history.at == day("2026-03-01"))
    }

    @Test("the active product is the one currently covering the instant")
    func activeProduct() {
        let group = F.history(
            [
                F.tx("a", from: "2026-01-01", to: "2026-03-01"),
                F.tx("b", "yearly", from: "2026-02-15", to: "2027-02-15"),
            ],
            at: "2026-02-20"
        ).group("g1")
        #expect(group.activeProductId == "yearly")
        #expect(group.state == .active)
    }

    @Test(
        "promotional segments",
        arguments: [
            (GroupState.never, Bool?.none, PromotionalAudience?.none),
            (.active, true, .active), (.active, false, .atRisk), (.billingRetry, true, .billingRetry),
            (.gracePeriod, true, .billingRetry), (.expired, false, .lapsed), (.revoked, true, .lapsed),
        ])
    func segments(state: GroupState, autoRenew: Bool?, segment: PromotionalAudience?) {
        var group = GroupHistory.never(groupId: "g1")
        group.state = state
        group.autoRenew = autoRenew
        #expect(group.segment == segment)
    }

    @Test("the latest transaction: by purchase date, then expiry, then transaction id")
    func latestTieBreaks() {
        // Same purchase instant (an upgrade): the later expiry carries the renewal state.
        let upgrade = F.history(
            [
                F.tx("b", "yearly", from: "2026-01-01", to: "2026-03-01", autoRenew: true),
                F.tx("a", from: "2026-01-01", to: "2026-02-01", autoRenew: false),
            ], at: "2026-04-01"
        ).group("g1")
        #expect(upgrade.autoRenew == true)
        #expect(upgrade.lapsedAt == day("2026-03-01"))
        // Same purchase and expiry: the larger transaction id is the latest, whatever the input order.
        for order in [["x", "y"], ["y", "x"]] {
            let group = F.history(
                order.map { F.tx($0, from: "2026-01-01", to: "2026-02-01", autoRenew: $0 == "y") }, at: "2026-04-01"
            ).group("g1")
            #expect(group.autoRenew == true)
        }
    }

    @Test("transactions default their original id and encode as JSON")
    func transactionDefaults() throws {
        let t = F.tx("t1", from: "2026-01-01", to: "2026-02-01")
        #expect(t.originalTransactionId == "t1")
        #expect(!t.isRevoked(at: day("2030-01-01")))
        #expect(t.effectiveEnd(at: day("2030-01-01")) == day("2026-02-01"))
        let decoded = try JSONDecoder().decode(Transaction.self, from: JSONEncoder().encode(t))
        #expect(decoded == t)
    }

    @Test("a history does not depend on the order or grouping its transactions arrive in")
    func orderAndGroupingDoNotMatter() {
        // derive takes shortcuts for the usual input (all in one group, all bought by `at`, already in order): the
        // same transactions shuffled, or with a transaction of an unknown product beside them (which turns the
        // shortcuts off), must give the same groups.
        var random = SplitMix64(state: 15)
        let products = ["monthly", "yearly", "weekly", "pro"]
        let start = day("2025-01-01")
        for round in 0..<300 {
            let count = Int.random(in: 1...6, using: &random)
            let oneGroup = round % 2 == 0
            let transactions = (0..<count).map { i -> Transaction in
                let bought = start.addingTimeInterval(Double(Int.random(in: 0...500, using: &random)) * 86_400)
                let days = [7, 30, 31, 365][Int.random(in: 0...3, using: &random)]
                return Transaction(
                    transactionId: "t\(round)-\(i)",
                    productId: oneGroup
                        ? products[Int.random(in: 0...2, using: &random)] : products.randomElement(using: &random)!,
                    purchaseDate: bought, expiresDate: bought.addingTimeInterval(Double(days) * 86_400),
                    offerType: Bool.random(using: &random) ? .introductory : nil,
                    autoRenew: Bool.random(using: &random), inBillingRetry: Int.random(in: 0...5, using: &random) == 0)
            }
            let at = start.addingTimeInterval(Double(Int.random(in: 0...700, using: &random)) * 86_400)
            let catalog = F.standard
            let inOrder = CustomerHistory.derive(
                transactions: transactions.sorted {
                    ($0.purchaseDate, $0.expiresDate) < ($1.purchaseDate, $1.expiresDate)
                },
                catalog: catalog, at: at)
            let shuffled = CustomerHistory.derive(
                transactions: transactions.shuffled(using: &random), catalog: catalog, at: at)
            let ghost = F.tx("ghost-\(round)", "ghost", from: "2025-01-01", to: "2025-02-01")
            let withGhost = CustomerHistory.derive(
                transactions: transactions + [ghost], catalog: catalog, at: at)
            #expect(shuffled.groups == inOrder.groups, "round \(round)")
            #expect(withGhost.groups == inOrder.groups, "round \(round)")
            #expect(withGhost.ignoredTransactionIds == (at >= ghost.purchaseDate ? [ghost.transactionId] : []))
            #expect(inOrder.ignoredTransactionIds.isEmpty)
        }
    }
}
