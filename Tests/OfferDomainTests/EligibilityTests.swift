import Foundation
import Testing

@testable import OfferDomain

@Suite("Eligibility rules")
struct EligibilityTests {
    typealias F = Fixture

    static func group(
        _ state: GroupState, autoRenew: Bool? = false, paid: Int = 12, lapsedAt: String? = nil, intro: Bool = false,
        redemptions: [WinBackRedemption] = []
    ) -> GroupHistory {
        GroupHistory(
            groupId: "g1", state: state, autoRenew: state == .never ? nil : autoRenew, activeProductId: nil,
            firstPurchaseDate: nil, lastExpiresDate: nil, lapsedAt: lapsedAt.map(day), paidMonths: paid,
            introOfferUsed: intro, winBackRedemptions: redemptions)
    }

    // MARK: Introductory

    @Test(
        "introductory: only for customers new to the group",
        arguments: [
            (GroupState.never, false, [ReasonCode]()),
            (.never, true, [.introAlreadyUsed]),
            (.active, false, [.currentlySubscribed]),
            (.active, true, [.currentlySubscribed, .introAlreadyUsed]),
            (.billingRetry, false, [.previouslySubscribed]),
            (.gracePeriod, false, [.previouslySubscribed]),
            (.expired, false, [.previouslySubscribed]),
            (.expired, true, [.previouslySubscribed, .introAlreadyUsed]),
            (.revoked, false, [.previouslySubscribed]),
        ])
    func introductory(state: GroupState, introUsed: Bool, reasons: [ReasonCode]) {
        let verdict = Eligibility.evaluate(
            offer: F.introMonthly, history: Self.group(state, lapsedAt: "2026-01-01", intro: introUsed),
            at: day("2026-06-01"))
        #expect(verdict.reasons == reasons)
        #expect(verdict.eligible == reasons.isEmpty)
        #expect(verdict.offerId == "intro-monthly")
        #expect(verdict.type == .introductory)
        #expect(verdict.productId == "monthly")
    }

    @Test("an intro used on a sibling product blocks this product's intro (from transactions)")
    func introSibling() throws {
        let history = F.history(
            [
                F.tx(
                    "t", "yearly", from: "2026-01-01", to: "2026-02-01", offer: .introductory, offerId: "intro-yearly",
                    autoRenew: false)
            ], at: "2026-06-01")
        let verdicts = try Eligibility.evaluate(
            productId: "monthly", catalog: F.standard, history: history, at: day("2026-06-01"))
        let intro = try #require(verdicts.first { $0.offerId == "intro-monthly" })
        #expect(intro.reasons == [.previouslySubscribed, .introAlreadyUsed])
    }

    // MARK: Promotional

    static let customAudience = Offer(
        id: "promo-active", type: .promotional, productId: "monthly", paymentMode: .payUpFront,
        period: period("P1M"), price: usd("1.99"), audience: [.active, .atRisk])

    @Test(
        "promotional: default audience is at risk, billing retry, lapsed",
        arguments: [
            (GroupState.never, Bool?.none, [ReasonCode.noHistory]),
            (.active, true, [.notInAudience]),
            (.active, false, []),
            (.billingRetry, true, []),
            (.gracePeriod, true, []),
            (.expired, false, []),
            (.expired, true, []),
            (.revoked, false, []),
        ])
    func promotionalDefault(state: GroupState, autoRenew: Bool?, reasons: [ReasonCode]) {
        let verdict = Eligibility.evaluate(
            offer: F.promoMonthly, history: Self.group(state, autoRenew: autoRenew), at: day("2026-06-01"))
        #expect(verdict.reasons == reasons)
    }

    @Test(
        "promotional: a custom audience widens or narrows",
        arguments: [
            (GroupState.never, Bool?.none, [ReasonCode.noHistory]),
            (.active, true, []),
            (.active, false, []),
            (.billingRetry, true, [.notInAudience]),
            (.gracePeriod, true, [.notInAudience]),
            (.expired, false, [.notInAudience]),
            (.revoked, false, [.notInAudience]),
        ])
    func promotionalCustom(state: GroupState, autoRenew: Bool?, reasons: [ReasonCode]) {
        let verdict = Eligibility.evaluate(
            offer: Self.customAudience, history: Self.group(state, autoRenew: autoRenew), at: day("2026-06-01"))
        #expect(verdict.reasons == reasons)
    }

    // MARK: Win-back

