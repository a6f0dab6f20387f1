import Foundation
import OfferDomain
import Postgres

/// A verified transaction to store: the facts decisions use, the rest of what Apple said, and the raw JWS.
public struct StoredAppleTransaction: Sendable, Hashable {
    public var facts: AppleTransactionFacts
    /// Lowercased.
    public var appAccountToken: String?
    public var subscriptionGroupId: String?
    public var originalPurchaseDate: Date?
    public var offerDiscountType: String?
    public var offerPeriod: String?
    public var inAppOwnershipType: String?
    public var revocationReason: Int32?
    public var revocationType: String?
    public var transactionType: String?
    /// False for Xcode/LocalTesting data, which Apple does not sign.
    public var verifiedByApple: Bool
    public var jws: String

    public init(
        facts: AppleTransactionFacts, appAccountToken: String?, subscriptionGroupId: String?,
        originalPurchaseDate: Date?, offerDiscountType: String?, offerPeriod: String?, inAppOwnershipType: String?,
        revocationReason: Int32?, revocationType: String?, transactionType: String?, verifiedByApple: Bool,
        jws: String
    ) {
        self.facts = facts
        self.appAccountToken = appAccountToken
        self.subscriptionGroupId = subscriptionGroupId
        self.originalPurchaseDate = originalPurchaseDate
        self.offerDiscountType = offerDiscountType
        self.offerPeriod = offerPeriod
        self.inAppOwnershipType = inAppOwnershipType
        self.revocationReason = revocationReason
        self.revocationType = revocationType
        self.transactionType = transactionType
        self.verifiedByApple = verifiedByApple
        self.jws = jws
    }
}

/// A verified renewal info to store.
public struct StoredAppleRenewal: Sendable, Hashable {
    public var facts: AppleRenewalFacts
    /// Lowercased.
    public var appAccountToken: String?
    public var expirationIntent: Int32?
    public var renewalDate: Date?
    public var verifiedByApple: Bool
    public var jws: String

    public init(
        facts: AppleRenewalFacts, appAccountToken: String?, expirationIntent: Int32?, renewalDate: Date?,
        verifiedByApple: Bool, jws: String
    ) {
        self.facts = facts
        self.appAccountToken = appAccountToken
        self.expirationIntent = expirationIntent
        self.renewalDate = renewalDate
        self.verifiedByApple = verifiedByApple
        self.jws = jws
    }
}

/// A verified notification to store (its nested data goes in the batch's transactions and renewals).
public struct StoredAppleNotification: Sendable, Hashable {
    public var notificationUUID: UUID
    public var notificationType: String
    public var subtype: String?
    public var environment: DataEnvironment
    public var signedDate: Date
    public var jws: String

    public init(
        notificationUUID: UUID, notificationType: String, subtype: String?, environment: DataEnvironment,
        signedDate: Date, jws: String
    ) {
        self.notificationUUID = notificationUUID
        self.notificationType = notificationType
        self.subtype = subtype
        self.environment = environment
        self.signedDate = signedDate
        self.jws = jws
    }
}

/// What one call stores, atomically.
public struct AppleIngestBatch: Sendable, Hashable {
    public var notification: StoredAppleNotification?
    public var transactions: [StoredAppleTransaction]
    public var renewals: [StoredAppleRenewal]
    /// Links every chain of the batch without an `appAccountToken` to this customer (appstore.transactions).
    public var customerId: String?

    public init(
        notification: StoredAppleNotification? = nil, transactions: [StoredAppleTransaction] = [],
        renewals: [StoredAppleRenewal] = [], customerId: String? = nil
    ) {
        self.notification = notification
        self.transactions = transactions
        self.renewals = renewals
        self.customerId = customerId
    }
}

extension AppleIngestBatch {
    /// The subscription chains its records belong to, each once, sorted: the order every writer locks them in.
    var chains: [String] {
        Set(transactions.map(\.facts.originalTransactionId)).union(renewals.map(\.facts.originalTransactionId)).sorted()
    }
}

