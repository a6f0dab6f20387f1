import Foundation

/// One transaction of a customer as the App Store reported it (fields mirror `subscriptions.record`).
public struct Transaction: Sendable, Hashable, Codable {
    /// Apple's transaction id.
    public var transactionId: String
    /// Apple's original transaction id (the first purchase of this subscription chain).
    public var originalTransactionId: String
    /// The product bought.
    public var productId: String
    /// Start of the period this transaction pays for.
    public var purchaseDate: Date
    /// End of that period. A subscription whose `expiresDate == at` is expired at `at`.
    public var expiresDate: Date
    /// Offer redeemed with this transaction, if any.
    public var offerType: OfferType?
    /// Offer id redeemed, if any.
    public var offerId: String?
    /// Apple's `offerDiscountType`, when known; otherwise the payment mode is looked up from `productId` and
    /// `offerId` in the catalog.
    public var offerPaymentMode: PaymentMode?
    /// Renewal info: auto-renew on.
    public var autoRenew: Bool
    /// Renewal info: in the billing retry period.
    public var inBillingRetry: Bool
    /// Renewal info: end of the billing grace period, if in one.
    public var gracePeriodExpiresDate: Date?
    /// When the App Store revoked (refunded) this transaction, if it did.
    public var revocationDate: Date?
    /// Access through Family Sharing (Apple's `inAppOwnershipType` `FAMILY_SHARED`): the customer did not pay, so
    /// the time does not count as paid tenure.
    public var familyShared: Bool = false

    /// Creates a transaction; `originalTransactionId` defaults to `transactionId`.
    public init(
        transactionId: String, originalTransactionId: String? = nil, productId: String, purchaseDate: Date,
        expiresDate: Date, offerType: OfferType? = nil, offerId: String? = nil, offerPaymentMode: PaymentMode? = nil,
        autoRenew: Bool = true, inBillingRetry: Bool = false, gracePeriodExpiresDate: Date? = nil,
        revocationDate: Date? = nil, familyShared: Bool = false
    ) {
        self.familyShared = familyShared
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId ?? transactionId
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.offerType = offerType
        self.offerId = offerId
        self.offerPaymentMode = offerPaymentMode
        self.autoRenew = autoRenew
        self.inBillingRetry = inBillingRetry
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.revocationDate = revocationDate
    }

    /// Whether the transaction is revoked as of `at` (a revocation dated after `at` is not yet known).
    public func isRevoked(at: Date) -> Bool {
        guard let revocationDate else { return false }
        return revocationDate <= at
    }

    /// When the entitlement this transaction grants ends as of `at`: the expiry, or the revocation if earlier.
    public func effectiveEnd(at: Date) -> Date {
        if let revocationDate, revocationDate <= at {
            return min(expiresDate, max(revocationDate, purchaseDate))
        }
        return expiresDate
    }
}

/// A customer's state in one subscription group at one instant (as in `customers.get`).
public enum GroupState: String, Sendable, Hashable, Codable, CaseIterable {
    /// No transaction in the group.
    case never
    /// An unexpired, unrevoked transaction covers the instant.
    case active
    /// Expired, and the App Store is retrying billing.
    case billingRetry
    /// Expired, billing failed, but inside the billing grace period (service continues).
    case gracePeriod
    /// Lapsed: the latest expiry is past (or equal to the instant), no retry, no grace.
    case expired
    /// The latest transaction was revoked (refunded) and nothing is active.
    case revoked

    /// Whether the customer has access or is being retried (active, billing retry, grace period).
    public var isSubscribed: Bool {
        self == .active || self == .billingRetry || self == .gracePeriod
    }

    /// Whether the customer lapsed (expired or revoked).
    public var isLapsed: Bool { self == .expired || self == .revoked }
}