    static let winBack = F.winBack("wb", minPaid: 6, lapse: (2, 6), wait: 3)

    @Test(
        "win-back: never for a current subscriber or a stranger",
        arguments: [
            (GroupState.never, [ReasonCode.noHistory]),
            (.active, [.notLapsed, .currentlySubscribed]),
            (.billingRetry, [.notLapsed, .inBillingRetry]),
            (.gracePeriod, [.notLapsed, .inGracePeriod]),
        ])
    func winBackStates(state: GroupState, reasons: [ReasonCode]) {
        let verdict = Eligibility.evaluate(offer: Self.winBack, history: Self.group(state), at: day("2026-06-01"))
        #expect(verdict.reasons == reasons)
    }

    @Test(
        "win-back: each parameter at and beside its limit",
        arguments: [
            // paid months vs minPaidMonths 6 (lapse 3 months ago, inside 2...6)
            (6, "2026-01-01", "2026-04-01", false, [ReasonCode]()),
            (5, "2026-01-01", "2026-04-01", false, [.paidTooShort]),
            (7, "2026-01-01", "2026-04-01", false, []),
            // months since lapse vs 2...6
            (12, "2026-01-01", "2026-02-28T23:59:59Z", false, [.lapsedTooRecently]),
            (12, "2026-01-01", "2026-03-01", false, []),
            (12, "2026-01-01", "2026-07-31T23:59:59Z", false, []),
            (12, "2026-01-01", "2026-08-01", false, [.lapsedTooLongAgo]),
            // several failures at once
            (1, "2026-01-01", "2026-01-15", false, [.paidTooShort, .lapsedTooRecently]),
            // auto-renew still on after expiry
            (12, "2026-01-01", "2026-04-01", true, [.autoRenewOn]),
        ])
    func winBackParameters(paid: Int, lapsedAt: String, at: String, autoRenew: Bool, reasons: [ReasonCode]) {
        let history = Self.group(.expired, autoRenew: autoRenew, paid: paid, lapsedAt: lapsedAt)
        #expect(Eligibility.evaluate(offer: Self.winBack, history: history, at: day(at)).reasons == reasons)
    }

    @Test(
        "win-back: months since lapse at month ends and in leap years (min 1)",
        arguments: [
            ("2026-01-31", "2026-02-27", false), ("2026-01-31", "2026-02-28", true),
            ("2028-01-31", "2028-02-28", false), ("2028-01-31", "2028-02-29", true),
            ("2026-03-31", "2026-04-29", false), ("2026-03-31", "2026-04-30", true),
        ])
    func lapseMonthEnds(lapsedAt: String, at: String, eligible: Bool) {
        let offer = F.winBack("wb", lapse: (1, 12))
        let history = Self.group(.expired, lapsedAt: lapsedAt)
        let verdict = Eligibility.evaluate(offer: offer, history: history, at: day(at))
        #expect(verdict.eligible == eligible)
        #expect(verdict.reasons == (eligible ? [] : [.lapsedTooRecently]))
    }

    @Test(
        "win-back: wait between redemptions of the same offer (3 months)",
        arguments: [
            ("wb", "2026-04-30T23:59:59Z", [ReasonCode.waitBetweenOffers]),
            ("wb", "2026-05-01", []),
            ("wb-other", "2026-03-01", []),  // another offer's redemption doesn't count
        ])
    func wait(previousOffer: String, at: String, reasons: [ReasonCode]) {
        let redemption = WinBackRedemption(
            offerId: previousOffer, startedAt: day("2026-01-01"), endedAt: day("2026-02-01"))
        let history = Self.group(.expired, lapsedAt: "2025-12-01", redemptions: [redemption])
        let offer = F.winBack("wb", lapse: (0, 24), wait: 3)
        #expect(Eligibility.evaluate(offer: offer, history: history, at: day(at)).reasons == reasons)
        let noWait = F.winBack("wb", lapse: (0, 24), wait: nil)
        #expect(Eligibility.evaluate(offer: noWait, history: history, at: day(at)).eligible)
    }