/// What an ingestion changed.
public struct AppleIngestOutcome: Sendable, Hashable {
    /// The notification was stored already: nothing was changed.
    public var duplicateNotification: Bool
    /// Records (transactions and renewal infos) stored or moved forward.
    public var applied: Int
    /// Records that changed nothing (the same or newer data was stored already).
    public var duplicates: Int
    /// The customers the batch's records belong to, sorted; records without one are kept unlinked.
    public var customers: [String]
}

/// Apple's verified data (migration 0003): transactions, renewal infos, notifications and customer links.
///
/// Every write to one subscription chain (`originalTransactionId`) takes a transaction-scoped advisory lock on
/// (tenant, chain), in a fixed order, so a link and data arriving for the same chain at once never leave data
/// unlinked. Renewal infos and transactions only move forward by their own `signedDate`.
public struct AppleDataRepository: Sendable {
    let pool: PostgresPool

    /// Stores a batch in one database transaction. A notification already stored makes the whole call a
    /// duplicate (nothing written). Throws `.conflict` when `batch.customerId` would move a chain linked to
    /// another customer.
    public func ingest(tenant: UUID, _ batch: AppleIngestBatch) async throws(StoreError) -> AppleIngestOutcome {
        try await storeCall {
            try await pool.withTransaction { tx in
                try await Self.ingest(tx, tenant: tenant, batch)
            }
        }
    }

    private static func ingest(_ tx: PostgresTransaction, tenant: UUID, _ batch: AppleIngestBatch) async throws
        -> AppleIngestOutcome
    {
        // The chains' locks (in order) and the notification's row, pipelined: one round trip, run in this order. A
        // retry, and records older than those stored, are answered from what is stored: the commit waits for the
        // standby even if nothing is new.
        var opening: [PostgresQuery] = [.waitForStandbyAtCommit]
        opening += batch.chains.map { lockQuery(tenant: tenant, chain: $0) }
        if let n = batch.notification { opening.append(insertQuery(tenant: tenant, n, batch: batch)) }
        let opened = try await tx.pipeline(opening).map { try $0.get() }
        if let n = batch.notification, opened.last?.isEmpty == true {
            // A retry of a notification applied before answers with the customer it reached then.
            let stored = try await tx.query(
                """
                SELECT customer_id FROM apple_notifications
                WHERE tenant_id = \(tenant) AND notification_uuid = \(n.notificationUUID)
                """
            ).first.flatMap { try $0.decode(String?.self, at: 0) }
            return AppleIngestOutcome(
                duplicateNotification: true, applied: 0, duplicates: 0, customers: stored.map { [$0] } ?? [])
        }
        return try await apply(tx, tenant: tenant, batch)
    }

    /// A batch's records, once its chains are locked and its notification (if any) is stored as new: links, the
    /// records' upserts, the notification's customer, attribution.
    static func apply(_ tx: PostgresTransaction, tenant: UUID, _ batch: AppleIngestBatch) async throws
        -> AppleIngestOutcome
    {
        if let customerOfChain = tokenCustomers(batch) {
            return try await ingestTokened(tx, tenant: tenant, batch, customerOfChain: customerOfChain)
        }
        var customerOfChain: [String: String] = [:]
        if let customerId = batch.customerId {
            for chain in batch.chains
            where !batch.transactions.contains(where: {
                $0.facts.originalTransactionId == chain && $0.appAccountToken != nil
            }) {
                _ = try await link(tx, tenant: tenant, chain: chain, customerId: customerId)
                customerOfChain[chain] = customerId
            }
        }
        var applied = 0
        var duplicates = 0
        var customers: Set<String> = []
        for t in batch.transactions {
            let chain = t.facts.originalTransactionId
            var customer = t.appAccountToken
            if let token = customer {
                try await linkByToken(tx, tenant: tenant, chain: chain, token: token)
            } else if let known = customerOfChain[chain] {
                customer = known
            } else {
                customer = try await linkedCustomer(tx, tenant: tenant, chain: chain)
            }
            if let customer { customerOfChain[chain] = customer }
            if let customer { customers.insert(customer) }
            if try await upsert(tx, tenant: tenant, t, customer: customer) { applied += 1 } else { duplicates += 1 }
        }
        for r in batch.renewals {
            let chain = r.facts.originalTransactionId
            var customer = customerOfChain[chain]
            if customer == nil { customer = try await linkedCustomer(tx, tenant: tenant, chain: chain) }
            if customer == nil, let token = r.appAccountToken {
                customer = token
                try await linkByToken(tx, tenant: tenant, chain: chain, token: token)
            }
            if let customer { customers.insert(customer) }
            if try await upsert(tx, tenant: tenant, r, customer: customer) { applied += 1 } else { duplicates += 1 }
        }
        if let n = batch.notification, let customer = customers.sorted().first {
            try await tx.query(notificationCustomerQuery(tenant: tenant, n, customer: customer))
        }
        try await attribute(tx, tenant: tenant, transactionIds: batch.transactions.map(\.facts.transactionId))
        return AppleIngestOutcome(
            duplicateNotification: false, applied: applied, duplicates: duplicates, customers: customers.sorted())
    }

