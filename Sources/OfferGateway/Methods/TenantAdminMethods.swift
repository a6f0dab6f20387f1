import Foundation
import JSONRPC
import OfferStore

/// `tenants.*` (admin): create tenants, list them, rotate their API keys.
enum TenantAdminMethods {
    struct CreateParams: Decodable {
        let slug: String
        let bundleId: String
        let name: String?
    }
    struct TenantParam: Decodable { let tenant: String }

    static let all: [MethodSpec] = [
        MethodSpec(name: "tenants.create", access: .admin) { ctx in
            let params = try ctx.params(CreateParams.self)
            guard TenantRecord.isWellFormed(slug: params.slug) else {
                throw GatewayError.invalidParams(
                    param: "params.slug", message: "slug must match [a-z0-9-]{2,40}", reason: "invalid_value")
            }
            let bundleId = try Validate.identifier(params.bundleId, param: "params.bundleId", maxBytes: 255)
            if let name = params.name { _ = try Validate.identifier(name, param: "params.name") }
            let (key, stored) = try ApiKeys.generate()
            let tenant = try await ctx.gateway.database.tenants.create(
                slug: params.slug, bundleId: bundleId, name: params.name, apiKey: stored)
            ctx.gateway.logger.info("tenant created", ["tenant": tenant.slug])
            return ["slug": .string(tenant.slug), "apiKey": .string(key), "bundleId": .string(tenant.bundleId)]
        },
        MethodSpec(name: "tenants.list", access: .admin) { ctx in
            let tenants = try await ctx.gateway.database.tenants.list()
            return [
                "tenants": .array(
                    tenants.map { tenant in
                        var object: JSONObject = [
                            "slug": .string(tenant.slug), "bundleId": .string(tenant.bundleId),
                            "createdAt": .string(RFC3339.format(tenant.createdAt) ?? ""),
                        ]
                        object["name"] = tenant.name.map { .string($0) } ?? .null
                        return .object(object)
                    })
            ]
        },
        MethodSpec(name: "tenants.rotateApiKey", access: .admin) { ctx in
            _ = try ctx.params(TenantParam.self)
            let tenant = try await ctx.namedTenant()
            let (key, stored) = try ApiKeys.generate()
            try await ctx.gateway.database.tenants.rotateApiKey(tenant: tenant.id, newKey: stored)
            ctx.gateway.logger.info("tenant API key rotated", ["tenant": tenant.slug])
            return ["tenant": .string(tenant.slug), "apiKey": .string(key)]
        },
    ]
}
