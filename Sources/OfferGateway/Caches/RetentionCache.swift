import Foundation
import OfferStore
import Synchronization

/// Each tenant's Retention Messaging settings (or the fact that it has none), served from memory and dropped with the
/// tenant's catalog (retention.configure announces itself as a catalog change, migration 0007).
///
/// It also keeps the last settings it loaded for each tenant, whatever was invalidated since: when the database cannot
/// be reached, an answer to Apple still needs the default message id, and an approved message id that was current a
/// moment ago is a better answer than none (Apple would fall back to its own default).
final class RetentionSettingsCache: Sendable {
    private let repository: RetentionRepository
    private let cache = TenantCache<RetentionSettings?>()
    private let lastKnown = Mutex<[UUID: RetentionSettings?]>([:])

    init(repository: RetentionRepository) {
        self.repository = repository
    }

    /// The tenant's settings (nil: not configured).
    func settings(_ tenant: UUID) async throws -> RetentionSettings? {
        try await cache.value(for: tenant) { [self] in
            let loaded = try await repository.settings(tenant: tenant)
            lastKnown.withLock { $0[tenant] = .some(loaded) }
            return loaded
        }
    }

    /// The settings last loaded for the tenant, even if invalidated since (`.none`: never loaded here).
    func lastLoaded(_ tenant: UUID) -> RetentionSettings?? { lastKnown.withLock { $0[tenant] } }

    func invalidate(_ tenant: UUID) { cache.invalidate(tenant) }
    func invalidateAll() { cache.invalidateAll() }
}
