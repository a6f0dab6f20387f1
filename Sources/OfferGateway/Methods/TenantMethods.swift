import Foundation
import JSONRPC

/// `tenants.*` (admin): create tenants, list them, rotate their API keys (see `TenantService`).
enum TenantMethods {
    struct TenantParam: Decodable { let tenant: String }

    static let all: [MethodSpec] = [
        MethodSpec(name: "tenants.create", access: .admin) { ctx in
            let request = try ctx.params(TenantService.CreateRequest.self)
            let created = try await ctx.services.tenants.create(request)
            return [
                "slug": .string(created.tenant.slug), "apiKey": .string(created.apiKey),
                "bundleId": .string(created.tenant.bundleId),
            ]
        },
        MethodSpec(name: "tenants.list", access: .admin) { ctx in
            let tenants = try await ctx.services.tenants.list()
            return [
                "tenants": .array(tenants.map(Wire.tenant))
            ]
        },
        MethodSpec(name: "tenants.update", access: .admin) { ctx in
            let request = try ctx.params(TenantService.UpdateRequest.self)
            let tenant = try await ctx.services.tenants.update(request, tenant: try await ctx.namedTenant())
            return Wire.tenant(tenant)
        },
        MethodSpec(name: "tenants.rotateApiKey", access: .admin) { ctx in
            _ = try ctx.params(TenantParam.self)
            let tenant = try await ctx.namedTenant()
            let key = try await ctx.services.tenants.rotateApiKey(tenant)
            return ["tenant": .string(tenant.slug), "apiKey": .string(key)]
        },
    ]
}