/// One redemption of a win-back offer (consecutive transactions with the same offer id are one redemption).
public struct WinBackRedemption: Sendable, Hashable, Codable {
    /// The win-back offer id.
    public var offerId: String
    /// When the redemption started.
    public var startedAt: Date
    /// When its discounted time ended (expiry, or revocation if earlier).
    public var endedAt: Date

    /// Creates a redemption record.
    public init(offerId: String, startedAt: Date, endedAt: Date) {
        self.offerId = offerId
        self.startedAt = startedAt
        self.endedAt = endedAt
    }
}

/// What a customer's transactions say about one subscription group, as of one instant.
public struct GroupHistory: Sendable, Hashable, Codable {
    /// The group.
    public var groupId: String
    /// The state at the instant.
    public var state: GroupState
    /// Auto-renew flag of the latest transaction (`nil` when `never`).
    public var autoRenew: Bool?
    /// The product of the transaction that is active now, if any.
    public var activeProductId: String?
    /// First purchase in the group.
    public var firstPurchaseDate: Date?
    /// Latest `expiresDate` in the group.
    public var lastExpiresDate: Date?
    /// When the customer lapsed (latest effective end), for `expired`/`revoked` only.
    public var lapsedAt: Date?
    /// Paid tenure in whole calendar months: non-revoked, non-free-trial time up to the instant, over merged
    /// intervals (overlaps count once), each merged stretch rounded down.
    public var paidMonths: Int
    /// Whether an introductory offer was ever redeemed in the group (on any product, revoked or not).
    public var introOfferUsed: Bool
    /// Win-back redemptions, oldest first.
    public var winBackRedemptions: [WinBackRedemption]
    /// Where the history came from (nil when `never`); see ``CustomerHistory/derive(records:policy:catalog:at:)``.
    public var source: HistorySource?
    /// The environment of the group's Apple data, if it has any.
    public var environment: DataEnvironment?
    /// The product the latest renewal info says renews next.
    public var autoRenewProductId: String?
    /// Apple's `eligibleWinBackOfferIds` from the latest renewal info, best first; nil when Apple sent none (then
    /// our own win-back rules decide). When set, a win-back offer of the group is eligible exactly when listed.
    public var appleWinBackOfferIds: [String]?
    /// The billing plan of the group's subscription per Apple's latest renewal info (`billingPlanType`); nil
    /// without one (recorded data carries no plan).
    public var billingPlan: BillingPlan?

    /// A history with no transactions.
    public static func never(groupId: String) -> GroupHistory {
        GroupHistory(
            groupId: groupId, state: .never, autoRenew: nil, activeProductId: nil, firstPurchaseDate: nil,
            lastExpiresDate: nil, lapsedAt: nil, paidMonths: 0, introOfferUsed: false, winBackRedemptions: [])
    }

    /// Creates a history from its parts (normally use ``CustomerHistory/derive(transactions:catalog:at:)``).
    public init(
        groupId: String, state: GroupState, autoRenew: Bool?, activeProductId: String?, firstPurchaseDate: Date?,
        lastExpiresDate: Date?, lapsedAt: Date?, paidMonths: Int, introOfferUsed: Bool,
        winBackRedemptions: [WinBackRedemption], source: HistorySource? = nil, environment: DataEnvironment? = nil,
        autoRenewProductId: String? = nil, appleWinBackOfferIds: [String]? = nil, billingPlan: BillingPlan? = nil
    ) {
        self.source = source
        self.environment = environment
        self.autoRenewProductId = autoRenewProductId
        self.appleWinBackOfferIds = appleWinBackOfferIds
        self.billingPlan = billingPlan
        self.groupId = groupId
        self.state = state
        self.autoRenew = autoRenew
        self.activeProductId = activeProductId
        self.firstPurchaseDate = firstPurchaseDate
        self.lastExpiresDate = lastExpiresDate
        self.lapsedAt = lapsedAt
        self.paidMonths = paidMonths
        self.introOfferUsed = introOfferUsed
        self.winBackRedemptions = winBackRedemptions
    }