    @Test("win-back: a revoked customer counts as lapsed at the revocation; auto-renew is not checked")
    func winBackRevoked() {
        let history = Self.group(.revoked, autoRenew: true, paid: 6, lapsedAt: "2026-01-10")
        #expect(Eligibility.evaluate(offer: Self.winBack, history: history, at: day("2026-03-10")).eligible)
        #expect(
            Eligibility.evaluate(offer: Self.winBack, history: history, at: day("2026-03-09")).reasons
                == [.lapsedTooRecently])
    }

    @Test("win-back: missing parameters never qualify")
    func winBackMissingParameters() {
        var offer = Self.winBack
        offer.winBack = nil
        let verdict = Eligibility.evaluate(
            offer: offer, history: Self.group(.expired, lapsedAt: "2026-01-01"),
            at: day("2026-04-01"))
        #expect(verdict.reasons == [.missingWinBackParameters])
    }

    @Test("win-back end to end from transactions")
    func winBackFromTransactions() throws {
        // Six paid months, lapsed 2026-01-01 with auto-renew off.
        let transactions = (0..<6).map { i in
            F.tx(
                "m\(i)", from: String(format: "2025-%02d-01", i + 7),
                to: i == 5 ? "2026-01-01" : String(format: "2025-%02d-01", i + 8), autoRenew: false)
        }
        let catalog = F.catalog([Self.winBack])
        let eligibleAt = F.history(transactions, at: "2026-03-01", catalog: catalog)
        #expect(eligibleAt.group("g1").paidMonths == 6)
        #expect(
            try Eligibility.evaluate(productId: "monthly", catalog: catalog, history: eligibleAt, at: day("2026-03-01"))
                .map(\.reasons) == [[]])
        let tooEarly = F.history(transactions, at: "2026-02-28", catalog: catalog)
        #expect(
            try Eligibility.evaluate(productId: "monthly", catalog: catalog, history: tooEarly, at: day("2026-02-28"))
                .map(\.reasons) == [[.lapsedTooRecently]])
    }

    // MARK: Windows, code offers, products

    @Test(
        "offer windows apply to every type",
        arguments: [
            (OfferType.introductory, "2026-05-31T23:59:59Z", [ReasonCode.offerNotStarted]),
            (.promotional, "2026-06-01", []),
            (.winBack, "2026-06-30T23:59:59Z", []),
            (.introductory, "2026-07-01", [.offerEnded]),
            (.promotional, "2027-01-01", [.offerEnded]),
        ])
    func windows(type: OfferType, at: String, reasons: [ReasonCode]) {
        var offer =
            type == .winBack
            ? F.winBack("w", lapse: (0, 99))
            : type == .promotional
                ? F.promoMonthly
                : F.introMonthly
        offer.startsAt = day("2026-06-01")
        offer.endsAt = day("2026-07-01")
        let history = type == .introductory ? Self.group(.never) : Self.group(.expired, lapsedAt: "2026-01-01")
        #expect(Eligibility.evaluate(offer: offer, history: history, at: day(at)).reasons == reasons)
    }

    @Test("code offers are never eligible without a code and are left out of product evaluation")
    func codeOffers() throws {
        let verdict = Eligibility.evaluate(offer: F.codeMonthly, history: Self.group(.never), at: day("2026-01-01"))
        #expect(verdict.reasons == [.codeOfferRequiresCode])
        let verdicts = try Eligibility.evaluate(
            productId: "monthly", catalog: F.standard, history: F.history([], at: "2026-01-01"),
            at: day("2026-01-01"))
        #expect(verdicts.map(\.offerId) == ["intro-monthly", "promo-monthly", "wb-monthly"])
        #expect(verdicts.map(\.reasons) == [[], [.noHistory], [.noHistory]])
    }

    @Test("unknown product")
    func unknownProduct() {
        do {
            _ = try Eligibility.evaluate(
                productId: "ghost", catalog: F.standard, history: F.history([], at: "2026-01-01"),
                at: day("2026-01-01"))
            Issue.record("accepted")
        } catch {
            #expect(error.code == .unknownProduct)
            #expect(error.field == "productId")
        }
    }

    @Test("reason codes are snake_case and stable")
    func reasonCodes() {
        #expect(ReasonCode.allCases.count == 18)
        for code in ReasonCode.allCases {
            #expect(code.rawValue.allSatisfy { $0.isLowercase || $0 == "_" }, "\(code)")
        }
        #expect(ReasonCode.lapsedTooLongAgo.rawValue == "lapsed_too_long_ago")
        #expect(ReasonCode.notEligiblePerApple.rawValue == "not_eligible_per_apple")
        #expect(ReasonCode.waitBetweenOffers.rawValue == "wait_between_offers")
    }
}
