import Foundation

/// A subscription group: products in one group are mutually exclusive for a customer.
public struct SubscriptionGroup: Sendable, Hashable, Codable {
    /// The group id (as in App Store Connect or the `.storekit` file).
    public var id: String
    /// Display name.
    public var name: String

    /// Creates a group.
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// An auto-renewable subscription product.
public struct Product: Sendable, Hashable, Codable {
    /// The product id.
    public var id: String
    /// The group it belongs to.
    public var groupId: String
    /// The billing period.
    public var period: SubscriptionPeriod
    /// The regular price per billing period.
    public var price: Money
    /// Rank in the group (App Store `groupNumber`/level; 1 = highest service level).
    public var level: Int

    /// Creates a product.
    public init(id: String, groupId: String, period: SubscriptionPeriod, price: Money, level: Int) {
        self.id = id
        self.groupId = groupId
        self.period = period
        self.price = price
        self.level = level
    }
}

/// Win-back offer parameters as App Store Connect has them. All counts are whole months, rounded down.
public struct WinBackParameters: Sendable, Hashable, Codable {
    /// Inclusive bounds of whole months since the customer's last lapse.
    public struct MonthRange: Sendable, Hashable, Codable {
        /// Minimum months since lapse (inclusive).
        public var min: Int
        /// Maximum months since lapse (inclusive).
        public var max: Int

        /// Creates a range.
        public init(min: Int, max: Int) {
            self.min = min
            self.max = max
        }
    }

    /// Minimum paid tenure in the group (whole months).
    public var minPaidMonths: Int
    /// Months since the last lapse, inclusive on both ends.
    public var monthsSinceLapse: MonthRange
    /// Whole months the customer must wait after the end of their previous redemption of this same offer;
    /// `nil` = no wait.
    public var waitBetweenOffersMonths: Int?

    /// Creates parameters.
    public init(minPaidMonths: Int, monthsSinceLapse: MonthRange, waitBetweenOffersMonths: Int?) {
        self.minPaidMonths = minPaidMonths
        self.monthsSinceLapse = monthsSinceLapse
        self.waitBetweenOffersMonths = waitBetweenOffersMonths
    }
}

/// Customer segments a promotional offer can target (see `docs/offer-rules.md`).
public enum PromotionalAudience: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    /// Active, auto-renew on.
    case active
    /// Active, auto-renew off.
    case atRisk
    /// In billing retry or in a billing grace period.
    case billingRetry
    /// Expired or revoked, nothing active in the group.
    case lapsed

    /// The default audience: at risk, billing retry, lapsed.
    public static let defaultAudience: Set<PromotionalAudience> = [.atRisk, .billingRetry, .lapsed]

    /// Alphabetical by raw value.
    public static func < (lhs: PromotionalAudience, rhs: PromotionalAudience) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}

/// How a subscription is billed (API.md §3, APPLE_OFFERS §9): a year paid up front, or a year's commitment paid
/// monthly. An offer may target one plan; an offer without one applies to every plan.
public enum BillingPlan: String, Sendable, Hashable, Codable, CaseIterable {
    /// Billed up front (Apple's `BILLED_UPFRONT` / `UPFRONT`).
    case upFront
    /// Billed monthly (Apple's `MONTHLY`).
    case monthly

    /// Apple's spellings: `billingPlanType` of transactions and renewal info (`BILLED_UPFRONT`, `MONTHLY`), offers'
    /// `targetSubscriptionPlanType` and `.storekit` files (`UPFRONT`, `MONTHLY`), and ours; case and `_` do not
    /// matter. Nil for any other value.
    public init?(apple text: String) {
        switch text.lowercased().replacingOccurrences(of: "_", with: "") {
        case "upfront", "billedupfront": self = .upFront
        case "monthly", "billedmonthly": self = .monthly
        default: return nil
        }
    }
}

/// What names an offer: its product and its id (APPLE_OFFERS §6: StoreKit names a promotional offer by both, and
/// Xcode lets one offer id sit on two subscriptions).
public struct OfferKey: Sendable, Hashable, Codable {
    /// The product the offer discounts.
    public var productId: String
    /// The offer id.
    public var offerId: String

    /// Creates a key.
    public init(productId: String, offerId: String) {
        self.productId = productId
        self.offerId = offerId
    }
}

