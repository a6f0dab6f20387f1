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

    func health() async -> Health {
        Health(databaseUp: await database.ping(), version: version)
    }

    /// Whether the database answers with the schema this binary expects (`/readyz`).
    func schemaState() async -> SchemaState { await database.schemaState() }

    /// The connection pool's state.
    func pool() -> PoolStats { database.stats() }

    var cachedCatalogs: Int { caches.catalogs.count }
    var rememberedDecisions: Int { caches.decisions.count }
    /// Distinct answers among the latest decisions, each held once and shared by every question it answers.
    var distinctDecisions: Int { caches.decisions.sharedCount }
    /// Batched reads of customers' records so far, and the customers they read.
    var customerReads: (roundTrips: Int, keys: Int) { caches.customers.reads }
}