    /// When every record's customer follows from the batch alone (no `customerId` to link; every transaction
    /// carries its `appAccountToken`; every renewal info's chain has such a transaction in the batch: a
    /// notification's usual shape), the customer of each chain exactly as the sequential path finds it (the token of
    /// the chain's last transaction); else nil.
    static func tokenCustomers(_ batch: AppleIngestBatch) -> [String: String]? {
        guard batch.customerId == nil else { return nil }
        var customerOfChain: [String: String] = [:]
        for t in batch.transactions {
            guard let token = t.appAccountToken else { return nil }
            customerOfChain[t.facts.originalTransactionId] = token
        }
        for r in batch.renewals where customerOfChain[r.facts.originalTransactionId] == nil { return nil }
        return customerOfChain
    }

    /// The sequential path's steps for a batch whose customers are known (``tokenCustomers(_:)``), in two pipelined
    /// round trips instead of one per statement: every token's link (a new link then adopts its chain's unlinked
    /// records, before anything is stored, as the sequential path does), then every upsert and the notification's
    /// customer. The statements and their order per record are the sequential path's; only the waits between
    /// them go.
    private static func ingestTokened(
        _ tx: PostgresTransaction, tenant: UUID, _ batch: AppleIngestBatch, customerOfChain: [String: String]
    ) async throws -> AppleIngestOutcome {
        let tokens = batch.transactions.compactMap(\.appAccountToken)
        let linking = zip(batch.transactions, tokens).map {
            linkQuery(tenant: tenant, chain: $0.0.facts.originalTransactionId, customerId: $0.1)
        }
        let links = linking.isEmpty ? [] : try await tx.pipeline(linking)
        for ((t, token), result) in zip(zip(batch.transactions, tokens), links) where try !result.get().isEmpty {
            _ = try await adopt(tx, tenant: tenant, chain: t.facts.originalTransactionId, customerId: token)
        }
        var writes = zip(batch.transactions, tokens).map { upsertQuery(tenant: tenant, $0.0, customer: $0.1) }
        writes += batch.renewals.map {
            upsertQuery(tenant: tenant, $0, customer: customerOfChain[$0.facts.originalTransactionId])
        }
        let customers = Set(tokens).sorted()
        if let n = batch.notification, let customer = customers.first {
            writes.append(notificationCustomerQuery(tenant: tenant, n, customer: customer))
        }
        let written = writes.isEmpty ? [] : try await tx.pipeline(writes).map { try $0.get() }
        let records = batch.transactions.count + batch.renewals.count
        let applied = written.prefix(records).filter { !$0.isEmpty }.count
        // What the purchases used is marked in the same transaction, as on the sequential path.
        try await attribute(tx, tenant: tenant, transactionIds: batch.transactions.map(\.facts.transactionId))
        return AppleIngestOutcome(
            duplicateNotification: false, applied: applied, duplicates: records - applied, customers: customers)
    }

