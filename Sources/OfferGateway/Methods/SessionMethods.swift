import Foundation
import JSONRPC

/// `session.authenticate`: binds the connection to a tenant, or to the admin role (see `TenantService`).
enum SessionMethods {
    struct Params: Decodable { let apiKey: String }

    static let all: [MethodSpec] = [
        MethodSpec(name: "session.authenticate", access: .open) { ctx in
            let params = try ctx.params(Params.self)
            let principal = try await ctx.services.tenants.authenticate(apiKey: params.apiKey)
            ctx.session.principal = principal
            switch principal {
            case .admin: return ["tenant": .null, "role": "admin"]
            case .tenant(let tenant): return ["tenant": .string(tenant.slug), "role": "tenant"]
            case .anonymous: throw GatewayError.unauthenticated()
            }
        }
    ]
}
