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

    public init(
        nonce: UUID, format: Format, keyId: String, customerId: String, productId: String, offerId: String?,
        appAccountToken: String?, transactionId: String?, issuedAt: Date
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
    }
}

/// The ledger of every issued signature (never the signature itself: the nonce identifies it).
public struct SignatureLedger: Sendable {
    let pool: PostgresPool

    /// Records many signatures (of any tenants) in one statement and one commit: the group commit of
    /// `offers.sign`, so the ledger costs one fsync per batch instead of one per signature.
    public func recordBatch(_ rows: [(tenant: UUID, signature: IssuedSignature)]) async throws(StoreError) {
        guard !rows.isEmpty else { return }
        let micros = rows.map { Int64(($0.signature.issuedAt.timeIntervalSince1970 * 1_000_000).rounded()) }
        try await storeCall {
            try await pool.query(
                """
                INSERT INTO issued_signatures
                    (tenant_id, nonce, format, key_id, customer_id, product_id, offer_id, app_account_token,
                     transaction_id, issued_at)
                SELECT t, n, f, k, c, p, o, a, x, to_timestamp(us::double precision / 1000000)
                FROM unnest(\(rows.map(\.tenant))::uuid[], \(rows.map(\.signature.nonce))::uuid[],
                            \(rows.map(\.signature.format.rawValue))::text[], \(rows.map(\.signature.keyId))::text[],
                            \(rows.map(\.signature.customerId))::text[], \(rows.map(\.signature.productId))::text[],
                            \(rows.map(\.signature.offerId))::text[], \(rows.map(\.signature.appAccountToken))::text[],
                            \(rows.map(\.signature.transactionId))::text[], \(micros)::int8[])
                    AS r(t, n, f, k, c, p, o, a, x, us)
                """, prepared: true)
        }
    }
}
