import Foundation
import OfferStore

/// The process itself: health, and what `system.stats` shows.
struct SystemService: Sendable {
    let database: OfferDatabase
    let caches: GatewayCaches
    let stats: GatewayStats
    let version: String

    struct Health: Sendable {
        let databaseUp: Bool
        let version: String
    }

    /// The connection pool's state.
    struct Pool: Sendable {
        let open: Int
        let idle: Int
        let inUse: Int
        let connecting: Int
        let waiters: Int
        let maxConnections: Int
    }

    func health() async -> Health {
        Health(databaseUp: await database.ping(), version: version)
    }

    func pool() -> Pool {
        let pool = database.stats()
        return Pool(
            open: pool.open, idle: pool.idle, inUse: pool.inUse, connecting: pool.connecting, waiters: pool.waiters,
            maxConnections: pool.maxConnections)
    }

    var cachedCatalogs: Int { caches.catalogs.count }
    var rememberedDecisions: Int { caches.decisions.count }
}