    /// The promotional segment: `active` / `atRisk` (active with auto-renew off) / `billingRetry` (incl. grace
    /// period) / `lapsed` (expired or revoked); `nil` when `never`.
    public var segment: PromotionalAudience? {
        switch state {
        case .never: nil
        case .active: autoRenew == false ? .atRisk : .active
        case .billingRetry, .gracePeriod: .billingRetry
        case .expired, .revoked: .lapsed
        }
    }

    /// End of the latest redemption of a given win-back offer.
    public func lastRedemptionEnd(ofOffer offerId: String) -> Date? {
        winBackRedemptions.filter { $0.offerId == offerId }.map(\.endedAt).max()
    }
}

/// A customer's history in every group of a catalog, derived from transactions as of one instant.
public struct CustomerHistory: Sendable, Hashable, Codable {
    /// Apple retries billing for at most 60 days after expiry; a billing-retry flag older than that is stale (the
    /// app never recorded the outcome) and the customer counts as expired.
    public static let billingRetryLimit: TimeInterval = 60 * 86_400

    /// The instant the history describes.
    public var at: Date
    /// Per group id, for every group of the catalog.
    public var groups: [String: GroupHistory]
    /// Transactions ignored because their product is not in the catalog (ids, sorted).
    public var ignoredTransactionIds: [String]

    /// The history of a group (a `never` history for a group the catalog doesn't know).
    public func group(_ groupId: String) -> GroupHistory {
        groups[groupId] ?? .never(groupId: groupId)
    }

    /// Derives each group's history from recorded transactions, as of `at`.
    ///
    /// Transactions purchased after `at` and revocations dated after `at` are ignored, so the same inputs give
    /// the same answer whenever they are evaluated.
    public static func derive(transactions: [Transaction], catalog: Catalog, at: Date) -> CustomerHistory {
        var byGroup: [String: [Transaction]] = [:]
        var ignored: [String] = []
        if let groupId = soleGroup(of: transactions, catalog: catalog, at: at) {
            // The usual case (every transaction bought by `at`, in one group): the array as it is, not a copy.
            byGroup[groupId] = transactions
        } else {
            for transaction in transactions where transaction.purchaseDate <= at {
                guard let groupId = catalog.groupId(ofProduct: transaction.productId) else {
                    ignored.append(transaction.transactionId)
                    continue
                }
                byGroup[groupId, default: []].append(transaction)
            }
        }
        var groups: [String: GroupHistory] = [:]
        for group in catalog.groups {
            groups[group.id] = groupHistory(
                groupId: group.id, transactions: byGroup[group.id] ?? [], catalog: catalog, at: at)
        }
        return CustomerHistory(at: at, groups: groups, ignoredTransactionIds: ignored.sorted())
    }

    /// The one group every transaction belongs to, when each was bought by `at` and is of a product of that group
    /// (nil otherwise, and for none).
    private static func soleGroup(of transactions: [Transaction], catalog: Catalog, at: Date) -> String? {
        var sole: String?
        for transaction in transactions {
            guard transaction.purchaseDate <= at, let groupId = catalog.groupId(ofProduct: transaction.productId),
                sole == nil || sole == groupId
            else { return nil }
            sole = groupId
        }
        return sole
    }

    /// The order a group's transactions are read in: purchased, then expiring, earlier first; then by id.
    private static func precedes(_ lhs: Transaction, _ rhs: Transaction) -> Bool {
        if lhs.purchaseDate != rhs.purchaseDate { return lhs.purchaseDate < rhs.purchaseDate }
        if lhs.expiresDate != rhs.expiresDate { return lhs.expiresDate < rhs.expiresDate }
        return lhs.transactionId < rhs.transactionId
    }

