import Foundation
import JSONRPC
import OfferCrypto
import OfferStore

/// `keys.*` (admin): a tenant's App Store Connect In-App Purchase keys, stored sealed, never returned.
enum KeyMethods {
    struct ImportParams: Decodable {
        let tenant: String
        let keyId: String
        let issuerId: String?
        let privateKeyPem: String
    }
    struct KeyParams: Decodable {
        let tenant: String
        let keyId: String
    }

    static let all: [MethodSpec] = [
        MethodSpec(name: "keys.import", access: .admin) { ctx in
            let params = try ctx.params(ImportParams.self)
            let tenant = try await ctx.namedTenant()
            let keyId = try Validate.identifier(params.keyId, param: "params.keyId", maxBytes: 64)
            let issuerId = try params.issuerId.map { try Validate.identifier($0, param: "params.issuerId", maxBytes: 64) }
            let key: SigningKey
            do {
                key = try SigningKey(pkcs8PEM: params.privateKeyPem)
            } catch {
                // The crypto error's description names the problem, never the key material.
                throw GatewayError.invalidParams(
                    param: "params.privateKeyPem", message: "not a usable App Store Connect key: \(error)",
                    reason: "invalid_key")
            }
            let sealed = try ctx.gateway.sealer.seal(key, tenant: tenant.id.uuidString.lowercased(), keyId: keyId)
            try await ctx.gateway.database.signingKeys.importKey(
                tenant: tenant.id, keyId: keyId, issuerId: issuerId, sealedPrivateKey: sealed.bytes,
                masterKeyId: Hex.encode(sealed.masterKeyId), publicKeyPEM: key.publicKeyPEM)
            ctx.gateway.invalidate(tenant: tenant.id)
            ctx.gateway.logger.info("signing key imported", ["tenant": tenant.slug, "key.id": keyId])
            return [
                "tenant": .string(tenant.slug), "keyId": .string(keyId), "state": "active",
                "publicKeyPem": .string(key.publicKeyPEM),
            ]
        },
        MethodSpec(name: "keys.list", access: .admin) { ctx in
            let tenant = try await ctx.namedTenant()
            let keys = try await ctx.gateway.database.signingKeys.list(tenant: tenant.id)
            return [
                "keys": .array(
                    keys.map { key in
                        [
                            "keyId": .string(key.keyId), "issuerId": key.issuerId.map { .string($0) } ?? .null,
                            "state": .string(key.state.rawValue),
                            "createdAt": .string(RFC3339.format(key.createdAt) ?? ""),
                            "retiredAt": CustomerMethods.date(key.retiredAt),
                            "publicKeyPem": .string(key.publicKeyPEM),
                        ]
                    })
            ]
        },
        MethodSpec(name: "keys.retire", access: .admin) { ctx in
            let params = try ctx.params(KeyParams.self)
            let tenant = try await ctx.namedTenant()
            // Validated like keys.import: a NUL byte would otherwise reach libpq, which cuts the value there.
            let keyId = try Validate.identifier(params.keyId, param: "params.keyId", maxBytes: 64)
            try await ctx.gateway.database.signingKeys.retire(tenant: tenant.id, keyId: keyId)
            ctx.gateway.invalidate(tenant: tenant.id)
            ctx.gateway.logger.info("signing key retired", ["tenant": tenant.slug, "key.id": params.keyId])
            return ["tenant": .string(tenant.slug), "keyId": .string(params.keyId), "state": "retired"]
        },
    ]
}
