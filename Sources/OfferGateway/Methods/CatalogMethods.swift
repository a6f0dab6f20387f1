import Foundation
import JSONRPC

/// `catalog.*`: read a tenant's catalog (tenant), change it (admin) (see `CatalogService`).
enum CatalogMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "catalog.get", access: .tenant) { ctx in
            try JSONValueEncoder().encode(try await ctx.services.catalog.catalog(tenant: try await ctx.tenant()))
        },
        MethodSpec(name: "catalog.upsert", access: .admin) { ctx in
            let request = try ctx.params(UpsertParams.self)
            let tenant = try await ctx.namedTenant()
            return Wire.catalogChange(try await ctx.services.catalog.upsert(request, tenant: tenant), tenant: tenant)
        },
        MethodSpec(name: "catalog.import", access: .admin) { ctx in
            let request = try ctx.params(CatalogService.ImportRequest.self)
            let tenant = try await ctx.namedTenant()
            let change = try await ctx.services.catalog.importStoreKit(request, tenant: tenant)
            return Wire.catalogChange(change, tenant: tenant)
        },
    ]
}