    static func insertQuery(tenant: UUID, _ n: StoredAppleNotification, batch: AppleIngestBatch) -> PostgresQuery {
        let first = batch.transactions.first?.facts
        return """
            INSERT INTO apple_notifications
                (tenant_id, notification_uuid, notification_type, subtype, environment, transaction_id,
                 original_transaction_id, signed_date, jws)
            VALUES (\(tenant), \(n.notificationUUID), \(n.notificationType), \(n.subtype),
                    \(n.environment.rawValue), \(first?.transactionId),
                    \(first?.originalTransactionId ?? batch.renewals.first?.facts.originalTransactionId),
                    \(n.signedDate), \(n.jws))
            ON CONFLICT (tenant_id, notification_uuid) DO NOTHING
            RETURNING 1
            """
    }

    static func notificationCustomerQuery(tenant: UUID, _ n: StoredAppleNotification, customer: String)
        -> PostgresQuery
    {
        """
        UPDATE apple_notifications SET customer_id = \(customer)
        WHERE tenant_id = \(tenant) AND notification_uuid = \(n.notificationUUID)
        """
    }

    /// Links a subscription chain to a customer and gives them the chain's unlinked data; returns how many records
    /// it gave. Linking a chain to the customer it is linked to already changes nothing. Throws `.conflict` when
    /// the chain is linked to another customer.
    public func link(tenant: UUID, originalTransactionId: String, customerId: String) async throws(StoreError)
        -> Int
    {
        try await storeCall {
            try await pool.withTransaction { tx in
                try await Self.lock(tx, tenant: tenant, chain: originalTransactionId)
                return try await Self.link(tx, tenant: tenant, chain: originalTransactionId, customerId: customerId)
            }
        }
    }

    private static func link(_ tx: PostgresTransaction, tenant: UUID, chain: String, customerId: String) async throws
        -> Int
    {
        if let existing = try await linkedCustomer(tx, tenant: tenant, chain: chain), existing != customerId {
            throw StoreError.conflict("originalTransactionId is linked to another customer")
        }
        try await tx.query(linkQuery(tenant: tenant, chain: chain, customerId: customerId))
        return try await adopt(tx, tenant: tenant, chain: chain, customerId: customerId)
    }

    /// A transaction's `appAccountToken` links its chain when the chain has no link yet; the chain's data kept
    /// unlinked so far (history without a token, a renewal info that came first) is then the token's customer's.
    private static func linkByToken(_ tx: PostgresTransaction, tenant: UUID, chain: String, token: String)
        async throws
    {
        let inserted = try await tx.query(linkQuery(tenant: tenant, chain: chain, customerId: token))
        if inserted.count > 0 { _ = try await adopt(tx, tenant: tenant, chain: chain, customerId: token) }
    }

    /// Links `chain` to `customerId` unless it is linked already; a row comes back when it linked.
    static func linkQuery(tenant: UUID, chain: String, customerId: String) -> PostgresQuery {
        """
        INSERT INTO customer_links (tenant_id, original_transaction_id, customer_id)
        VALUES (\(tenant), \(chain), \(customerId)) ON CONFLICT DO NOTHING RETURNING 1
        """
    }

    /// Gives a chain's unlinked records to its customer; returns how many.
    private static func adopt(_ tx: PostgresTransaction, tenant: UUID, chain: String, customerId: String)
        async throws -> Int
    {
        let queries = adoptQueries(tenant: tenant, chains: [chain], customers: [customerId])
        let transactions = try await tx.query(queries[0])
        // Purchases kept unlinked so far are attributed now that their customer is known.
        try await attribute(
            tx, tenant: tenant, transactionIds: try transactions.map { try $0.decode(String.self, at: 0) })
        let renewals = try await tx.query(queries[1])
        return transactions.count + renewals.count
    }

