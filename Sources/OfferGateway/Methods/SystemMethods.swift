import Foundation
import JSONRPC
import OfferCrypto

/// `system.*`: health, the transport baseline, and process statistics.
enum SystemMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "system.ping", access: .open) { _ in .object([:]) },
        MethodSpec(name: "system.health", access: .open) { ctx in
            let up = await ctx.gateway.database.ping()
            return [
                "status": .string(up ? "ok" : "degraded"), "database": .string(up ? "ok" : "down"),
                "version": .string(ctx.gateway.options.version),
            ]
        },
        MethodSpec(name: "system.stats", access: .admin) { ctx in
            let pool = ctx.gateway.database.stats()
            var stats = ctx.gateway.stats.json.objectValue ?? [:]
            stats["pool"] = [
                "open": .int(pool.open), "idle": .int(pool.idle), "inUse": .int(pool.inUse),
                "connecting": .int(pool.connecting), "waiters": .int(pool.waiters),
                "maxConnections": .int(pool.maxConnections),
            ]
            stats["cachedCatalogs"] = .int(ctx.gateway.catalogs.count)
            stats["rememberedDecisions"] = .int(ctx.gateway.decisions.count)
            return .object(stats)
        },
    ]
}

/// `session.authenticate`: binds the connection to a tenant, or to the admin role.
enum SessionMethods {
    struct Params: Decodable { let apiKey: String }

    static let all: [MethodSpec] = [
        MethodSpec(name: "session.authenticate", access: .open) { ctx in
            let params = try ctx.params(Params.self)
            let gateway = ctx.gateway
            if let adminDigest = gateway.adminKeyDigest,
                ConstantTime.equals(SHA256.hash(params.apiKey), adminDigest)
            {
                ctx.session.principal = .admin
                return ["tenant": .null, "role": "admin"]
            }
            guard let lookup = ApiKeys.lookup(of: params.apiKey),
                let found = try await gateway.database.tenants.findApiKey(lookup: lookup),
                ConstantTime.equals(SHA256.hash(params.apiKey), found.hash)
            else {
                throw GatewayError.unauthenticated("invalid API key", reason: "invalid_api_key")
            }
            ctx.session.principal = .tenant(found.tenant)
            return ["tenant": .string(found.tenant.slug), "role": "tenant"]
        }
    ]
}
