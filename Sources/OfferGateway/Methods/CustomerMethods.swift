import Foundation
import JSONRPC
import OfferDomain
import OfferStore

/// `subscriptions.record` and `customers.get`: a customer's history as the App Store reported it.
enum CustomerMethods {
    struct RecordParams: Decodable {
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
    struct GetParams: Decodable {
        let customerId: String
        let at: Date?
    }

    static let all: [MethodSpec] = [
        MethodSpec(name: "subscriptions.record", access: .tenant) { ctx in
            let params = try ctx.params(RecordParams.self)
            let tenant = try await ctx.tenant()
            let customerId = try Validate.customerId(params.customerId)
            let productId = try Validate.identifier(params.productId, param: "params.productId")
            let transactionId = try Validate.identifier(params.transactionId, param: "params.transactionId", maxBytes: 100)
            let original = try params.originalTransactionId.map {
                try Validate.identifier($0, param: "params.originalTransactionId", maxBytes: 100)
            }
            let offerId = try params.offerId.map { try Validate.identifier($0, param: "params.offerId") }
            guard params.purchaseDate <= params.expiresDate else {
                throw GatewayError.invalidParams(
                    param: "params.expiresDate", message: "expiresDate is before purchaseDate")
            }
            var offerType: OfferType?
            if let number = params.offerType {
                guard let type = OfferType(appleNumber: number) else {
                    throw GatewayError.invalidParams(
                        param: "params.offerType", message: "offerType is 1-4 as Apple numbers them")
                }
                offerType = type
            }
            let transaction = Transaction(
                transactionId: transactionId, originalTransactionId: original, productId: productId,
                purchaseDate: params.purchaseDate, expiresDate: params.expiresDate, offerType: offerType,
                offerId: offerId, autoRenew: params.autoRenew ?? true, inBillingRetry: params.inBillingRetry ?? false,
                gracePeriodExpiresDate: params.gracePeriodExpiresDate, revocationDate: params.revocationDate)
            try await ctx.gateway.database.subscriptions.record(
                tenant: tenant.id, customerId: customerId, transaction)
            // Other processes hear of it through NOTIFY; this one must not wait for that.
            ctx.gateway.invalidate(tenant: tenant.id, customerId: customerId)
            return ["recorded": true, "transactionId": .string(transactionId)]
        },
        MethodSpec(name: "customers.get", access: .tenant) { ctx in
            let params = try ctx.params(GetParams.self)
            let tenant = try await ctx.tenant()
            let customerId = try Validate.customerId(params.customerId)
            let at = params.at ?? ctx.gateway.now()
            let (catalog, history) = try await loadHistory(ctx, tenant: tenant, customerId: customerId, at: at)
            let groups: [JSONValue] = catalog.groups.map { group in
                let h = history.group(group.id)
                return [
                    "groupId": .string(group.id), "state": .string(h.state.rawValue),
                    "autoRenew": h.autoRenew.map { .bool($0) } ?? .null,
                    "activeProductId": h.activeProductId.map { .string($0) } ?? .null,
                    "firstPurchase": date(h.firstPurchaseDate), "lastExpiry": date(h.lastExpiresDate),
                    "lapsedAt": date(h.lapsedAt), "paidMonths": .int(h.paidMonths),
                    "introOfferUsed": .bool(h.introOfferUsed),
                    "winBackRedemptions": .array(
                        h.winBackRedemptions.map {
                            ["offerId": .string($0.offerId), "startedAt": date($0.startedAt), "endedAt": date($0.endedAt)]
                        }),
                ]
            }
            return ["customerId": .string(customerId), "at": date(at), "groups": .array(groups)]
        },
    ]

    /// The tenant's catalog and the customer's history derived at `at`.
    static func loadHistory(_ ctx: MethodContext, tenant: TenantRecord, customerId: String, at: Date) async throws
        -> (Catalog, CustomerHistory)
    {
        let (catalog, transactions) = try await loadInputs(ctx, tenant: tenant, customerId: customerId)
        return (
            catalog.catalog,
            CustomerHistory.derive(transactions: transactions.transactions, catalog: catalog.catalog, at: at)
        )
    }

    /// The tenant's catalog and the customer's transactions, from memory when both are there (the usual case: no
    /// child tasks), else loaded side by side.
    static func loadInputs(_ ctx: MethodContext, tenant: TenantRecord, customerId: String) async throws
        -> (CatalogSnapshot, TransactionsSnapshot)
    {
        let gateway = ctx.gateway
        if let catalog = gateway.catalogs.cachedSnapshot(tenant.id),
            let transactions = gateway.customers.cachedSnapshot(tenant.id, customerId)
        {
            return (catalog, transactions)
        }
        async let catalog = gateway.catalogs.snapshot(tenant.id)
        async let transactions = gateway.customers.snapshot(tenant.id, customerId)
        return try await (catalog, transactions)
    }

    static func date(_ value: Date?) -> JSONValue {
        value.flatMap { RFC3339.format($0) }.map { .string($0) } ?? .null
    }
}