/// A subscription offer of one product.
public struct Offer: Sendable, Hashable, Codable {
    /// The offer id (Apple's offer identifier). Unique per product: StoreKit names an offer by product and id
    /// together, and one id may sit on several products (see ``Catalog/offer(_:product:)``).
    public var id: String
    /// Introductory, promotional, code or win-back.
    public var type: OfferType
    /// The product it discounts.
    public var productId: String
    /// How it charges.
    public var paymentMode: PaymentMode
    /// The offer period: the trial length (free trial), the whole offer duration (pay up front, with
    /// `periodCount` 1) or the discounted billing period (pay as you go).
    public var period: SubscriptionPeriod
    /// Number of periods: 1 for free trial and pay up front, 1-12 for pay as you go.
    public var periodCount: Int
    /// The discounted price (per period for pay as you go, total for pay up front); `nil` for free trials.
    public var price: Money?
    /// The offer is available from this instant (inclusive); `nil` = always.
    public var startsAt: Date?
    /// The offer is available until this instant (exclusive); `nil` = forever.
    public var endsAt: Date?
    /// Win-back parameters (win-back offers only).
    public var winBack: WinBackParameters?
    /// Promotional audience (promotional offers only); `nil` = ``PromotionalAudience/defaultAudience``.
    public var audience: Set<PromotionalAudience>?
    /// The billing plan the offer targets; `nil` = every plan.
    public var billingPlan: BillingPlan?

    /// Creates an offer.
    public init(
        id: String, type: OfferType, productId: String, paymentMode: PaymentMode, period: SubscriptionPeriod,
        periodCount: Int = 1, price: Money? = nil, startsAt: Date? = nil, endsAt: Date? = nil,
        winBack: WinBackParameters? = nil, audience: Set<PromotionalAudience>? = nil, billingPlan: BillingPlan? = nil
    ) {
        self.id = id
        self.type = type
        self.productId = productId
        self.paymentMode = paymentMode
        self.period = period
        self.periodCount = periodCount
        self.price = price
        self.startsAt = startsAt
        self.endsAt = endsAt
        self.winBack = winBack
        self.audience = audience
        self.billingPlan = billingPlan
    }

    /// The offer's name in its catalog: product and id.
    public var key: OfferKey { OfferKey(productId: productId, offerId: id) }

    /// Whether the offer applies to a customer on `plan`: always when either is `nil` (no plan given: every offer
    /// is considered, as before plans existed; an offer without a plan applies to every plan).
    public func applies(to plan: BillingPlan?) -> Bool {
        guard let plan, let billingPlan else { return true }
        return plan == billingPlan
    }

    /// The total offer duration: `period` × `periodCount` (`nil` only if that overflows 999 units).
    public var totalDuration: SubscriptionPeriod? { period.times(periodCount) }

    /// Whether `at` is inside `[startsAt, endsAt)`.
    public func isAvailable(at: Date) -> Bool {
        if let startsAt, at < startsAt { return false }
        if let endsAt, at >= endsAt { return false }
        return true
    }
}

/// A tenant's catalog: groups, products and offers, with lookups and validation.
public struct Catalog: Sendable, Hashable, Codable {
    /// At most this many promotional offers may be active per product (Apple's limit).
    public static let maxActivePromotionalOffersPerProduct = 10

    /// Subscription groups.
    public private(set) var groups: [SubscriptionGroup]
    /// Products.
    public private(set) var products: [Product]
    /// Offers.
    public private(set) var offers: [Offer]

    private var groupIndex: [String: Int]
    private var productIndex: [String: Int]
    private var offerIndex: [OfferKey: Int]

    /// Creates a catalog without validating it (lookups return the first of duplicate ids).
    /// Call ``validate(at:)`` or use ``init(validating:products:offers:at:)``.
    public init(groups: [SubscriptionGroup], products: [Product], offers: [Offer]) {
        self.groups = groups
        self.products = products
        self.offers = offers
        self.groupIndex = Catalog.index(groups.map(\.id))
        self.productIndex = Catalog.index(products.map(\.id))
        var offerIndex: [OfferKey: Int] = [:]
        for (position, offer) in offers.enumerated() where offerIndex[offer.key] == nil {
            offerIndex[offer.key] = position
        }
        self.offerIndex = offerIndex
    }

