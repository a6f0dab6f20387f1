import Foundation
import JSONRPC
import OfferDomain
import OfferStore
import Synchronization

/// `catalog.*`: read a tenant's catalog (tenant), change it (admin).
enum CatalogMethods {
    struct ImportParams: Decodable {
        let tenant: String
        let storekit: JSONValue
        let currency: String?
    }

    static let all: [MethodSpec] = [
        MethodSpec(name: "catalog.get", access: .tenant) { ctx in
            let tenant = try await ctx.tenant()
            let catalog = try await ctx.gateway.catalogs.catalog(tenant.id)
            return try JSONValueEncoder().encode(catalog)
        },
        MethodSpec(name: "catalog.upsert", access: .admin) { ctx in
            let params = try ctx.params(UpsertParams.self)
            let tenant = try await ctx.namedTenant()
            let input = try params.input()
            return try await apply(input, tenant: tenant, ctx: ctx, action: "catalog.upsert", skipped: [])
        },
        MethodSpec(name: "catalog.import", access: .admin) { ctx in
            let params = try ctx.params(ImportParams.self)
            let tenant = try await ctx.namedTenant()
            if let currency = params.currency {
                guard currency.utf8.count == 3, currency.utf8.allSatisfy({ (0x41...0x5A).contains($0) }) else {
                    throw GatewayError.invalidParams(
                        param: "params.currency", message: "currency must be an ISO 4217 code such as USD")
                }
            }
            var importer = StoreKitImport(storekit: params.storekit, currency: params.currency)
            let (input, report) = try importer.run()
            return try await apply(input, tenant: tenant, ctx: ctx, action: "catalog.import", skipped: report.skipped)
        },
    ]

    /// Validates the rows merged with the stored catalog, writes them in one transaction, and drops the cached copy.
    static func apply(
        _ rows: CatalogInput, tenant: TenantRecord, ctx: MethodContext, action: String,
        skipped: [(path: String, reason: String)]
    ) async throws -> JSONValue {
        let gateway = ctx.gateway
        let now = gateway.now()
        /// The rows with their prices resolved, checked merged into `existing`.
        @Sendable func validated(_ rows: CatalogInput, against existing: Catalog) throws -> CatalogInput {
            var input = rows
            try input.resolveOfferPrices(existing: existing)
            let merged = input.merged(into: existing)
            do {
                _ = try Catalog(validating: merged.groups, products: merged.products, offers: merged.offers, at: now)
            } catch {
                throw GatewayError(error, paramPrefix: "params")
            }
            return input
        }
        let input = try validated(rows, against: try await gateway.database.catalog.load(tenant: tenant.id))
        // Checked again inside the write transaction (tenant locked): concurrent upserts that each fit could
        // together break a whole-catalog rule such as 10 promotional offers per product.
        let rejection = Mutex<GatewayError?>(nil)
        do {
            try await gateway.database.catalog.upsert(
                tenant: tenant.id, groups: input.groups, products: input.products, offers: input.offers,
                actor: "admin",
                check: { current in
                    do {
                        _ = try validated(rows, against: current)
                    } catch let error as GatewayError {
                        rejection.withLock { $0 = error }
                        throw error
                    }
                })
        } catch {
            if let rejected = rejection.withLock({ $0 }) { throw rejected }
            throw error
        }
        gateway.invalidate(tenant: tenant.id)
        gateway.logger.info(
            "catalog changed",
            ["tenant": tenant.slug, "action": action, "products": String(input.products.count),
             "offers": String(input.offers.count)])
        return [
            "tenant": .string(tenant.slug),
            "imported": [
                "groups": .int(input.groups.count), "products": .int(input.products.count),
                "offers": .int(input.offers.count),
            ],
            "groups": .array(input.groups.map { .string($0.id) }),
            "products": .array(input.products.map { .string($0.id) }),
            "offers": .array(input.offers.map { .string($0.id) }),
            "skipped": .array(skipped.map { ["path": .string($0.path), "reason": .string($0.reason)] }),
        ]
    }
}
