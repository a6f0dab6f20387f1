import Foundation
import Postgres

/// One signature handed out by `offers.sign` or `offers.introEligibility`.
public struct IssuedSignature: Sendable, Hashable {
    public enum Format: String, Sendable, Hashable {
        case v1, jws, introEligibility
    }
    public var nonce: UUID
    public var format: Format
    public var keyId: String
    public var customerId: String
    public var productId: String
    public var offerId: String?
    public var appAccountToken: String?
    public var transactionId: String?
    public var issuedAt: Date
    /// The redemption the signature was made for (`codes.redeem` with `sign`, `offers.sign` with `redemptionId`).
    public var redemptionId: UUID?
    /// The object answered, as JSON, kept only for a redemption's signature (so a replay answers the same one).
    public var signedOffer: String?

    public init(
        nonce: UUID, format: Format, keyId: String, customerId: String, productId: String, offerId: String?,
        appAccountToken: String?, transactionId: String?, issuedAt: Date, redemptionId: UUID? = nil,
        signedOffer: String? = nil
    ) {
        self.nonce = nonce
        self.format = format
        self.keyId = keyId
        self.customerId = customerId
        self.productId = productId
        self.offerId = offerId
        self.appAccountToken = appAccountToken
        self.transactionId = transactionId
        self.issuedAt = issuedAt
        self.redemptionId = redemptionId
        self.signedOffer = signedOffer
    }
}

/// The ledger of every issued signature (never the signature itself: the nonce identifies it).
public struct SignatureLedger: Sendable {
    let pool: PostgresPool

    /// Records signatures and Retention Messaging answers (of any tenants) in one statement and one commit: the
    /// group commit of `offers.sign`, so the ledger costs one fsync per batch instead of one per signature, and an
    /// answer's record rides with the signatures committing next instead of costing a commit of its own. `reply` is
    /// told on the database connection's queue, right after the commit (no task: the gateway's group commit answers
    /// its callers from there).
    public func recordBatch(
        _ rows: [(tenant: UUID, signature: IssuedSignature)],
        retentionAnswers answers: [(tenant: UUID, answer: RetentionAnswerRecord)],
        reply: @escaping @Sendable (Result<Void, StoreError>) -> Void
    ) {
        let query: PostgresQuery
        switch (rows.isEmpty, answers.isEmpty) {
        case (true, true): return reply(.success(()))
        case (false, true): query = Self.insert(rows)
        case (true, false): query = RetentionRepository.insertAnswers(answers)
        case (false, false):
            query = """
                WITH s AS (\(query: Self.insert(rows))), a AS (\(query: RetentionRepository.insertAnswers(answers)))
                SELECT 1
                """
        }
        pool.query(query, prepared: true) { result in
            reply(result.map { _ in () }.mapError { StoreError.wrap($0) })
        }
    }

    /// `recordBatch(_:retentionAnswers:reply:)`, awaited.
    public func recordBatch(
        _ rows: [(tenant: UUID, signature: IssuedSignature)],
        retentionAnswers answers: [(tenant: UUID, answer: RetentionAnswerRecord)]
    ) async throws(StoreError) {
        try await withCheckedContinuation { continuation in
            recordBatch(rows, retentionAnswers: answers) { continuation.resume(returning: $0) }
        }.get()
    }

    /// The INSERT of `rows` into the ledger (one statement, whatever their number).
    static func insert(_ rows: [(tenant: UUID, signature: IssuedSignature)]) -> PostgresQuery {
        let micros = rows.map { Int64(($0.signature.issuedAt.timeIntervalSince1970 * 1_000_000).rounded()) }
        return """
            INSERT INTO issued_signatures
                (tenant_id, nonce, format, key_id, customer_id, product_id, offer_id, app_account_token,
                 transaction_id, issued_at, redemption_id, signed_offer)
            SELECT t, n, f, k, c, p, o, a, x, to_timestamp(us::double precision / 1000000), rd, so::jsonb
            FROM unnest(\(rows.map(\.tenant))::uuid[], \(rows.map(\.signature.nonce))::uuid[],
                        \(rows.map(\.signature.format.rawValue))::text[], \(rows.map(\.signature.keyId))::text[],
                        \(rows.map(\.signature.customerId))::text[], \(rows.map(\.signature.productId))::text[],
                        \(rows.map(\.signature.offerId))::text[], \(rows.map(\.signature.appAccountToken))::text[],
                        \(rows.map(\.signature.transactionId))::text[], \(micros)::int8[],
                        \(rows.map(\.signature.redemptionId))::uuid[], \(rows.map(\.signature.signedOffer))::text[])
                AS r(t, n, f, k, c, p, o, a, x, us, rd, so)
            """
    }

    /// The latest signature made for a live (not rolled back) redemption in `format` since `since`, not yet used for
    /// a purchase: the JSON object it answered, or nil.
    public func signedOffer(tenant: UUID, redemptionId: UUID, format: IssuedSignature.Format, since: Date)
        async throws(StoreError) -> String?
    {
        try await storeCall {
            try await pool.query(
                """
                SELECT s.signed_offer::text FROM issued_signatures s
                WHERE s.tenant_id = \(tenant) AND s.redemption_id = \(redemptionId) AND s.format = \(format.rawValue)
                      AND s.issued_at >= \(since) AND s.signed_offer IS NOT NULL AND s.purchased_at IS NULL
                      AND EXISTS (SELECT 1 FROM redemptions r
                                  WHERE r.tenant_id = s.tenant_id AND r.redemption_id = s.redemption_id
                                        AND r.rolled_back_at IS NULL)
                ORDER BY s.issued_at DESC LIMIT 1
                """, prepared: true
            ).scalar(String.self)
        }
    }
}
