import Foundation
import JSONRPC

/// `keys.*` (admin): a tenant's App Store Connect In-App Purchase keys (see `KeyService`).
enum KeyMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "keys.import", access: .admin) { ctx in
            let request = try ctx.params(KeyService.ImportRequest.self)
            let tenant = try await ctx.namedTenant()
            let key = try await ctx.services.keys.importKey(request, tenant: tenant)
            return [
                "tenant": .string(tenant.slug), "keyId": .string(key.keyId), "state": "active",
                "publicKeyPem": .string(key.publicKeyPEM),
            ]
        },
        MethodSpec(name: "keys.list", access: .admin) { ctx in
            let keys = try await ctx.services.keys.list(tenant: try await ctx.namedTenant())
            return [
                "keys": .array(
                    keys.map { key in
                        [
                            "keyId": .string(key.keyId), "issuerId": key.issuerId.map { .string($0) } ?? .null,
                            "state": .string(key.state.rawValue), "createdAt": Wire.date(key.createdAt),
                            "retiredAt": Wire.date(key.retiredAt), "publicKeyPem": .string(key.publicKeyPEM),
                        ]
                    })
            ]
        },
        MethodSpec(name: "keys.retire", access: .admin) { ctx in
            let request = try ctx.params(KeyService.KeyRequest.self)
            let tenant = try await ctx.namedTenant()
            let keyId = try await ctx.services.keys.retire(request, tenant: tenant)
            return ["tenant": .string(tenant.slug), "keyId": .string(keyId), "state": "retired"]
        },
    ]
}
