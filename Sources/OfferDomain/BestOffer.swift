import Foundation

/// The customer's saving from an offer, kept as an exact fraction `numerator / denominator` (denominator > 0) so
/// savings of offers on products with different billing periods compare exactly (APPLE_OFFERS §4).
public struct Saving: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Numerator, in the product's currency.
    public let numerator: Decimal
    /// Positive denominator (a product period in thirtieths of a month, or 1).
    public let denominator: Decimal

    /// The saving of `offer` against `product`'s regular price `P` per billing period `R`:
    /// free trial of duration `D`: `P × D/R`; pay as you go at `p` for `n` periods of length `d`:
    /// `(P × d/R − p) × n` (= `(P − p) × n` when `d = R`, as Apple requires); pay up front at `p` for `D`:
    /// `P × D/R − p`. Durations are in thirtieths of a month (day 1, week 7, month 30, year 360).
    public init(offer: Offer, product: Product) {
        let regular = product.price.amount
        let r = Decimal(product.period.thirtiethsOfMonth)
        let d = Decimal(offer.period.thirtiethsOfMonth)
        let n = Decimal(offer.periodCount)
        let price = offer.price?.amount ?? 0
        switch offer.paymentMode {
        case .freeTrial:
            numerator = regular * d * n
        case .payAsYouGo:
            numerator = (regular * d - price * r) * n
        case .payUpFront:
            numerator = regular * d * n - price * r
        }
        denominator = r
    }

    /// The saving as a decimal, rounded half-even to 6 fraction digits (for display and JSON only).
    public var amount: Decimal {
        var quotient = numerator / denominator
        var rounded = Decimal()
        NSDecimalRound(&rounded, &quotient, 6, .bankers)
        return rounded
    }

    /// `amount` as a plain string.
    public var description: String {
        var value = amount
        return NSDecimalString(&value, Locale(identifier: "en_US_POSIX"))
    }

    /// Exact comparison by cross-multiplication.
    public static func < (lhs: Saving, rhs: Saving) -> Bool {
        lhs.numerator * rhs.denominator < rhs.numerator * lhs.denominator
    }

    /// Exact equality by cross-multiplication; a saving compared with a copy of itself (the same offer of the same
    /// catalog in two decisions) is equal without it: Foundation's `Decimal` products allocate.
    public static func == (lhs: Saving, rhs: Saving) -> Bool {
        if lhs.numerator.isIdentical(to: rhs.numerator) && lhs.denominator.isIdentical(to: rhs.denominator) {
            return true
        }
        return lhs.numerator * rhs.denominator == rhs.numerator * lhs.denominator
    }

    /// Consistent with `==`: hashes the reduced amount.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(amount)
    }
}

/// One offer considered by ``BestOffer/choose(scope:catalog:history:at:)``.
public struct ConsideredOffer: Sendable, Hashable {
    /// The offer.
    public var offer: Offer
    /// Its product.
    public var product: Product
    /// The eligibility decision.
    public var verdict: EligibilityVerdict
    /// The customer's saving.
    public var saving: Saving
    /// 1 = the winner, 2, 3… for the other eligible offers; `nil` for ineligible offers (JSON `null`).
    public var rank: Int?
}

/// The outcome of a best-offer decision (`offers.best`).
public struct BestOfferResult: Sendable, Hashable {
    /// Every non-code offer in scope: eligible offers by rank, then ineligible ones by type priority
    /// (win-back, promotional, introductory) and offer id.
    public var considered: [ConsideredOffer]

    /// The winner, if any offer is eligible: `considered.first` when its rank is 1.
    public var winner: ConsideredOffer? {
        guard let first = considered.first, first.rank == 1 else { return nil }
        return first
    }

    /// Element by element, where they lie: `Array`'s `==` copies each element out to compare it, which retains and
    /// releases a dozen strings (the gateway compares every new result with the equal one it keeps,
    /// docs/perf/README.md session 32).
    public static func == (lhs: BestOfferResult, rhs: BestOfferResult) -> Bool {
        lhs.considered.withUnsafeBufferPointer { left in
            rhs.considered.withUnsafeBufferPointer { right in
                guard left.count == right.count else { return false }
                for index in left.indices where !(left[index] == right[index]) { return false }
                return true
            }
        }
    }
}

