import Foundation
import OfferCrypto
import OfferDomain
import OfferStore
import Synchronization

/// A per-tenant cache with invalidation that cannot lose a race: a value loaded while an invalidation happened is
/// returned to its caller but not kept, so the next caller loads afresh.
final class TenantCache<Value: Sendable>: Sendable {
    private struct State {
        var values: [UUID: Value] = [:]
        var generations: [UUID: UInt64] = [:]
        var epoch: UInt64 = 0
    }

    private let state = Mutex(State())

    func value(for tenant: UUID, load: () async throws -> Value) async throws -> Value {
        let ticket: (UInt64, UInt64)? = state.withLock { s in
            s.values[tenant] == nil ? (s.epoch, s.generations[tenant] ?? 0) : nil
        }
        guard let (epoch, generation) = ticket else {
            if let cached = state.withLock({ $0.values[tenant] }) { return cached }
            return try await value(for: tenant, load: load)
        }
        let loaded = try await load()
        state.withLock { s in
            if s.epoch == epoch && (s.generations[tenant] ?? 0) == generation {
                s.values[tenant] = loaded
            }
        }
        return loaded
    }

    func invalidate(_ tenant: UUID) {
        state.withLock { s in
            s.values[tenant] = nil
            s.generations[tenant, default: 0] += 1
        }
    }

    func invalidateAll() {
        state.withLock { s in
            s.values.removeAll()
            s.epoch += 1
        }
    }

    var count: Int { state.withLock { $0.values.count } }
}

/// Each tenant's catalog, served from memory.
final class CatalogCache: Sendable {
    private let repository: CatalogRepository
    private let cache = TenantCache<Catalog>()

    init(repository: CatalogRepository) {
        self.repository = repository
    }

    func catalog(_ tenant: UUID) async throws -> Catalog {
        try await cache.value(for: tenant) { try await repository.load(tenant: tenant) }
    }

    func invalidate(_ tenant: UUID) { cache.invalidate(tenant) }
    func invalidateAll() { cache.invalidateAll() }
    var count: Int { cache.count }
}

/// A tenant's active signing key, unsealed and parsed once.
struct ActiveSigner: Sendable {
    let keyId: String
    let issuerId: String?
    let key: SigningKey
}

/// Each tenant's active signer (or the fact that there is none), served from memory.
final class SignerCache: Sendable {
    private let repository: SigningKeyRepository
    private let sealer: KeySealer
    private let cache = TenantCache<ActiveSigner?>()

    init(repository: SigningKeyRepository, sealer: KeySealer) {
        self.repository = repository
        self.sealer = sealer
    }

    func signer(_ tenant: UUID) async throws -> ActiveSigner? {
        try await cache.value(for: tenant) {
            guard let record = try await repository.active(tenant: tenant) else { return nil }
            do {
                let sealed = try SealedKey(bytes: record.sealedPrivateKey)
                let key = try sealer.openSigningKey(sealed, tenant: tenant.uuidString.lowercased(), keyId: record.keyId)
                return ActiveSigner(keyId: record.keyId, issuerId: record.issuerId, key: key)
            } catch {
                throw GatewayError.internal("cannot open signing key \(record.keyId): \(error)")
            }
        }
    }

    func invalidate(_ tenant: UUID) { cache.invalidate(tenant) }
    func invalidateAll() { cache.invalidateAll() }
}

/// Tenants by slug. Tenants are never renamed or deleted, so found tenants are kept.
final class TenantDirectory: Sendable {
    private let repository: TenantRepository
    private let bySlug = Mutex<[String: TenantRecord]>([:])

    init(repository: TenantRepository) {
        self.repository = repository
    }

    func find(slug: String) async throws -> TenantRecord {
        if let known = bySlug.withLock({ $0[slug] }) { return known }
        // Only a well-formed slug goes to the database: libpq would cut "acme\0x" down to "acme".
        let wellFormed = (2...40).contains(slug.utf8.count)
            && slug.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
        guard wellFormed, let tenant = try await repository.find(slug: slug) else {
            throw GatewayError.notFound("no tenant '\(Self.printable(slug))'", reason: "unknown_tenant")
        }
        bySlug.withLock { $0[slug] = tenant }
        return tenant
    }

    /// A client-sent name, shortened and stripped of control characters, for messages.
    static func printable(_ text: String) -> String {
        let cleaned = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(64).map(Character.init))
        return text.unicodeScalars.count > 64 ? cleaned + "…" : cleaned
    }
}
