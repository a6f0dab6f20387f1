import Foundation
import OfferCrypto
import OfferStore

/// A tenant's App Store Connect In-App Purchase keys: imported, stored sealed, never returned.
struct KeyService: Sendable {
    let repository: SigningKeyRepository
    let sealer: KeySealer
    let caches: GatewayCaches
    let logger: Logger

    struct ImportRequest: Decodable, Sendable {
        let keyId: String
        let issuerId: String?
        let privateKeyPem: String
    }

    struct KeyRequest: Decodable, Sendable {
        let keyId: String
    }

    /// An imported key: it becomes the tenant's active key. Only its public half is shown.
    struct Imported: Sendable {
        let keyId: String
        let publicKeyPEM: String
    }

    func importKey(_ request: ImportRequest, tenant: TenantRecord) async throws -> Imported {
        let keyId = try Validate.identifier(request.keyId, param: "params.keyId", maxBytes: 64)
        let issuerId = try request.issuerId.map { try Validate.identifier($0, param: "params.issuerId", maxBytes: 64) }
        let key: SigningKey
        do {
            key = try SigningKey(pkcs8PEM: request.privateKeyPem)
        } catch {
            // The crypto error's description names the problem, never the key material.
            throw GatewayError.invalidParams(
                param: "params.privateKeyPem", message: "not a usable App Store Connect key: \(error)",
                reason: "invalid_key")
        }
        let sealed = try sealer.seal(key, tenant: tenant.id.uuidString.lowercased(), keyId: keyId)
        try await repository.importKey(
            tenant: tenant.id, keyId: keyId, issuerId: issuerId, sealedPrivateKey: sealed.bytes,
            masterKeyId: Hex.encode(sealed.masterKeyId), publicKeyPEM: key.publicKeyPEM)
        caches.invalidate(tenant: tenant.id)
        logger.info("signing key imported", ["tenant": tenant.slug, "key.id": keyId])
        return Imported(keyId: keyId, publicKeyPEM: key.publicKeyPEM)
    }

    func list(tenant: TenantRecord) async throws -> [SigningKeyRecord] {
        try await repository.list(tenant: tenant.id)
    }

    /// Retires a key; returns its id as stored.
    func retire(_ request: KeyRequest, tenant: TenantRecord) async throws -> String {
        // Validated like keys.import: a NUL byte would otherwise reach libpq, which cuts the value there.
        let keyId = try Validate.identifier(request.keyId, param: "params.keyId", maxBytes: 64)
        try await repository.retire(tenant: tenant.id, keyId: keyId)
        caches.invalidate(tenant: tenant.id)
        logger.info("signing key retired", ["tenant": tenant.slug, "key.id": keyId])
        return keyId
    }
}
