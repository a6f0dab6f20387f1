import Foundation
import Postgres

/// The gateway's database: a connection pool plus the schema it expects.
public struct OfferDatabase: Sendable {
    public let pool: PostgresPool

    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Opens a pool on `url` (a libpq connection string or URI).
    public static func connect(
        url: String, maxConnections: Int = 16, acquireTimeout: Duration = .seconds(5),
        applicationName: String = "offergate"
    ) throws(StoreError) -> OfferDatabase {
        do {
            let configuration = try PostgresConfiguration(conninfo: url, applicationName: applicationName)
            let pool = PostgresPool(
                configuration: configuration, maxConnections: maxConnections, acquireTimeout: acquireTimeout)
            return OfferDatabase(pool: pool)
        } catch {
            throw StoreError.wrap(error)
        }
    }

    /// The schema migrations carried in this binary (generated from `migrations/` by `ops/gen-migrations`).
    public static var migrations: [Migration] { EmbeddedMigrations.all }

    /// Applies pending migrations (idempotent; safe when several processes do it at once). Returns the versions
    /// applied by this call.
    @discardableResult
    public func migrate() async throws(StoreError) -> [Int] {
        try await storeCall { try await Migrator(migrations: Self.migrations).migrate(on: pool) }
    }

    /// Whether the database answers.
    public func ping() async -> Bool {
        (try? await pool.query("SELECT 1", prepared: true)) != nil
    }

    public var tenants: TenantRepository { TenantRepository(pool: pool) }
    public var signingKeys: SigningKeyRepository { SigningKeyRepository(pool: pool) }
    public var catalog: CatalogRepository { CatalogRepository(pool: pool) }
    public var subscriptions: SubscriptionRepository { SubscriptionRepository(pool: pool) }
    public var signatures: SignatureLedger { SignatureLedger(pool: pool) }
}
