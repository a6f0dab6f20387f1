import Foundation
import JSONRPC
import OfferDomain
import OfferStore
import Synchronization

/// A tenant's catalog: read from the cache, changed by upsert (our own rows) or import (an Xcode `.storekit` file).
struct CatalogService: Sendable {
    let repository: CatalogRepository
    let caches: GatewayCaches
    let clock: @Sendable () -> Date
    let logger: Logger

    struct ImportRequest: Decodable, Sendable {
        let storekit: JSONValue
        let currency: String?
    }

    /// What a change wrote, and what an import skipped (with the JSON path and why).
    struct Change: Sendable {
        let input: CatalogInput
        let skipped: [(path: String, reason: String)]
    }

    func catalog(tenant: TenantRecord) async throws -> Catalog {
        try await caches.catalogs.catalog(tenant.id)
    }

    /// The offer a client names (docs/api.md §8, "Offers are named by product and id"): `offerId` of `productId`
    /// when the client gives a product; without one, the only offer with that id. Unknown: `-32004`
    /// (`unknown_offer`); an id several products share, without a product: `-32602` naming `productParam`
    /// (`ambiguous_offer`), with the products that have it.
    static func offer(
        _ offerId: String, product productId: String?, in catalog: Catalog, productParam: String = "params.productId"
    ) throws -> Offer {
        if let productId {
            guard let offer = catalog.offer(offerId, product: productId) else {
                throw GatewayError.notFound(
                    "no offer '\(Validate.printable(offerId))' for product '\(Validate.printable(productId))'",
                    reason: "unknown_offer")
            }
            return offer
        }
        let offers = catalog.offers(withId: offerId)
        guard let first = offers.first else {
            throw GatewayError.notFound("no offer '\(Validate.printable(offerId))'", reason: "unknown_offer")
        }
        guard offers.count == 1 else {
            let products = offers.map { "'\(Validate.printable($0.productId))'" }.joined(separator: ", ")
            throw GatewayError.invalidParams(
                param: productParam,
                message: "offer '\(Validate.printable(offerId))' exists for several products (\(products)): "
                    + "name the product too",
                reason: "ambiguous_offer")
        }
        return first
    }

    func upsert(_ request: UpsertParams, tenant: TenantRecord) async throws -> Change {
        try await apply(try request.input(), tenant: tenant, action: "catalog.upsert", skipped: [])
    }

    func importStoreKit(_ request: ImportRequest, tenant: TenantRecord) async throws -> Change {
        if let currency = request.currency {
            guard currency.utf8.count == 3, currency.utf8.allSatisfy({ (0x41...0x5A).contains($0) }) else {
                throw GatewayError.invalidParams(
                    param: "params.currency", message: "currency must be an ISO 4217 code such as USD")
            }
        }
        var importer = StoreKitImport(storekit: request.storekit, currency: request.currency)
        let (input, report) = try importer.run()
        return try await apply(input, tenant: tenant, action: "catalog.import", skipped: report.skipped)
    }

    /// Validates the rows merged with the stored catalog, writes them in one transaction, and drops the cached copy.
    private func apply(
        _ rows: CatalogInput, tenant: TenantRecord, action: String, skipped: [(path: String, reason: String)]
    ) async throws -> Change {
        let now = clock()
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
        let input = try validated(rows, against: try await repository.load(tenant: tenant.id))
        // Checked again inside the write transaction (tenant locked): concurrent upserts that each fit could
        // together break a whole-catalog rule such as 10 promotional offers per product. The store reports what a
        // check throws as its own failure, so the rejection is carried out beside it.
        let rejection = Mutex<GatewayError?>(nil)
        do {
            try await repository.upsert(
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
        caches.invalidate(tenant: tenant.id)
        logger.info(
            "catalog changed",
            [
                "tenant": tenant.slug, "action": action, "products": String(input.products.count),
                "offers": String(input.offers.count),
            ])
        return Change(input: input, skipped: skipped)
    }
}
