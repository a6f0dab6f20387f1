import Foundation

// A customer's history from Apple's verified data (API.md §8), as plain values, and how it combines with recorded
// transactions (`subscriptions.record`). Verification and storage happen elsewhere; this is what decisions see.

/// The App Store environment a record came from (Apple's spelling as raw values).
public enum DataEnvironment: String, Sendable, Hashable, Codable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    case xcode = "Xcode"
    case localTesting = "LocalTesting"
}

/// One verified transaction, reduced to what decisions use.
public struct AppleTransactionFacts: Sendable, Hashable, Codable {
    public var transactionId: String
    public var originalTransactionId: String
    public var environment: DataEnvironment
    public var productId: String
    public var purchaseDate: Date
    /// Nil for purchases that do not expire (not subscriptions: ignored by decisions).
    public var expiresDate: Date?
    /// Apple's `offerType` as sent: 1-4 as `OfferType`, 5 a retention offer, later values kept as numbers.
    public var appleOfferType: Int?
    public var offerId: String?
    /// Apple's `offerDiscountType`, when it is one we know.
    public var offerPaymentMode: PaymentMode?
    /// `inAppOwnershipType == FAMILY_SHARED`: access through a family member, who paid.
    public var familyShared: Bool
    public var revocationDate: Date?
    public var signedDate: Date

    public init(
        transactionId: String, originalTransactionId: String, environment: DataEnvironment, productId: String,
        purchaseDate: Date, expiresDate: Date?, appleOfferType: Int? = nil, offerId: String? = nil,
        offerPaymentMode: PaymentMode? = nil, familyShared: Bool = false, revocationDate: Date? = nil,
        signedDate: Date
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.environment = environment
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.appleOfferType = appleOfferType
        self.offerId = offerId
        self.offerPaymentMode = offerPaymentMode
        self.familyShared = familyShared
        self.revocationDate = revocationDate
        self.signedDate = signedDate
    }
}

/// The latest verified renewal info of one subscription chain in one environment.
public struct AppleRenewalFacts: Sendable, Hashable, Codable {
    public var originalTransactionId: String
    public var environment: DataEnvironment
    public var productId: String?
    public var autoRenewProductId: String?
    /// Apple's `autoRenewStatus`: 1 on, 0 off; nil when absent (taken as on).
    public var autoRenewStatus: Int?
    public var inBillingRetry: Bool
    public var gracePeriodExpiresDate: Date?
    /// Nil when Apple sent no list; otherwise Apple's verdict on win-back offers, best first.
    public var eligibleWinBackOfferIds: [String]?
    /// Apple's `billingPlanType` (the plan the chain renews on); nil when absent or a value we do not know.
    public var billingPlan: BillingPlan?
    public var signedDate: Date

    public init(
        originalTransactionId: String, environment: DataEnvironment, productId: String? = nil,
        autoRenewProductId: String? = nil, autoRenewStatus: Int? = nil, inBillingRetry: Bool = false,
        gracePeriodExpiresDate: Date? = nil, eligibleWinBackOfferIds: [String]? = nil,
        billingPlan: BillingPlan? = nil, signedDate: Date
    ) {
        self.originalTransactionId = originalTransactionId
        self.environment = environment
        self.productId = productId
        self.autoRenewProductId = autoRenewProductId
        self.autoRenewStatus = autoRenewStatus
        self.inBillingRetry = inBillingRetry
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.eligibleWinBackOfferIds = eligibleWinBackOfferIds
        self.billingPlan = billingPlan
        self.signedDate = signedDate
    }
}

/// Which non-Production environments a tenant lets decisions use (when a customer has no Production data).
public struct EnvironmentPolicy: Sendable, Hashable, Codable {
    public var allowSandbox: Bool
    public var allowXcode: Bool

    public init(allowSandbox: Bool = false, allowXcode: Bool = false) {
        self.allowSandbox = allowSandbox
        self.allowXcode = allowXcode
    }

    /// Production only.
    public static let productionOnly = EnvironmentPolicy()
}

/// Where a group's history came from (`customers.get` `source`).
public enum HistorySource: String, Sendable, Hashable, Codable {
    case apple
    case recorded
    case mixed
}

/// Everything stored about one customer: recorded transactions and Apple's verified data.
public struct CustomerRecords: Sendable, Hashable, Codable {
    public var recorded: [Transaction]
    public var appleTransactions: [AppleTransactionFacts]
    public var appleRenewals: [AppleRenewalFacts]

    public init(
        recorded: [Transaction], appleTransactions: [AppleTransactionFacts] = [],
        appleRenewals: [AppleRenewalFacts] = []
    ) {
        self.recorded = recorded
        self.appleTransactions = appleTransactions
        self.appleRenewals = appleRenewals
    }

    /// The environment whose Apple data decisions use: Production when the customer has any Production data
    /// (recorded transactions count as Production: they are what the app's backend reports from the live store);
    /// otherwise Sandbox, then Xcode/LocalTesting, each only when the tenant allows it and the customer has some.
    public func environment(_ policy: EnvironmentPolicy) -> DataEnvironment {
        let present = Set(appleTransactions.map(\.environment)).union(appleRenewals.map(\.environment))
        if present.contains(.production) || !recorded.isEmpty || present.isEmpty { return .production }
        if policy.allowSandbox, present.contains(.sandbox) { return .sandbox }
        if policy.allowXcode {
            if present.contains(.xcode) { return .xcode }
            if present.contains(.localTesting) { return .localTesting }
        }
        return .production
    }

