import Foundation

/// Why an offer is not available to a customer (snake_case raw values as in API.md `reasons`).
public enum ReasonCode: String, Sendable, Hashable, Codable, CaseIterable {
    /// The offer's `startsAt` is after the decision time. All types.
    case offerNotStarted = "offer_not_started"
    /// The offer's `endsAt` is at or before the decision time. All types.
    case offerEnded = "offer_ended"
    /// Code offers are only reachable through a campaign code. Code.
    case codeOfferRequiresCode = "code_offer_requires_code"
    /// An introductory offer was already redeemed in the group. Introductory.
    case introAlreadyUsed = "intro_already_used"
    /// The customer subscribed in the group before (and isn't now). Introductory.
    case previouslySubscribed = "previously_subscribed"
    /// The customer is active in the group. Introductory, win-back.
    case currentlySubscribed = "currently_subscribed"
    /// The customer is in billing retry. Win-back.
    case inBillingRetry = "in_billing_retry"
    /// The customer is in a billing grace period. Win-back.
    case inGracePeriod = "in_grace_period"
    /// The customer has not lapsed (active, billing retry or grace). Win-back.
    case notLapsed = "not_lapsed"
    /// The customer never subscribed in the group. Promotional, win-back.
    case noHistory = "no_history"
    /// The customer's segment is not in the offer's audience. Promotional.
    case notInAudience = "not_in_audience"
    /// The latest subscription still has auto-renew on. Win-back.
    case autoRenewOn = "auto_renew_on"
    /// Paid months below `minPaidMonths`. Win-back.
    case paidTooShort = "paid_too_short"
    /// Months since lapse below `monthsSinceLapse.min`. Win-back.
    case lapsedTooRecently = "lapsed_too_recently"
    /// Months since lapse above `monthsSinceLapse.max`. Win-back.
    case lapsedTooLongAgo = "lapsed_too_long_ago"
    /// Fewer than `waitBetweenOffersMonths` since the previous redemption of this offer ended. Win-back.
    case waitBetweenOffers = "wait_between_offers"
    /// A win-back offer without parameters (a catalog error): never offered. Win-back.
    case missingWinBackParameters = "missing_win_back_parameters"
    /// Apple's renewal info lists the group's eligible win-back offers and this one is not among them. Win-back.
    case notEligiblePerApple = "not_eligible_per_apple"
}

/// The decision for one offer: eligible exactly when `reasons` is empty.
public struct EligibilityVerdict: Sendable, Hashable, Codable {
    /// The offer.
    public var offerId: String
    /// Its type.
    public var type: OfferType
    /// Its product.
    public var productId: String
    /// Every reason it is not available, in a fixed order; empty when eligible.
    public var reasons: [ReasonCode]

    /// `reasons.isEmpty`.
    public var eligible: Bool { reasons.isEmpty }

    /// Creates a verdict.
    public init(offerId: String, type: OfferType, productId: String, reasons: [ReasonCode]) {
        self.offerId = offerId
        self.type = type
        self.productId = productId
        self.reasons = reasons
    }
}

/// The eligibility rules (APPLE_OFFERS §4), as plain functions of values.
public enum Eligibility {
    /// Evaluates one offer for a customer whose history in the offer's group is `history`, at `at`.
    ///
    /// Reasons are listed in a fixed order: date window first, then the type's rules.
    public static func evaluate(offer: Offer, history: GroupHistory, at: Date) -> EligibilityVerdict {
        let window = window(offer, at: at)
        let rules: [ReasonCode] =
            switch offer.type {
            case .introductory: introductory(history)
            case .promotional: promotional(offer, history)
            case .winBack: winBack(offer, history, at: at)
            case .code: [.codeOfferRequiresCode]
            }
        // Most offers are inside their window: their reasons are the type's, taken as they are (no second array).
        return EligibilityVerdict(
            offerId: offer.id, type: offer.type, productId: offer.productId,
            reasons: window.isEmpty ? rules : window + rules)
    }

