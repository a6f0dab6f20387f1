import Foundation
import Postgres

/// A tenant's Retention Messaging configuration (API.md §12): the approved message ids to answer with.
public struct RetentionSettings: Sendable, Hashable {
    /// One approved message for a promotional offer or an alternate product.
    public struct Message: Sendable, Hashable {
        /// The offer id (for `offers`) or the product id (for `alternateProducts`).
        public var targetId: String
        public var messageId: String

        public init(targetId: String, messageId: String) {
            self.targetId = targetId
            self.messageId = messageId
        }
    }

    public var defaultMessageId: String
    /// Promotional offers with their messages, in the order configured.
    public var offers: [Message]
    /// Alternate products with their messages, in the order configured.
    public var alternateProducts: [Message]
    /// How long an answer may take, in milliseconds.
    public var budgetMs: Int
    public var updatedAt: Date?

    public init(
        defaultMessageId: String, offers: [Message], alternateProducts: [Message], budgetMs: Int,
        updatedAt: Date? = nil
    ) {
        self.defaultMessageId = defaultMessageId
        self.offers = offers
        self.alternateProducts = alternateProducts
        self.budgetMs = budgetMs
        self.updatedAt = updatedAt
    }
}

/// One answer given to Apple's Retention Messaging request, as recorded.
public struct RetentionAnswerRecord: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case promotionalOffer, alternateProduct, message
    }

    public var answeredAt: Date
    public var requestId: UUID?
    public var originalTransactionId: String?
    public var customerId: String?
    public var environment: String?
    public var kind: Kind
    public var messageId: String
    public var offerId: String?
    public var productId: String?
    public var nonce: UUID?
    public var fallbackReason: String?
    public var latencyMicros: Int64

    public init(
        answeredAt: Date, requestId: UUID?, originalTransactionId: String?, customerId: String?, environment: String?,
        kind: Kind, messageId: String, offerId: String?, productId: String?, nonce: UUID?, fallbackReason: String?,
        latencyMicros: Int64
    ) {
        self.answeredAt = answeredAt
        self.requestId = requestId
        self.originalTransactionId = originalTransactionId
        self.customerId = customerId
        self.environment = environment
        self.kind = kind
        self.messageId = messageId
        self.offerId = offerId
        self.productId = productId
        self.nonce = nonce
        self.fallbackReason = fallbackReason
        self.latencyMicros = latencyMicros
    }
}

/// Retention Messaging: tenants' configurations, the customer behind a subscription chain, and the answers given.
public struct RetentionRepository: Sendable {
    let pool: PostgresPool

    /// Replaces the tenant's configuration (settings and every message) in one transaction.
    public func configure(tenant: UUID, _ settings: RetentionSettings) async throws(StoreError) {
        try await storeCall {
            try await pool.withTransaction { tx in
                try await tx.query(
                    """
                    INSERT INTO retention_settings (tenant_id, default_message_id, budget_ms)
                    VALUES (\(tenant), \(settings.defaultMessageId), \(Int32(clamping: settings.budgetMs)))
                    ON CONFLICT (tenant_id) DO UPDATE SET
                        default_message_id = EXCLUDED.default_message_id, budget_ms = EXCLUDED.budget_ms,
                        updated_at = now()
                    """)
                try await tx.query("DELETE FROM retention_messages WHERE tenant_id = \(tenant)")
                let rows =
                    settings.offers.enumerated().map { ("offer", $0.element, Int32($0.offset)) }
                    + settings.alternateProducts.enumerated().map { ("product", $0.element, Int32($0.offset)) }
                guard !rows.isEmpty else { return }
                try await tx.query(
                    """
                    INSERT INTO retention_messages (tenant_id, kind, target_id, message_id, position)
                    SELECT \(tenant), k, t, m, p
                    FROM unnest(\(rows.map(\.0))::text[], \(rows.map(\.1.targetId))::text[],
                                \(rows.map(\.1.messageId))::text[], \(rows.map(\.2))::int4[]) AS r(k, t, m, p)
                    """)
            }
        }
    }

