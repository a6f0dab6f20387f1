import Foundation
import OfferDomain
import Postgres

/// Customers' subscription transactions, as the App Store reported them.
public struct SubscriptionRepository: Sendable {
    let pool: PostgresPool

    /// Records (or updates, e.g. renewal info changed) one transaction: idempotent on (tenant, transactionId).
    /// Throws `.notFound` when the product is not in the tenant's catalog.
    public func record(tenant: UUID, customerId: String, _ t: Transaction) async throws(StoreError) {
        do {
            try await pool.query(
                """
                INSERT INTO subscription_transactions
                    (tenant_id, transaction_id, original_transaction_id, customer_id, product_id, purchase_date,
                     expires_date, offer_type, offer_id, auto_renew, in_billing_retry, grace_period_expires_date,
                     revocation_date)
                VALUES (\(tenant), \(t.transactionId), \(t.originalTransactionId), \(customerId), \(t.productId),
                        \(t.purchaseDate), \(t.expiresDate), \(t.offerType.map { Int16($0.appleNumber) }), \(t.offerId),
                        \(t.autoRenew), \(t.inBillingRetry), \(t.gracePeriodExpiresDate), \(t.revocationDate))
                ON CONFLICT (tenant_id, transaction_id) DO UPDATE SET
                    original_transaction_id = EXCLUDED.original_transaction_id, customer_id = EXCLUDED.customer_id,
                    product_id = EXCLUDED.product_id, purchase_date = EXCLUDED.purchase_date,
                    expires_date = EXCLUDED.expires_date, offer_type = EXCLUDED.offer_type,
                    offer_id = EXCLUDED.offer_id, auto_renew = EXCLUDED.auto_renew,
                    in_billing_retry = EXCLUDED.in_billing_retry,
                    grace_period_expires_date = EXCLUDED.grace_period_expires_date,
                    revocation_date = EXCLUDED.revocation_date, recorded_at = now()
                """, prepared: true)
        } catch let error as PostgresError where error.sqlState == "23503" {
            throw .notFound("product '\(t.productId)'")
        } catch {
            throw StoreError.wrap(error)
        }
    }

    /// The columns `transaction(_:)` decodes, in order.
    static let transactionColumns = """
        transaction_id, original_transaction_id, product_id, purchase_date, expires_date, offer_type, offer_id,
        auto_renew, in_billing_retry, grace_period_expires_date, revocation_date
        """

    /// A recorded transaction from a row that starts with `transactionColumns`. With `previous`, the transaction
    /// decoded from the row before, an original transaction id or product id equal to its is that same string.
    static func transaction(_ row: PostgresRow, after previous: Transaction?) throws -> Transaction {
        let id = try row.decode(String.self, at: 0)
        let original =
            try row.isNull(at: 1) ? nil : try row.decode(String.self, at: 1, reusing: previous?.originalTransactionId)
        let product = try row.decode(String.self, at: 2, reusing: previous?.productId)
        let (purchase, expires, offerType, offerId) = (
            try row.decode(Date.self, at: 3), try row.decode(Date.self, at: 4), try row.decode(Int16?.self, at: 5),
            try row.decode(String?.self, at: 6)
        )
        let (autoRenew, retry, grace, revoked) = (
            try row.decode(Bool.self, at: 7), try row.decode(Bool.self, at: 8),
            try row.decode(Date?.self, at: 9), try row.decode(Date?.self, at: 10)
        )
        return Transaction(
            transactionId: id, originalTransactionId: original, productId: product, purchaseDate: purchase,
            expiresDate: expires, offerType: offerType.flatMap { OfferType(appleNumber: Int($0)) },
            offerId: offerId, autoRenew: autoRenew, inBillingRetry: retry, gracePeriodExpiresDate: grace,
            revocationDate: revoked)
    }
}
