import Foundation
import OfferDomain
import OfferStore

/// A customer's history as the App Store reported it: recorded transactions, and what they mean at an instant.
/// The other services ask this one for a customer's history; none derives it itself.
struct CustomerService: Sendable {
    let repository: SubscriptionRepository
    /// For the links `subscriptions.record` makes from `originalTransactionId` (API.md §8).
    let apple: AppleDataRepository
    let caches: GatewayCaches
    let clock: @Sendable () -> Date

    struct RecordRequest: Decodable, Sendable {
        let customerId: String
        let productId: String
        let transactionId: String
        let originalTransactionId: String?
        let purchaseDate: Date
        let expiresDate: Date
        let offerType: Int?
        let offerId: String?
        let autoRenew: Bool?
        let inBillingRetry: Bool?
        let gracePeriodExpiresDate: Date?
        let revocationDate: Date?
    }

    struct GetRequest: Decodable, Sendable {
        let customerId: String
        let at: Date?
    }

    /// A customer's state in every group of the catalog at one instant.
    struct Summary: Sendable {
        let customerId: String
        let at: Date
        let catalog: Catalog
        let history: CustomerHistory
    }

    /// Stores one transaction; returns its id.
    func record(_ request: RecordRequest, tenant: TenantRecord) async throws -> String {
        let customerId = try Validate.customerId(request.customerId)
        let transaction = try Self.transaction(request)
        try await repository.record(tenant: tenant.id, customerId: customerId, transaction)
        // Other processes hear of it through the change feed; this one must not wait for that, even when the link
        // below fails (the record is committed).
        defer { caches.invalidate(tenant: tenant.id, customerId: customerId) }
        if request.originalTransactionId != nil {
            // The chain is the customer's: Apple data kept unlinked for it is theirs now. A chain linked to another
            // customer already stays so (recorded data never moves Apple's).
            do {
                _ = try await apple.link(
                    tenant: tenant.id, originalTransactionId: transaction.originalTransactionId, customerId: customerId)
            } catch .conflict {
            }
        }
        return transaction.transactionId
    }

    func summary(_ request: GetRequest, tenant: TenantRecord) async throws -> Summary {
        let customerId = try Validate.customerId(request.customerId)
        let at = request.at ?? clock()
        let (catalog, history) = try await history(tenant: tenant.id, customerId: customerId, at: at)
        return Summary(customerId: customerId, at: at, catalog: catalog, history: history)
    }

    /// The tenant's catalog and the customer's history derived at `at` (customer id already normalised).
    func history(tenant: UUID, customerId: String, at: Date) async throws -> (Catalog, CustomerHistory) {
        let (catalog, transactions) = try await caches.inputs(tenant: tenant, customerId: customerId)
        let remembered = caches.decisions.isEnabled
        return (
            catalog.catalog,
            Self.history(catalog: catalog, transactions: transactions, at: at, remembered: remembered).history
        )
    }

    /// The one derivation of a customer's history: from these snapshots (recorded and Apple data) at `at`, with
    /// the instant it may next change. `remembered`: the one derived last over the same snapshots, while it holds
    /// (``TransactionsSnapshot/derived(over:at:)``); off with the decision memo, so a gateway that remembers
    /// nothing derives everything anew (the tests' oracle).
    static func history(
        catalog: CatalogSnapshot, transactions: TransactionsSnapshot, at: Date, remembered: Bool
    ) -> DerivedHistory {
        remembered
            ? transactions.derived(over: catalog, at: at)
            : TransactionsSnapshot.derive(transactions.records, over: catalog, at: at)
    }

    /// The customer's state in the group of `productId` at `at` (`never` when the product is in no group).
    func groupState(tenant: UUID, customerId: String, productId: String, at: Date) async throws -> GroupState {
        let (catalog, history) = try await history(tenant: tenant, customerId: customerId, at: at)
        guard let groupId = catalog.groupId(ofProduct: productId) else { return .never }
        return history.group(groupId).state
    }

    private static func transaction(_ request: RecordRequest) throws -> Transaction {
        let productId = try Validate.identifier(request.productId, param: "params.productId")
        let transactionId = try Validate.identifier(
            request.transactionId, param: "params.transactionId", maxBytes: 100)
        let original = try request.originalTransactionId.map {
            try Validate.identifier($0, param: "params.originalTransactionId", maxBytes: 100)
        }
        let offerId = try request.offerId.map { try Validate.identifier($0, param: "params.offerId") }
        guard request.purchaseDate <= request.expiresDate else {
            throw GatewayError.invalidParams(param: "params.expiresDate", message: "expiresDate is before purchaseDate")
        }
        var offerType: OfferType?
        if let number = request.offerType {
            guard let type = OfferType(appleNumber: number) else {
                throw GatewayError.invalidParams(
                    param: "params.offerType", message: "offerType is 1-4 as Apple numbers them")
            }
            offerType = type
        }
        return Transaction(
            transactionId: transactionId, originalTransactionId: original, productId: productId,
            purchaseDate: request.purchaseDate, expiresDate: request.expiresDate, offerType: offerType,
            offerId: offerId, autoRenew: request.autoRenew ?? true, inBillingRetry: request.inBillingRetry ?? false,
            gracePeriodExpiresDate: request.gracePeriodExpiresDate, revocationDate: request.revocationDate)
    }
}