/// Chooses the best offer for a customer (APPLE_OFFERS §4).
public enum BestOffer {
    /// Which offers compete.
    public enum Scope: Sendable, Hashable {
        /// Offers of one product.
        case product(String)
        /// Offers of every product of one group.
        case group(String)
    }

    /// Ranks every non-code offer in `scope`: among eligible offers, win-back beats promotional beats
    /// introductory; within a type the larger saving wins; ties go to the smaller offer id (byte order).
    /// With a `billingPlan`, offers targeting another plan are not considered (they are absent from `considered`);
    /// `nil` considers every offer.
    /// - Throws: `unknown_product` (field `productId`) or `unknown_group` (field `groupId`).
    public static func choose(
        scope: Scope, catalog: Catalog, history: CustomerHistory, at: Date, billingPlan: BillingPlan? = nil
    ) throws(OfferDomainError) -> BestOfferResult {
        try choose(scope: scope, catalog: catalog, ranked: nil, history: history, at: at, billingPlan: billingPlan)
    }

    /// The same decision as ``choose(scope:catalog:history:at:)`` on `ranked.catalog`, using the savings and the
    /// order computed once in `ranked` (about three times faster per decision).
    /// - Throws: `unknown_product` (field `productId`) or `unknown_group` (field `groupId`).
    public static func choose(
        scope: Scope, ranked: RankedCatalog, history: CustomerHistory, at: Date, billingPlan: BillingPlan? = nil
    ) throws(OfferDomainError) -> BestOfferResult {
        try choose(
            scope: scope, catalog: ranked.catalog, ranked: ranked, history: history, at: at, billingPlan: billingPlan)
    }

    private static func choose(
        scope: Scope, catalog: Catalog, ranked: RankedCatalog?, history: CustomerHistory, at: Date,
        billingPlan: BillingPlan?
    ) throws(OfferDomainError) -> BestOfferResult {
        let products: [Product]
        switch scope {
        case .product(let id):
            guard let product = catalog.product(id) else {
                throw OfferDomainError(.unknownProduct, field: "productId", "unknown product \(id)")
            }
            products = [product]
        case .group(let id):
            guard catalog.group(id) != nil else {
                throw OfferDomainError(.unknownGroup, field: "groupId", "unknown group \(id)")
            }
            products = catalog.products(inGroup: id)
        }
        var candidates: [ConsideredOffer] = []
        if let ranked {
            // Each candidate's precomputed rank (among eligible offers for an eligible one, among ineligible
            // offers for the others); eligible candidates without one (none in a valid catalog) are placed by the
            // exact comparison, which the ranks agree with.
            let positions = products.map { ranked.offerPositions(forProduct: $0.id) }
            let count = positions.reduce(0) { $0 + $1.count }
            // Optional, so that each can be moved out into its place once sorted (a copy retains a dozen strings).
            var slots: [ConsideredOffer?] = []
            slots.reserveCapacity(count)
            var ranks: [Int?] = []
            ranks.reserveCapacity(count)
            var eligible: [Bool] = []
            eligible.reserveCapacity(count)
            var mayFollowApple: [Bool] = []
            mayFollowApple.reserveCapacity(count)
            for (product, positions) in zip(products, positions) {
                let group = history.group(product.groupId)
                // The precomputed savings are against the product the catalog finds under this id; a duplicate
                // product id (unvalidated catalogs only) gets its savings computed here, as without a ranking.
                let canonical = catalog.product(product.id) == product
                for position in positions {
                    let offer = catalog.offers[position]
                    if offer.type == .code || !offer.applies(to: billingPlan) { continue }
                    let verdict = Eligibility.evaluate(offer: offer, history: group, at: at)
                    let saving = canonical ? ranked.saving(at: position) : nil
                    let isEligible = verdict.eligible
                    slots.append(
                        ConsideredOffer(
                            offer: offer, product: product, verdict: verdict,
                            saving: saving ?? Saving(offer: offer, product: product), rank: nil))
                    ranks.append(
                        isEligible ? (canonical ? ranked.rank(at: position) : nil) : ranked.ineligibleRank(at: position)
                    )
                    eligible.append(isEligible)
                    mayFollowApple.append(isEligible && offer.type == .winBack)
                }
            }
            // Decorate once, sort on integer keys: comparing savings as fractions, or offers' ids, on every
            // comparison (each one copying two candidates) dominated a decision's cost. Eligible offers come first
            // (as in `isOrderedBefore`); Apple's order is asked only between two eligible win-back offers.
            let order = slots.indices.sorted { i, j in
                if mayFollowApple[i] && mayFollowApple[j], let apple = appleOrder(slots[i]!, slots[j]!, history) {
                    return apple
                }
                if eligible[i] != eligible[j] { return eligible[i] }
                if let lhs = ranks[i], let rhs = ranks[j], lhs != rhs { return lhs < rhs }
                return isOrderedBefore(slots[i]!, slots[j]!)
            }
            candidates = order.map { slots[$0].take()! }
        } else {
            for product in products {
                let group = history.group(product.groupId)
                for offer in catalog.offers(forProduct: product.id)
                where offer.type != .code && offer.applies(to: billingPlan) {
                    candidates.append(
                        ConsideredOffer(
                            offer: offer, product: product,
                            verdict: Eligibility.evaluate(offer: offer, history: group, at: at),
                            saving: Saving(offer: offer, product: product), rank: nil))
                }
            }
            candidates.sort { lhs, rhs in
                appleOrder(lhs, rhs, history) ?? isOrderedBefore(lhs, rhs)
            }
        }
        // Eligible offers come first: they are ranked 1, 2, 3… in order.
        var rank = 0
        for index in candidates.indices where candidates[index].verdict.eligible {
            rank += 1
            candidates[index].rank = rank
        }
        return BestOfferResult(considered: candidates)
    }