    /// Adoption's two statements for chains newly linked (each chain once, with its customer at the same index):
    /// their unlinked transactions (the ids come back), then their renewal infos.
    static func adoptQueries(tenant: UUID, chains: [String], customers: [String]) -> [PostgresQuery] {
        [
            """
            UPDATE apple_transactions AS t SET customer_id = l.customer
            FROM unnest(\(chains)::text[], \(customers)::text[]) AS l(chain, customer)
            WHERE t.tenant_id = \(tenant) AND t.original_transaction_id = l.chain AND t.customer_id IS NULL
                AND t.app_account_token IS NULL
            RETURNING t.transaction_id
            """,
            """
            UPDATE apple_renewal_infos AS r SET customer_id = l.customer
            FROM unnest(\(chains)::text[], \(customers)::text[]) AS l(chain, customer)
            WHERE r.tenant_id = \(tenant) AND r.original_transaction_id = l.chain AND r.customer_id IS NULL
            RETURNING 1
            """,
        ]
    }

    private static func lock(_ tx: PostgresTransaction, tenant: UUID, chain: String) async throws {
        try await tx.query(lockQuery(tenant: tenant, chain: chain))
    }

    /// The lock every write to one subscription chain takes first (held to the end of the transaction).
    static func lockQuery(tenant: UUID, chain: String) -> PostgresQuery {
        "SELECT pg_advisory_xact_lock(hashtextextended(\(lockKey(tenant: tenant, chain: chain)), 0))"
    }

    /// The key of a chain's lock (hashed by `hashtextextended`). Writers lock their chains sorted by chain.
    static func lockKey(tenant: UUID, chain: String) -> String {
        "apple-chain:" + tenant.uuidString.lowercased() + ":" + chain
    }

    private static func linkedCustomer(_ tx: PostgresTransaction, tenant: UUID, chain: String) async throws
        -> String?
    {
        try await tx.query(
            """
            SELECT customer_id FROM customer_links WHERE tenant_id = \(tenant) AND original_transaction_id = \(chain)
            """
        ).first.map { try $0.decode(String.self, at: 0) }
    }

    /// Stores a transaction unless one with a later or equal `signedDate` is stored; whether it changed anything.
    private static func upsert(_ tx: PostgresTransaction, tenant: UUID, _ t: StoredAppleTransaction, customer: String?)
        async throws -> Bool
    {
        !(try await tx.query(upsertQuery(tenant: tenant, t, customer: customer))).isEmpty
    }

    /// The upsert of a transaction: a row comes back when it changed anything.
    static func upsertQuery(tenant: UUID, _ t: StoredAppleTransaction, customer: String?) -> PostgresQuery {
        let f = t.facts
        return
            """
            INSERT INTO apple_transactions AS old
                (tenant_id, transaction_id, original_transaction_id, environment, customer_id, app_account_token,
                 product_id, subscription_group_id, purchase_date, original_purchase_date, expires_date, offer_type,
                 offer_id, offer_discount_type, offer_period, in_app_ownership_type, revocation_date,
                 revocation_reason, revocation_type, transaction_type, signed_date, authenticity, jws)
            VALUES (\(tenant), \(f.transactionId), \(f.originalTransactionId), \(f.environment.rawValue), \(customer),
                    \(t.appAccountToken), \(f.productId), \(t.subscriptionGroupId), \(f.purchaseDate),
                    \(t.originalPurchaseDate), \(f.expiresDate), \(f.appleOfferType.map { Int32(clamping: $0) }),
                    \(f.offerId), \(t.offerDiscountType), \(t.offerPeriod), \(t.inAppOwnershipType),
                    \(f.revocationDate), \(t.revocationReason), \(t.revocationType), \(t.transactionType),
                    \(f.signedDate), \(t.verifiedByApple ? "verifiedChain" : "unverifiedDevelopmentData"), \(t.jws))
            \(query: .unsafeRaw(transactionConflict))
            """
    }

    /// Stores a renewal info unless one with a later or equal `signedDate` is stored for its chain and environment.
    private static func upsert(_ tx: PostgresTransaction, tenant: UUID, _ r: StoredAppleRenewal, customer: String?)
        async throws -> Bool
    {
        !(try await tx.query(upsertQuery(tenant: tenant, r, customer: customer))).isEmpty
    }

