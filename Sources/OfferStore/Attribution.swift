import Foundation
import Postgres

/// Attribution (API.md §10, migration 0008): which signature, redemption or claim a verified purchase used.
///
/// Run inside the transaction that stores Apple's data (or links a chain to its customer), so a purchase and its
/// attribution are stored together. For each given transaction that has a customer, was verified against Apple's
/// chain, and starts the use of its offer in its subscription chain (the chain's previous transaction did not use
/// the same offer: a renewal inside the offer's periods marks nothing new):
///
/// - `offerType` 2 (promotional) with `offerIdentifier` X: the customer's latest open signature for X issued before
///   the purchase (5 minutes of clock skew allowed) is marked purchased, and so is the redemption it names;
/// - `offerType` 3 (offer code) with `offerIdentifier` = a campaign's `apple_reference_name`: the customer's latest
///   open claim in such a campaign made before the purchase (the same skew allowed).
///
/// A transaction marks at most one signature and one claim (unique indexes), and nothing twice.
extension AppleDataRepository {
    static func attribute(_ tx: PostgresTransaction, tenant: UUID, transactionIds: [String]) async throws {
        guard !transactionIds.isEmpty else { return }
        for query in attributionQueries(tenant: tenant, transactionIds: transactionIds) { try await tx.query(query) }
    }

    /// The statements of `attribute(_:tenant:transactionIds:)`, to run in this order (a group of notifications
    /// pipelines them with its writes).
    static func attributionQueries(tenant: UUID, transactionIds: [String]) -> [PostgresQuery] {
        [
            """
            WITH candidate AS (\(query: candidates(tenant: tenant, transactionIds: transactionIds, offerType: 2))
                               AND NOT EXISTS (SELECT 1 FROM issued_signatures s WHERE s.tenant_id = \(tenant)
                                                      AND s.purchase_transaction_id = t.transaction_id)),
            chosen AS (
                SELECT DISTINCT ON (s.nonce) c.transaction_id, s.nonce
                FROM candidate c
                CROSS JOIN LATERAL (SELECT nonce FROM issued_signatures s
                                    WHERE s.tenant_id = \(tenant) AND s.customer_id = c.customer_id
                                          AND s.offer_id = c.offer_id AND s.purchased_at IS NULL
                                          AND s.issued_at <= c.purchase_date + interval '5 minutes'
                                    ORDER BY s.issued_at DESC, s.nonce DESC LIMIT 1) AS s
                ORDER BY s.nonce, c.transaction_id),
            marked AS (
                UPDATE issued_signatures s SET purchased_at = now(), purchase_transaction_id = chosen.transaction_id
                FROM chosen WHERE s.tenant_id = \(tenant) AND s.nonce = chosen.nonce AND s.purchased_at IS NULL
                RETURNING s.redemption_id, chosen.transaction_id)
            UPDATE redemptions r SET purchased_at = now(), purchase_transaction_id = m.transaction_id
            FROM marked m
            WHERE r.tenant_id = \(tenant) AND r.redemption_id = m.redemption_id AND r.purchased_at IS NULL
            """,
            """
            WITH candidate AS (\(query: candidates(tenant: tenant, transactionIds: transactionIds, offerType: 3))
                               AND NOT EXISTS (SELECT 1 FROM apple_codes a WHERE a.tenant_id = \(tenant)
                                                      AND a.purchase_transaction_id = t.transaction_id)),
            chosen AS (
                SELECT DISTINCT ON (a.code) c.transaction_id, a.code
                FROM candidate c
                CROSS JOIN LATERAL (SELECT a.code FROM apple_codes a
                                    JOIN campaigns k ON k.tenant_id = a.tenant_id AND k.campaign_id = a.campaign_id
                                    WHERE a.tenant_id = \(tenant) AND a.customer_id = c.customer_id
                                          AND k.apple_reference_name = c.offer_id AND a.purchased_at IS NULL
                                          AND a.claimed_at <= c.purchase_date + interval '5 minutes'
                                    ORDER BY a.claimed_at DESC, a.code DESC LIMIT 1) AS a
                ORDER BY a.code, c.transaction_id)
            UPDATE apple_codes a SET purchased_at = now(), purchase_transaction_id = chosen.transaction_id
            FROM chosen WHERE a.tenant_id = \(tenant) AND a.code = chosen.code AND a.purchased_at IS NULL
            """,
        ]
    }

    /// The given transactions of one Apple offer type that may attribute (see above), as `t`.
    private static func candidates(tenant: UUID, transactionIds: [String], offerType: Int32) -> PostgresQuery {
        """
        SELECT t.transaction_id, t.customer_id, t.offer_id, t.purchase_date FROM apple_transactions t
        WHERE t.tenant_id = \(tenant) AND t.transaction_id = ANY(\(transactionIds)::text[])
              AND t.customer_id IS NOT NULL AND t.authenticity = 'verifiedChain' AND t.offer_id IS NOT NULL
              AND t.offer_type = \(offerType)
              AND NOT EXISTS (
                  SELECT 1 FROM (SELECT p.offer_type, p.offer_id FROM apple_transactions p
                                 WHERE p.tenant_id = t.tenant_id AND p.original_transaction_id = t.original_transaction_id
                                       AND (p.purchase_date, p.transaction_id) < (t.purchase_date, t.transaction_id)
                                 ORDER BY p.purchase_date DESC, p.transaction_id DESC LIMIT 1) AS previous
                  WHERE previous.offer_type = t.offer_type AND previous.offer_id = t.offer_id)
        """
    }
}
