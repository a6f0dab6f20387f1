import Foundation
import OfferCrypto
import OfferStore

/// Tenants: creating them, their API keys, and who a presented key speaks for.
struct TenantService: Sendable {
    let repository: TenantRepository
    let caches: GatewayCaches
    var directory: TenantDirectory { caches.tenants }
    /// SHA-256 of the operators' key; nil when admin methods are off.
    let adminKeyDigest: [UInt8]?
    let logger: Logger

    struct CreateRequest: Decodable, Sendable {
        let slug: String
        let bundleId: String
        let name: String?
    }

    /// A new tenant and its API key, shown this once.
    struct Created: Sendable {
        let tenant: TenantRecord
        let apiKey: String
    }

    func create(_ request: CreateRequest) async throws -> Created {
        guard TenantRecord.isWellFormed(slug: request.slug) else {
            throw GatewayError.invalidParams(
                param: "params.slug", message: "slug must match [a-z0-9-]{2,40}", reason: "invalid_value")
        }
        let bundleId = try Validate.identifier(request.bundleId, param: "params.bundleId", maxBytes: 255)
        if let name = request.name { _ = try Validate.identifier(name, param: "params.name") }
        let (key, stored) = try ApiKeys.generate()
        let tenant = try await repository.create(
            slug: request.slug, bundleId: bundleId, name: request.name, apiKey: stored)
        logger.info("tenant created", ["tenant": tenant.slug])
        return Created(tenant: tenant, apiKey: key)
    }

    struct UpdateRequest: Decodable, Sendable {
        let tenant: String
        let name: String?
        let appAppleId: Int64?
        let allowSandbox: Bool?
        let allowXcode: Bool?
    }

    /// Changes a tenant's settings. Every gateway sees them at once: this one drops its copies here, the others when
    /// the change feed announces the update (migration 0003 makes it a catalog change of the tenant).
    func update(_ request: UpdateRequest, tenant: TenantRecord) async throws -> TenantRecord {
        if let name = request.name { _ = try Validate.identifier(name, param: "params.name") }
        if let id = request.appAppleId, id <= 0 {
            throw GatewayError.invalidParams(
                param: "params.appAppleId", message: "appAppleId is a positive integer", reason: "invalid_value")
        }
        let updated = try await repository.update(
            tenant: tenant.id,
            TenantRepository.Update(
                name: request.name, appAppleId: request.appAppleId, allowSandbox: request.allowSandbox,
                allowXcode: request.allowXcode))
        caches.invalidate(tenant: tenant.id)
        logger.info("tenant updated", ["tenant": tenant.slug])
        return updated
    }

    func list() async throws -> [TenantRecord] {
        try await repository.list()
    }

    /// A fresh API key for `tenant`; the old one stops working at once for new authentications (here at once, in
    /// other gateways when the change feed announces it).
    func rotateApiKey(_ tenant: TenantRecord) async throws -> String {
        let (key, stored) = try ApiKeys.generate()
        try await repository.rotateApiKey(tenant: tenant.id, newKey: stored)
        caches.invalidate(tenant: tenant.id)
        logger.info("tenant API key rotated", ["tenant": tenant.slug])
        return key
    }

    /// The tenant with this slug (-32004 when there is none).
    func find(slug: String) async throws -> TenantRecord {
        try await directory.find(slug: slug)
    }

    /// Who `apiKey` speaks for: the admin, or one tenant (compared in constant time); -32001 otherwise. A key seen
    /// live before is found in memory (``ApiKeyDirectory``): no query.
    func authenticate(apiKey: String) async throws -> Principal {
        switch presented(apiKey) {
        case .decided(let outcome): return try outcome.get()
        case .tenantKey(let lookup, let digest):
            return try Self.verify(digest, against: try await caches.apiKeys.find(lookup: lookup)).get()
        }
    }

    /// What `authenticate` would say, when it can be told without waiting: the principal, the error, or nil when
    /// the key's lookup is not in memory (then `authenticate` reads it). The same decision, step for step.
    func authenticateFromMemory(apiKey: String) -> Result<Principal, GatewayError>? {
        switch presented(apiKey) {
        case .decided(let outcome): return outcome
        case .tenantKey(let lookup, let digest):
            guard let found = caches.apiKeys.cached(lookup: lookup) else { return nil }
            return Self.verify(digest, against: found)
        }
    }

    /// A presented key before any stored tenant key is read: the admin's, of no valid shape, or a tenant key's
    /// lookup and the whole key's SHA-256.
    private enum Presented {
        case decided(Result<Principal, GatewayError>)
        case tenantKey(lookup: String, digest: [UInt8])
    }

    private func presented(_ apiKey: String) -> Presented {
        let digest = SHA256.hash(apiKey)
        if let adminKeyDigest, ConstantTime.equals(digest, adminKeyDigest) { return .decided(.success(.admin)) }
        guard let lookup = ApiKeys.lookup(of: apiKey) else { return .decided(.failure(Self.invalidKey)) }
        return .tenantKey(lookup: lookup, digest: digest)
    }

    /// The tenant of the live key stored under the presented key's lookup, when the hashes match (in constant time).
    private static func verify(_ digest: [UInt8], against found: ApiKeyDirectory.Entry?) -> Result<
        Principal, GatewayError
    > {
        guard let found, ConstantTime.equals(digest, found.hash) else { return .failure(invalidKey) }
        return .success(.tenant(found.tenant))
    }

    private static var invalidKey: GatewayError {
        GatewayError.unauthenticated("invalid API key", reason: "invalid_api_key")
    }
}