    /// The upsert of a renewal info: a row comes back when it changed anything.
    static func upsertQuery(tenant: UUID, _ r: StoredAppleRenewal, customer: String?) -> PostgresQuery {
        let f = r.facts
        return
            """
            INSERT INTO apple_renewal_infos AS old
                (tenant_id, original_transaction_id, environment, customer_id, product_id, auto_renew_product_id,
                 auto_renew_status, is_in_billing_retry, grace_period_expires_date, expiration_intent, renewal_date,
                 eligible_win_back_offer_ids, billing_plan, signed_date, authenticity, jws)
            VALUES (\(tenant), \(f.originalTransactionId), \(f.environment.rawValue), \(customer), \(f.productId),
                    \(f.autoRenewProductId), \(f.autoRenewStatus.map { Int32(clamping: $0) }), \(f.inBillingRetry),
                    \(f.gracePeriodExpiresDate), \(r.expirationIntent), \(r.renewalDate), \(f.eligibleWinBackOfferIds),
                    \(f.billingPlan?.rawValue), \(f.signedDate), \(r.verifiedByApple ? "verifiedChain" : "unverifiedDevelopmentData"), \(r.jws))
            \(query: .unsafeRaw(renewalConflict))
            """
    }

    /// What a transaction's upsert does on an existing row (single and multi-row forms): it moves forward only by
    /// its own `signedDate`, or fills in a customer at the same `signedDate`. A row comes back when it changed.
    static let transactionConflict = """
        ON CONFLICT (tenant_id, transaction_id) DO UPDATE SET
            original_transaction_id = EXCLUDED.original_transaction_id, environment = EXCLUDED.environment,
            customer_id = COALESCE(EXCLUDED.customer_id, old.customer_id),
            app_account_token = EXCLUDED.app_account_token, product_id = EXCLUDED.product_id,
            subscription_group_id = EXCLUDED.subscription_group_id, purchase_date = EXCLUDED.purchase_date,
            original_purchase_date = EXCLUDED.original_purchase_date, expires_date = EXCLUDED.expires_date,
            offer_type = EXCLUDED.offer_type, offer_id = EXCLUDED.offer_id,
            offer_discount_type = EXCLUDED.offer_discount_type, offer_period = EXCLUDED.offer_period,
            in_app_ownership_type = EXCLUDED.in_app_ownership_type, revocation_date = EXCLUDED.revocation_date,
            revocation_reason = EXCLUDED.revocation_reason, revocation_type = EXCLUDED.revocation_type,
            transaction_type = EXCLUDED.transaction_type, signed_date = EXCLUDED.signed_date,
            authenticity = EXCLUDED.authenticity, jws = EXCLUDED.jws, received_at = now()
        WHERE old.signed_date < EXCLUDED.signed_date
            OR (old.customer_id IS NULL AND EXCLUDED.customer_id IS NOT NULL
                AND old.signed_date = EXCLUDED.signed_date)
        RETURNING old.transaction_id
        """

    /// What a renewal info's upsert does on an existing row (as `transactionConflict`).
    static let renewalConflict = """
        ON CONFLICT (tenant_id, original_transaction_id, environment) DO UPDATE SET
            customer_id = COALESCE(EXCLUDED.customer_id, old.customer_id), product_id = EXCLUDED.product_id,
            auto_renew_product_id = EXCLUDED.auto_renew_product_id,
            auto_renew_status = EXCLUDED.auto_renew_status, is_in_billing_retry = EXCLUDED.is_in_billing_retry,
            grace_period_expires_date = EXCLUDED.grace_period_expires_date,
            expiration_intent = EXCLUDED.expiration_intent, renewal_date = EXCLUDED.renewal_date,
            eligible_win_back_offer_ids = EXCLUDED.eligible_win_back_offer_ids,
            billing_plan = EXCLUDED.billing_plan,
            signed_date = EXCLUDED.signed_date, authenticity = EXCLUDED.authenticity, jws = EXCLUDED.jws,
            received_at = now()
        WHERE old.signed_date < EXCLUDED.signed_date
            OR (old.customer_id IS NULL AND EXCLUDED.customer_id IS NOT NULL
                AND old.signed_date = EXCLUDED.signed_date)
        RETURNING old.original_transaction_id, old.environment
        """

