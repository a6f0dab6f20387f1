import Foundation
import JSONRPC

/// `system.*`: health, the transport baseline, and process statistics (see `SystemService`).
enum SystemMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "system.ping", access: .open, run: { _ in .object([:]) }, now: { _ in .now(.object([:])) }),
        MethodSpec(name: "system.health", access: .open) { ctx in
            let health = await ctx.services.system.health()
            return [
                "status": .string(health.databaseUp ? "ok" : "degraded"),
                "database": .string(health.databaseUp ? "ok" : "down"), "version": .string(health.version),
            ]
        },
        MethodSpec(name: "system.stats", access: .admin) { ctx in
            let system = ctx.services.system
            let pool = system.pool()
            var stats = system.stats.json.objectValue ?? [:]
            stats["pool"] = [
                "open": .int(pool.open), "idle": .int(pool.idle), "inUse": .int(pool.inUse),
                "connecting": .int(pool.connecting), "waiters": .int(pool.waiters),
                "maxConnections": .int(pool.maxConnections),
            ]
            stats["cachedCatalogs"] = .int(system.cachedCatalogs)
            stats["rememberedDecisions"] = .int(system.rememberedDecisions)
            stats["distinctDecisions"] = .int(system.distinctDecisions)
            let reads = system.customerReads
            stats["customerReads"] = ["roundTrips": .int(reads.roundTrips), "customers": .int(reads.keys)]
            return .object(stats)
        },
    ]
}