    /// Creates a catalog and throws the first validation error, if any.
    public init(validating groups: [SubscriptionGroup], products: [Product], offers: [Offer], at: Date)
        throws(OfferDomainError)
    {
        self.init(groups: groups, products: products, offers: offers)
        if let first = validate(at: at).first { throw first }
    }

    private static func index(_ ids: [String]) -> [String: Int] {
        var result: [String: Int] = [:]
        for (position, id) in ids.enumerated() where result[id] == nil {
            result[id] = position
        }
        return result
    }

    private enum CodingKeys: String, CodingKey {
        case groups, products, offers
    }

    /// Decodes `{"groups", "products", "offers"}` (no validation).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            groups: try container.decode([SubscriptionGroup].self, forKey: .groups),
            products: try container.decode([Product].self, forKey: .products),
            offers: try container.decode([Offer].self, forKey: .offers))
    }

    /// Encodes `{"groups", "products", "offers"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(groups, forKey: .groups)
        try container.encode(products, forKey: .products)
        try container.encode(offers, forKey: .offers)
    }

    /// The group with this id.
    public func group(_ id: String) -> SubscriptionGroup? { groupIndex[id].map { groups[$0] } }
    /// The product with this id.
    public func product(_ id: String) -> Product? { productIndex[id].map { products[$0] } }
    /// The offer `id` of product `productId`: an offer is named by both (StoreKit does the same), since one id may
    /// sit on several products.
    public func offer(_ id: String, product productId: String) -> Offer? {
        offerIndex[OfferKey(productId: productId, offerId: id)].map { offers[$0] }
    }
    /// Every offer with this id, whatever its product, in catalog order (several only when products share an id).
    public func offers(withId id: String) -> [Offer] { offers.filter { $0.id == id } }
    /// Products of a group, in catalog order.
    public func products(inGroup groupId: String) -> [Product] { products.filter { $0.groupId == groupId } }
    /// Offers of a product, in catalog order.
    public func offers(forProduct productId: String) -> [Offer] { offers.filter { $0.productId == productId } }
    /// The group id of a product.
    public func groupId(ofProduct productId: String) -> String? { product(productId)?.groupId }

    /// Every problem with the catalog, each naming its field (`offers[3].periodCount`). Empty = valid.
    /// `at` decides which promotional offers count as active for the 10-per-product limit.
    public func validate(at: Date) -> [OfferDomainError] {
        var errors: [OfferDomainError] = []
        func fail(_ code: OfferDomainError.Code, _ field: String, _ message: String) {
            errors.append(OfferDomainError(code, field: field, message))
        }
        var seen = Set<String>()
        for (i, group) in groups.enumerated() {
            if group.id.isEmpty { fail(.invalidIdentifier, "groups[\(i)].id", "group id is empty") }
            if !seen.insert(group.id).inserted {
                fail(.duplicateIdentifier, "groups[\(i)].id", "duplicate group id \(group.id)")
            }
        }
        seen.removeAll()
        var groupCurrency: [String: String] = [:]
        for (i, product) in products.enumerated() {
            if product.id.isEmpty { fail(.invalidIdentifier, "products[\(i)].id", "product id is empty") }
            if !seen.insert(product.id).inserted {
                fail(.duplicateIdentifier, "products[\(i)].id", "duplicate product id \(product.id)")
            }
            if group(product.groupId) == nil {
                fail(.unknownGroup, "products[\(i)].groupId", "unknown group \(product.groupId)")
            }
            if product.level < 1 { fail(.invalidIdentifier, "products[\(i)].level", "level must be at least 1") }
            if let currency = groupCurrency[product.groupId], currency != product.price.currency {
                fail(.currencyMismatch, "products[\(i)].price", "products of one group must share one currency")
            } else {
                groupCurrency[product.groupId] = product.price.currency
            }
        }
        var seenOffers = Set<OfferKey>()
        var activePromotional: [String: Int] = [:]
        var activeIntro: [String: Int] = [:]
        for (i, offer) in offers.enumerated() {
            let path = "offers[\(i)]"
            if offer.id.isEmpty { fail(.invalidIdentifier, "\(path).id", "offer id is empty") }
            if !seenOffers.insert(offer.key).inserted {
                fail(
                    .duplicateIdentifier, "\(path).id", "duplicate offer id \(offer.id) for product \(offer.productId)")
            }
            let product = self.product(offer.productId)
            if product == nil { fail(.unknownProduct, "\(path).productId", "unknown product \(offer.productId)") }
            validatePricing(offer, product: product, path: path, fail: fail)
            if let startsAt = offer.startsAt, let endsAt = offer.endsAt, endsAt <= startsAt {
                fail(.invalidOffer, "\(path).endsAt", "endsAt must be after startsAt")
            }
            validateTypeParameters(offer, path: path, fail: fail)
            if offer.endsAt.map({ $0 > at }) ?? true {  // not ended: current or scheduled
                if offer.type == .promotional {
                    let count = activePromotional[offer.productId, default: 0] + 1
                    activePromotional[offer.productId] = count
                    if count > Catalog.maxActivePromotionalOffersPerProduct {
                        fail(
                            .tooManyPromotionalOffers, "\(path).productId",
                            "at most \(Catalog.maxActivePromotionalOffersPerProduct) active promotional offers "
                                + "per product")
                    }
                }
            }
            if offer.type == .introductory && offer.isAvailable(at: at) {
                let count = activeIntro[offer.productId, default: 0] + 1
                activeIntro[offer.productId] = count
                if count > 1 {
                    fail(.invalidOffer, "\(path).type", "a product has at most one introductory offer at a time")
                }
            }
        }
        return errors
    }

    private func validatePricing(
        _ offer: Offer, product: Product?, path: String, fail: (OfferDomainError.Code, String, String) -> Void
    ) {
        switch offer.paymentMode {
        case .freeTrial:
            if offer.price != nil { fail(.invalidOffer, "\(path).price", "a free trial has no price") }
            if offer.periodCount != 1 {
                fail(.invalidOffer, "\(path).periodCount", "a free trial has periodCount 1")
            }
        case .payUpFront:
            if offer.price == nil { fail(.invalidOffer, "\(path).price", "payUpFront needs a price") }
            if offer.periodCount != 1 {
                fail(.invalidOffer, "\(path).periodCount", "payUpFront has periodCount 1")
            }
        case .payAsYouGo:
            if offer.price == nil { fail(.invalidOffer, "\(path).price", "payAsYouGo needs a price") }
            if !(1...12).contains(offer.periodCount) {
                fail(.invalidOffer, "\(path).periodCount", "payAsYouGo periodCount must be 1-12")
            }
            if let product, offer.period != product.period {
                fail(.invalidOffer, "\(path).period", "payAsYouGo period must equal the product's period")
            }
        }
        if let price = offer.price, let product, price.currency != product.price.currency {
            fail(.currencyMismatch, "\(path).price", "offer price currency must match the product's")
        }
    }

    private func validateTypeParameters(
        _ offer: Offer, path: String, fail: (OfferDomainError.Code, String, String) -> Void
    ) {
        if offer.type == .winBack {
            if let parameters = offer.winBack {
                if parameters.minPaidMonths < 0 {
                    fail(.invalidOffer, "\(path).minPaidMonths", "minPaidMonths must not be negative")
                }
                let range = parameters.monthsSinceLapse
                if range.min < 0 || range.max < range.min {
                    fail(.invalidOffer, "\(path).monthsSinceLapse", "monthsSinceLapse needs 0 <= min <= max")
                }
                if let wait = parameters.waitBetweenOffersMonths, wait < 0 {
                    fail(.invalidOffer, "\(path).waitBetweenOffersMonths", "must not be negative")
                }
            } else {
                fail(.invalidOffer, "\(path).winBack", "a win-back offer needs its parameters")
            }
        } else if offer.winBack != nil {
            fail(.invalidOffer, "\(path).winBack", "only win-back offers carry win-back parameters")
        }
        if let audience = offer.audience {
            if offer.type != .promotional {
                fail(.invalidOffer, "\(path).audience", "only promotional offers carry an audience")
            } else if audience.isEmpty {
                fail(.invalidOffer, "\(path).audience", "audience must not be empty (omit it for the default)")
            }
        }
    }
}