    /// The transactions decisions see under `policy`: Apple's transactions of the chosen environment (with each
    /// chain's renewal info applied to its latest transaction), plus recorded transactions Apple did not report
    /// (a recorded transaction with the id of an Apple one, in any environment, is superseded by it).
    public func effective(_ policy: EnvironmentPolicy) -> EffectiveRecords {
        let environment = environment(policy)
        // Nothing from Apple (a tenant whose backend reports transactions itself): the recorded ones as they are,
        // without copying each on the way.
        if appleTransactions.isEmpty, appleRenewals.isEmpty {
            return EffectiveRecords(
                transactions: recorded, appleTransactionIds: [], environment: environment, renewals: [])
        }
        let renewals = Dictionary(
            appleRenewals.filter { $0.environment == environment }.map { ($0.originalTransactionId, $0) },
            uniquingKeysWith: { $0.signedDate >= $1.signedDate ? $0 : $1 })
        let apple = appleTransactions.filter { $0.environment == environment && $0.expiresDate != nil }
        var latestOfChain: [String: AppleTransactionFacts] = [:]
        for t in apple {
            if let known = latestOfChain[t.originalTransactionId],
                (known.purchaseDate, known.transactionId) >= (t.purchaseDate, t.transactionId)
            {
                continue
            }
            latestOfChain[t.originalTransactionId] = t
        }
        var transactions: [Transaction] = []
        transactions.reserveCapacity(apple.count + recorded.count)
        var appleIds: Set<String> = []
        for t in apple {
            guard let expires = t.expiresDate else { continue }
            let renewal =
                latestOfChain[t.originalTransactionId]?.transactionId == t.transactionId
                ? renewals[t.originalTransactionId] : nil
            transactions.append(
                Transaction(
                    transactionId: t.transactionId, originalTransactionId: t.originalTransactionId,
                    productId: t.productId, purchaseDate: t.purchaseDate, expiresDate: max(expires, t.purchaseDate),
                    offerType: t.appleOfferType.flatMap(OfferType.init(appleNumber:)), offerId: t.offerId,
                    offerPaymentMode: t.offerPaymentMode, autoRenew: renewal.map { $0.autoRenewStatus != 0 } ?? true,
                    inBillingRetry: renewal?.inBillingRetry ?? false,
                    gracePeriodExpiresDate: renewal?.gracePeriodExpiresDate, revocationDate: t.revocationDate,
                    familyShared: t.familyShared))
            appleIds.insert(t.transactionId)
        }
        let superseded = Set(appleTransactions.map(\.transactionId))
        for t in recorded where !superseded.contains(t.transactionId) { transactions.append(t) }
        return EffectiveRecords(
            transactions: transactions, appleTransactionIds: appleIds, environment: environment,
            renewals: Array(renewals.values))
    }
}

/// What ``CustomerRecords/effective(_:)`` chose: the transactions decisions see, and the renewal infos used.
public struct EffectiveRecords: Sendable, Hashable {
    public var transactions: [Transaction]
    /// Which of `transactions` came from Apple.
    public var appleTransactionIds: Set<String>
    public var environment: DataEnvironment
    public var renewals: [AppleRenewalFacts]
}

extension CustomerHistory {
    /// Derives each group's history from everything stored about the customer, as of `at`: the transactions of
    /// ``CustomerRecords/effective(_:)`` as ``derive(transactions:catalog:at:)`` does, plus per group where the
    /// history came from, the environment of its Apple data, and its latest renewal info's auto-renew product and
    /// win-back list. Renewal infos are Apple's current word (they are not replayed as of `at`).
    public static func derive(
        records: CustomerRecords, policy: EnvironmentPolicy, catalog: Catalog, at: Date
    ) -> CustomerHistory {
        derive(effective: records.effective(policy), catalog: catalog, at: at)
    }

    /// ``derive(records:policy:catalog:at:)`` over records already resolved under a policy (a caller that also
    /// needs the effective transactions, e.g. for ``DecisionHorizon``, resolves them once).
    public static func derive(effective: EffectiveRecords, catalog: Catalog, at: Date) -> CustomerHistory {
        var history = derive(transactions: effective.transactions, catalog: catalog, at: at)
        var fromApple: Set<String> = []
        var fromRecorded: Set<String> = []
        for t in effective.transactions where t.purchaseDate <= at {
            guard let groupId = catalog.groupId(ofProduct: t.productId) else { continue }
            if effective.appleTransactionIds.contains(t.transactionId) {
                fromApple.insert(groupId)
            } else {
                fromRecorded.insert(groupId)
            }
        }
        var latestRenewal: [String: AppleRenewalFacts] = [:]
        for renewal in effective.renewals {
            let groupId =
                renewal.productId.flatMap(catalog.groupId(ofProduct:))
                ?? renewal.autoRenewProductId.flatMap(catalog.groupId(ofProduct:))
            guard let groupId else { continue }
            if let known = latestRenewal[groupId], known.signedDate >= renewal.signedDate { continue }
            latestRenewal[groupId] = renewal
        }
        // In place, by index: a `for … in history.groups` loop holds the dictionary while it writes it, which copied
        // the whole dictionary once per customer.
        var index = history.groups.startIndex
        while index != history.groups.endIndex {
            defer { history.groups.formIndex(after: &index) }
            let groupId = history.groups.keys[index]
            var group = history.groups.values[index]
            switch (fromApple.contains(groupId), fromRecorded.contains(groupId)) {
            case (true, true): group.source = .mixed
            case (true, false): group.source = .apple
            case (false, true): group.source = .recorded
            case (false, false): group.source = nil
            }
            if fromApple.contains(groupId) || latestRenewal[groupId] != nil {
                group.environment = effective.environment
            }
            if let renewal = latestRenewal[groupId] {
                group.autoRenewProductId = renewal.autoRenewProductId
                group.appleWinBackOfferIds = renewal.eligibleWinBackOfferIds
                group.billingPlan = renewal.billingPlan
            }
            history.groups.values[index] = group
        }
        return history
    }
}