    static func groupHistory(groupId: String, transactions: [Transaction], catalog: Catalog, at: Date)
        -> GroupHistory
    {
        // Stored transactions are read in purchase order, so usually in this order already: then not copied.
        let inOrder = zip(transactions, transactions.dropFirst()).allSatisfy { !precedes($1, $0) }
        let sorted = inOrder ? transactions : transactions.sorted(by: precedes)
        guard let latest = sorted.last, let first = sorted.first else { return .never(groupId: groupId) }

        // One pass: the transaction in effect at `at` that ends last (the first of equals, as `max` keeps it), the
        // latest effective end and the latest expiry.
        var current: Int?
        var currentEnd = Date.distantPast
        var lastEnd = Date.distantPast
        var lastExpires = Date.distantPast
        for (index, transaction) in sorted.enumerated() {
            let end = transaction.effectiveEnd(at: at)
            if transaction.purchaseDate <= at, at < end, current == nil || currentEnd < end {
                current = index
                currentEnd = end
            }
            lastEnd = max(lastEnd, end)
            lastExpires = max(lastExpires, transaction.expiresDate)
        }
        let state: GroupState
        if current != nil {
            state = .active
        } else if latest.isRevoked(at: at) {
            state = .revoked
        } else if let grace = latest.gracePeriodExpiresDate, grace > at {
            state = .gracePeriod
        } else if latest.inBillingRetry,
            at < latest.expiresDate.addingTimeInterval(CustomerHistory.billingRetryLimit)
        {
            state = .billingRetry
        } else {
            state = .expired
        }
        return GroupHistory(
            groupId: groupId, state: state, autoRenew: latest.autoRenew,
            activeProductId: current.map { sorted[$0].productId },
            firstPurchaseDate: first.purchaseDate, lastExpiresDate: lastExpires,
            lapsedAt: state.isLapsed ? lastEnd : nil,
            paidMonths: paidMonths(sorted, catalog: catalog, at: at),
            introOfferUsed: sorted.contains { $0.offerType == .introductory },
            winBackRedemptions: winBackRedemptions(sorted, at: at))
    }

    static func isFreeTrial(_ transaction: Transaction, catalog: Catalog) -> Bool {
        if let mode = transaction.offerPaymentMode { return mode == .freeTrial }
        guard transaction.offerType != nil, let offerId = transaction.offerId else { return false }
        return catalog.offer(offerId, product: transaction.productId)?.paymentMode == .freeTrial
    }

    /// Whole months paid for by `at`, over the union of the paid periods. `sorted` is in purchase order (as
    /// `groupHistory` orders them), so the periods come in the order of their starts and merge as they come: no
    /// arrays (this runs for every group of every customer's first answer).
    static func paidMonths(_ sorted: [Transaction], catalog: Catalog, at: Date) -> Int {
        var months = 0
        var merged: (start: Date, end: Date)?
        for transaction in sorted where !transaction.familyShared && !isFreeTrial(transaction, catalog: catalog) {
            let end = min(transaction.effectiveEnd(at: at), at)
            guard end > transaction.purchaseDate else { continue }
            if let last = merged, transaction.purchaseDate <= last.end {
                merged = (last.start, max(last.end, end))
            } else {
                if let last = merged { months += CalendarMonths.between(last.start, last.end) }
                merged = (transaction.purchaseDate, end)
            }
        }
        if let last = merged { months += CalendarMonths.between(last.start, last.end) }
        return months
    }

    static func winBackRedemptions(_ sorted: [Transaction], at: Date) -> [WinBackRedemption] {
        var result: [WinBackRedemption] = []
        for transaction in sorted where transaction.offerType == .winBack {
            guard let offerId = transaction.offerId else { continue }
            let end = transaction.effectiveEnd(at: at)
            if let last = result.last, last.offerId == offerId, transaction.purchaseDate <= last.endedAt {
                result[result.count - 1].endedAt = max(last.endedAt, end)
            } else {
                result.append(WinBackRedemption(offerId: offerId, startedAt: transaction.purchaseDate, endedAt: end))
            }
        }
        return result
    }
}