    /// The tenant's configuration, or nil when it has none.
    public func settings(tenant: UUID) async throws(StoreError) -> RetentionSettings? {
        try await storeCall {
            guard
                let row = try await pool.query(
                    """
                    SELECT default_message_id, budget_ms, updated_at FROM retention_settings
                    WHERE tenant_id = \(tenant)
                    """
                ).first
            else { return nil }
            let (defaultMessage, budget, updated) = try row.decode(String.self, Int32.self, Date.self)
            var offers: [RetentionSettings.Message] = []
            var products: [RetentionSettings.Message] = []
            for message in try await pool.query(
                """
                SELECT kind, target_id, message_id FROM retention_messages
                WHERE tenant_id = \(tenant) ORDER BY kind, position
                """)
            {
                let (kind, target, id) = try message.decode(String.self, String.self, String.self)
                let entry = RetentionSettings.Message(targetId: target, messageId: id)
                if kind == "offer" { offers.append(entry) } else { products.append(entry) }
            }
            return RetentionSettings(
                defaultMessageId: defaultMessage, offers: offers, alternateProducts: products, budgetMs: Int(budget),
                updatedAt: updated)
        }
    }

    /// The customer each subscription chain (`originalTransactionId`) of `originalTransactionIds` is linked to (API.md
    /// §8's links), for many chains in one round trip; a chain linked to nobody has no entry.
    public func customers(originalTransactionIds: [String], tenant: UUID) async throws(StoreError) -> [String: String] {
        try await storeCall {
            // One index lookup per chain, as a lateral join over the bound array (see
            // `CustomerRecordsRepository.queries`).
            var found: [String: String] = [:]
            for row in try await pool.query(
                """
                SELECT o.original_transaction_id, l.customer_id
                FROM unnest(\(Array(Set(originalTransactionIds)))::text[]) AS o(original_transaction_id)
                CROSS JOIN LATERAL (
                    SELECT customer_id FROM customer_links t
                    WHERE t.tenant_id = \(tenant) AND t.original_transaction_id = o.original_transaction_id) l
                """, prepared: true)
            {
                let (original, customer) = try row.decode(String.self, String.self)
                found[original] = customer
            }
            return found
        }
    }

    /// The INSERT of answers (of any tenants) into `retention_answers`, one statement whatever their number: the
    /// gateway writes them with its ledger rows (`SignatureLedger.recordBatch(_:retentionAnswers:)`).
    static func insertAnswers(_ rows: [(tenant: UUID, answer: RetentionAnswerRecord)]) -> PostgresQuery {
        let a = rows.map(\.answer)
        let micros = a.map { Int64(($0.answeredAt.timeIntervalSince1970 * 1_000_000).rounded()) }
        return """
            INSERT INTO retention_answers
                (tenant_id, answered_at, request_id, original_transaction_id, customer_id, environment, kind,
                 message_id, offer_id, product_id, nonce, fallback_reason, latency_us)
            SELECT t, to_timestamp(us::double precision / 1000000), r, o, c, e, k, m, f, p, n, w, l
            FROM unnest(\(rows.map(\.tenant))::uuid[], \(micros)::int8[], \(a.map(\.requestId))::uuid[],
                        \(a.map(\.originalTransactionId))::text[], \(a.map(\.customerId))::text[],
                        \(a.map(\.environment))::text[], \(a.map(\.kind.rawValue))::text[],
                        \(a.map(\.messageId))::text[], \(a.map(\.offerId))::text[], \(a.map(\.productId))::text[],
                        \(a.map(\.nonce))::uuid[], \(a.map(\.fallbackReason))::text[],
                        \(a.map(\.latencyMicros))::int8[])
                AS x(t, us, r, o, c, e, k, m, f, p, n, w, l)
            """
    }

    /// The tenant's most recent answers, newest first (for operators and tests).
    public func recentAnswers(tenant: UUID, limit: Int = 100) async throws(StoreError) -> [RetentionAnswerRecord] {
        try await storeCall {
            try await pool.query(
                """
                SELECT answered_at, request_id, original_transaction_id, customer_id, environment, kind, message_id,
                       offer_id, product_id, nonce, fallback_reason, latency_us
                FROM retention_answers WHERE tenant_id = \(tenant)
                ORDER BY answered_at DESC, answer_id DESC LIMIT \(Int64(max(1, min(limit, 10_000))))
                """
            ).map { row in
                let (at, request, original, customer, environment, kind, message) = try row.decode(
                    Date.self, UUID?.self, String?.self, String?.self, String?.self, String.self, String.self)
                guard let kind = RetentionAnswerRecord.Kind(rawValue: kind) else {
                    throw StoreError.corrupt("unknown retention answer kind")
                }
                return RetentionAnswerRecord(
                    answeredAt: at, requestId: request, originalTransactionId: original, customerId: customer,
                    environment: environment, kind: kind, messageId: message,
                    offerId: try row.decode(String?.self, at: 7), productId: try row.decode(String?.self, at: 8),
                    nonce: try row.decode(UUID?.self, at: 9), fallbackReason: try row.decode(String?.self, at: 10),
                    latencyMicros: try row.decode(Int64.self, at: 11))
            }
        }
    }
}