    /// A promotional offer granted by a live code redemption (API.md §10): the campaign chose the customer, so the
    /// audience rules (`no_history`, `not_in_audience`) do not apply; the offer's own date window still does.
    public static func evaluateGranted(offer: Offer, at: Date) -> EligibilityVerdict {
        EligibilityVerdict(
            offerId: offer.id, type: offer.type, productId: offer.productId, reasons: window(offer, at: at))
    }

    /// The offer's date window: not started, ended.
    static func window(_ offer: Offer, at: Date) -> [ReasonCode] {
        var reasons: [ReasonCode] = []
        if let startsAt = offer.startsAt, at < startsAt { reasons.append(.offerNotStarted) }
        if let endsAt = offer.endsAt, at >= endsAt { reasons.append(.offerEnded) }
        return reasons
    }

    /// Verdicts for every offer of `productId` except code offers, sorted by offer id (`offers.eligibility`).
    /// With a `billingPlan`, offers targeting another plan are not considered (they get no verdict); `nil` considers
    /// every offer.
    /// - Throws: `unknown_product` (field `productId`).
    public static func evaluate(
        productId: String, catalog: Catalog, history: CustomerHistory, at: Date, billingPlan: BillingPlan? = nil
    )
        throws(OfferDomainError) -> [EligibilityVerdict]
    {
        guard let product = catalog.product(productId) else {
            throw OfferDomainError(.unknownProduct, field: "productId", "unknown product \(productId)")
        }
        let group = history.group(product.groupId)
        return catalog.offers(forProduct: productId)
            .filter { $0.type != .code && $0.applies(to: billingPlan) }
            .sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
            .map { evaluate(offer: $0, history: group, at: at) }
    }

    static func introductory(_ history: GroupHistory) -> [ReasonCode] {
        var reasons: [ReasonCode] = []
        if history.state == .active {
            reasons.append(.currentlySubscribed)
        } else if history.state != .never {
            reasons.append(.previouslySubscribed)
        }
        if history.introOfferUsed { reasons.append(.introAlreadyUsed) }
        return reasons
    }

    static func promotional(_ offer: Offer, _ history: GroupHistory) -> [ReasonCode] {
        guard let segment = history.segment else { return [.noHistory] }
        let audience = offer.audience ?? PromotionalAudience.defaultAudience
        return audience.contains(segment) ? [] : [.notInAudience]
    }

    static func winBack(_ offer: Offer, _ history: GroupHistory, at: Date) -> [ReasonCode] {
        // Apple decides win-back eligibility: when it says, its list replaces our own rules (API.md §8).
        if let apple = history.appleWinBackOfferIds { return apple.contains(offer.id) ? [] : [.notEligiblePerApple] }
        switch history.state {
        case .never: return [.noHistory]
        case .active: return [.notLapsed, .currentlySubscribed]
        case .billingRetry: return [.notLapsed, .inBillingRetry]
        case .gracePeriod: return [.notLapsed, .inGracePeriod]
        case .expired, .revoked: break
        }
        guard let parameters = offer.winBack else { return [.missingWinBackParameters] }
        var reasons: [ReasonCode] = []
        if history.autoRenew == true && history.state == .expired { reasons.append(.autoRenewOn) }
        if history.paidMonths < parameters.minPaidMonths { reasons.append(.paidTooShort) }
        let lapsedAt = history.lapsedAt ?? at
        let sinceLapse = CalendarMonths.between(lapsedAt, at)
        if sinceLapse < parameters.monthsSinceLapse.min { reasons.append(.lapsedTooRecently) }
        if sinceLapse > parameters.monthsSinceLapse.max { reasons.append(.lapsedTooLongAgo) }
        if let wait = parameters.waitBetweenOffersMonths,
            let previousEnd = history.lastRedemptionEnd(ofOffer: offer.id),
            CalendarMonths.between(previousEnd, at) < wait
        {
            reasons.append(.waitBetweenOffers)
        }
        return reasons
    }
}