    /// The columns `transactionFacts(_:)` decodes, in order.
    static let transactionColumns = """
        transaction_id, original_transaction_id, environment, product_id, purchase_date, expires_date, offer_type,
        offer_id, offer_discount_type, in_app_ownership_type, revocation_date, signed_date
        """

    /// A verified transaction's facts from a row that starts with `transactionColumns`.
    static func transactionFacts(_ row: PostgresRow) throws -> AppleTransactionFacts {
        let (id, original, environment, product, purchase, expires, offerType) = try row.decode(
            String.self, String.self, String.self, String.self, Date.self, Date?.self, Int32?.self)
        let (offerId, discount, ownership, revoked, signed) = (
            try row.decode(String?.self, at: 7), try row.decode(String?.self, at: 8),
            try row.decode(String?.self, at: 9), try row.decode(Date?.self, at: 10),
            try row.decode(Date.self, at: 11)
        )
        return AppleTransactionFacts(
            transactionId: id, originalTransactionId: original, environment: try Self.environment(environment),
            productId: product, purchaseDate: purchase, expiresDate: expires, appleOfferType: offerType.map(Int.init),
            offerId: offerId, offerPaymentMode: discount.flatMap(PaymentMode.init(appleDiscountType:)),
            familyShared: ownership == "FAMILY_SHARED", revocationDate: revoked, signedDate: signed)
    }

    /// The columns `renewalFacts(_:)` decodes, in order.
    static let renewalColumns = """
        original_transaction_id, environment, product_id, auto_renew_product_id, auto_renew_status,
        is_in_billing_retry, grace_period_expires_date, eligible_win_back_offer_ids, signed_date, billing_plan
        """

    /// A verified renewal info's facts from a row that starts with `renewalColumns`.
    static func renewalFacts(_ row: PostgresRow) throws -> AppleRenewalFacts {
        let (original, environment, product, autoRenewProduct, status, retry, grace) = try row.decode(
            String.self, String.self, String?.self, String?.self, Int32?.self, Bool?.self, Date?.self)
        let (winBack, signed) = (try row.decode([String]?.self, at: 7), try row.decode(Date.self, at: 8))
        let plan = try row.decode(String?.self, at: 9).flatMap(BillingPlan.init(rawValue:))
        return AppleRenewalFacts(
            originalTransactionId: original, environment: try Self.environment(environment), productId: product,
            autoRenewProductId: autoRenewProduct, autoRenewStatus: status.map(Int.init), inBillingRetry: retry ?? false,
            gracePeriodExpiresDate: grace, eligibleWinBackOfferIds: winBack, billingPlan: plan, signedDate: signed)
    }

    /// How many records of each kind the tenant has stored (for operators and tests).
    public func counts(tenant: UUID) async throws(StoreError)
        -> (transactions: Int, renewals: Int, notifications: Int, links: Int)
    {
        try await storeCall {
            let row = try await pool.query(
                """
                SELECT (SELECT count(*) FROM apple_transactions WHERE tenant_id = \(tenant)),
                       (SELECT count(*) FROM apple_renewal_infos WHERE tenant_id = \(tenant)),
                       (SELECT count(*) FROM apple_notifications WHERE tenant_id = \(tenant)),
                       (SELECT count(*) FROM customer_links WHERE tenant_id = \(tenant))
                """)
            guard let row = row.first else { throw StoreError.corrupt("count returned no row") }
            let (a, b, c, d) = try row.decode(Int64.self, Int64.self, Int64.self, Int64.self)
            return (Int(a), Int(b), Int(c), Int(d))
        }
    }

    private static func environment(_ text: String) throws -> DataEnvironment {
        guard let environment = DataEnvironment(rawValue: text) else {
            throw StoreError.corrupt("unknown environment in apple data")
        }
        return environment
    }
}