    /// Apple's order between two eligible win-back offers of a group whose renewal info lists them (its first
    /// choice first); nil when Apple has no say. Eligible win-back offers come before every other eligible offer
    /// (type priority), so reordering them among themselves keeps the order total.
    static func appleOrder(_ lhs: ConsideredOffer, _ rhs: ConsideredOffer, _ history: CustomerHistory) -> Bool? {
        guard lhs.verdict.eligible, rhs.verdict.eligible, lhs.offer.type == .winBack, rhs.offer.type == .winBack,
            lhs.product.groupId == rhs.product.groupId,
            let apple = history.group(lhs.product.groupId).appleWinBackOfferIds,
            let left = apple.firstIndex(of: lhs.offer.id), let right = apple.firstIndex(of: rhs.offer.id),
            left != right
        else { return nil }
        return left < right
    }

    /// The total order: eligible first, then type priority, then larger saving (eligible only), then offer id, then
    /// product id.
    static func isOrderedBefore(_ lhs: ConsideredOffer, _ rhs: ConsideredOffer) -> Bool {
        if lhs.verdict.eligible != rhs.verdict.eligible { return lhs.verdict.eligible }
        let compareSavings = lhs.verdict.eligible
        return isOrderedBefore(
            lhs.offer, compareSavings ? lhs.saving : nil, rhs.offer, compareSavings ? rhs.saving : nil)
    }

    /// The order among offers of equal eligibility: type priority, then the larger saving (when savings are
    /// given: eligible offers only), then offer id, then product id. ``RankedCatalog`` ranks eligible offers with it,
    /// giving each saving as a key that orders as the savings do (`Saving` itself, or its numerator over a
    /// denominator common to the catalog).
    static func isOrderedBefore<SavingKey: Comparable>(
        _ lhs: Offer, _ lhsSaving: SavingKey?, _ rhs: Offer, _ rhsSaving: SavingKey?
    ) -> Bool {
        if lhs.type.bestOfferPriority != rhs.type.bestOfferPriority {
            return lhs.type.bestOfferPriority > rhs.type.bestOfferPriority
        }
        if let lhsSaving, let rhsSaving, lhsSaving != rhsSaving { return lhsSaving > rhsSaving }
        // One id may sit on several products (offers are named by product and id): the product id settles it.
        if lhs.id != rhs.id { return lhs.id.utf8.lexicographicallyPrecedes(rhs.id.utf8) }
        return lhs.productId.utf8.lexicographicallyPrecedes(rhs.productId.utf8)
    }
}
