import Foundation
import OfferStore
import Synchronization

/// Each tenant's Retention Messaging settings (or the fact that it has none), served from memory and dropped with the
/// tenant's catalog (retention.configure announces itself as a catalog change, migration 0007).
///
/// It also keeps the last settings it loaded for each tenant, whatever was invalidated since: when the database cannot
/// be reached, an answer to Apple still needs the default message id, and an approved message id that was current a
/// moment ago is a better answer than none (Apple would fall back to its own default). The same holds for the tenant
/// itself (its bundle id and app Apple id verify Apple's request).
final class RetentionSettingsCache: Sendable {
    private let repository: RetentionRepository
    private let cache = TenantCache<RetentionPlan?>()
    private let lastKnown = Mutex<[UUID: RetentionPlan?]>([:])
    /// The tenants answered for, by slug, as last found (tenants are never renamed or deleted).
    private let tenants = Mutex<[String: TenantRecord]>([:])

    init(repository: RetentionRepository) {
        self.repository = repository
    }

    /// The tenant's settings (nil: not configured).
    func settings(_ tenant: UUID) async throws -> RetentionPlan? {
        try await cache.value(for: tenant) { [self] in
            let loaded = try await repository.settings(tenant: tenant).map(RetentionPlan.init)
            lastKnown.withLock { $0[tenant] = .some(loaded) }
            return loaded
        }
    }

    /// The settings last loaded for the tenant, even if invalidated since (`.none`: never loaded here).
    func lastLoaded(_ tenant: UUID) -> RetentionPlan?? { lastKnown.withLock { $0[tenant] } }

    /// Keeps `tenant` as the last one found under its slug.
    func remember(_ tenant: TenantRecord) {
        tenants.withLock { known in
            if known[tenant.slug] != tenant { known[tenant.slug] = tenant }
        }
    }

    /// The tenant last found under `slug` here, if any.
    func lastTenant(slug: String) -> TenantRecord? { tenants.withLock { $0[slug] } }

    func invalidate(_ tenant: UUID) { cache.invalidate(tenant) }
    func invalidateAll(keepingNew: Bool = true) { cache.invalidateAll(keepingNew: keepingNew) }
}

/// A tenant's Retention Messaging settings with the index every answer looks offers up in, built once per load (not
/// once per answer: a configuration may hold a thousand offers).
struct RetentionPlan: Sendable {
    let settings: RetentionSettings
    /// Each promotional offer's approved message (the first configured, for an id listed twice).
    let offerMessages: [String: String]

    init(_ settings: RetentionSettings) {
        self.settings = settings
        offerMessages = Dictionary(settings.offers.map { ($0.targetId, $0.messageId) }) { first, _ in first }
    }
}
