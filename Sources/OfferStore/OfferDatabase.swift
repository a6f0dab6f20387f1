import Foundation
import Postgres

/// The gateway's database: a connection pool plus the schema it expects. PostgreSQL's own types stay inside the
/// store: callers see repositories, `StoreError`, `PoolStats` and `ChangeFeed`.
public struct OfferDatabase: Sendable {
    /// The statement timeout `connect` applies unless told otherwise.
    public static let defaultStatementTimeout: Duration = .seconds(30)

    let pool: PostgresPool

    init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Opens a pool on `url` (a libpq connection string or URI). Every statement of every pooled connection runs
    /// under `statementTimeout` (the server stops it after that long; `.zero` disables the limit).
    public static func connect(
        url: String, maxConnections: Int = 16, acquireTimeout: Duration = .seconds(5),
        applicationName: String = "offergate", statementTimeout: Duration = defaultStatementTimeout
    ) throws(StoreError) -> OfferDatabase {
        do {
            let configuration = try PostgresConfiguration(
                conninfo: url, applicationName: applicationName, statementTimeout: statementTimeout)
            let pool = PostgresPool(
                configuration: configuration, maxConnections: maxConnections, acquireTimeout: acquireTimeout)
            return OfferDatabase(pool: pool)
        } catch {
            throw StoreError.wrap(error)
        }
    }

    /// The tables that would not be distributed by `tenant_id` if the schema were sharded by tenant (Citus; see
    /// docs/scaling.md), with why: small tables looked up by something other than the tenant, which Citus keeps as
    /// reference tables (a copy on every node, so their global unique keys still hold). Every other table's primary
    /// key, foreign keys and unique keys lead with or include `tenant_id` (ShardabilityTests checks the migrated
    /// schema, whoever adds a migration).
    public static let referenceTables: [String: String] = [
        "tenants": "a request names its tenant by slug (unique across tenants), before any tenant id is known",
        "api_keys": "session.authenticate finds the tenant from the key's lookup (unique across tenants)",
        "schema_migrations": "the migrator's own bookkeeping, one row per migration",
    ]

    /// The schema migrations carried in this binary (generated from `migrations/` by `ops/gen-migrations`).
    static var migrations: [Migration] { EmbeddedMigrations.all }

    /// Applies pending migrations (idempotent; safe when several processes do it at once). Returns the versions
    /// applied by this call. Not bounded by the statement timeout.
    @discardableResult
    public func migrate() async throws(StoreError) -> [Int] {
        try await storeCall { try await Migrator(migrations: Self.migrations).migrate(on: pool) }
    }

    /// Whether the database answers.
    public func ping() async -> Bool {
        (try? await pool.query("SELECT 1", prepared: true)) != nil
    }

    /// Whether the database answers and holds every migration this binary carries (for `/readyz`).
    public func schemaState() async -> SchemaState {
        guard await ping() else { return .databaseDown }
        let applied: Set<Int>
        do {
            let rows = try await pool.query("SELECT version::int8 FROM schema_migrations")
            applied = Set(try rows.map { try $0.decode(Int.self, at: 0) })
        } catch {
            // No migrations table yet (a database never migrated), or it went away meanwhile.
            return await ping() ? .behind(missing: Self.migrations.map(\.version)) : .databaseDown
        }
        let missing = Self.migrations.map(\.version).filter { !applied.contains($0) }
        return missing.isEmpty ? .current : .behind(missing: missing)
    }

    /// Analyses every table of the schema that PostgreSQL has never analysed although at least `minimumChanges` of
    /// its rows changed, and returns their names and how many tables are still without statistics after it.
    ///
    /// Why: until a table's first `ANALYZE`, PostgreSQL 15 plans its lookups from its size alone, and a generic plan
    /// cached by a connection then (in the first seconds of a fresh database under load) can pick the wrong index:
    /// the redemption batch's per-customer count was seen scanning every redemption of the tenant through the
    /// primary key, batch after batch, slower as the table grew, until autovacuum's first analysis (which waits for
    /// its one-minute nap) invalidated the plan. An `ANALYZE` at a few hundred rows costs milliseconds, once.
    public func analyzeNeverAnalysed(minimumChanges: Int) async throws(StoreError) -> (
        analysed: [String], stillUnanalysed: Int
    ) {
        try await storeCall {
            let rows = try await pool.query(
                """
                SELECT format('%I.%I', schemaname, relname), n_mod_since_analyze >= \(Int64(minimumChanges))
                FROM pg_stat_user_tables
                WHERE schemaname = current_schema() AND last_analyze IS NULL AND last_autoanalyze IS NULL
                ORDER BY relname
                """, prepared: true)
            var analysed: [String] = []
            var waiting = 0
            for row in rows {
                let (table, due) = try row.decode(String.self, Bool.self)
                guard due else {
                    waiting += 1
                    continue
                }
                // `table` is an identifier quoted by format('%I'), from the catalog: safe as SQL text.
                try await pool.query(PostgresQuery(unsafeSQL: "ANALYZE \(table)"))
                analysed.append(table)
            }
            return (analysed, waiting)
        }
    }

    /// The pool's counters now.
    public func stats() -> PoolStats {
        let s = pool.stats()
        return PoolStats(
            open: s.open, idle: s.idle, inUse: s.inUse, connecting: s.connecting, waiters: s.waiters,
            maxConnections: s.maxConnections)
    }

    /// Closes the pool: idle connections now, leased ones when given back; later calls fail as unavailable.
    public func close() async {
        await pool.close()
    }

    public var tenants: TenantRepository { TenantRepository(pool: pool) }
    public var signingKeys: SigningKeyRepository { SigningKeyRepository(pool: pool) }
    public var catalog: CatalogRepository { CatalogRepository(pool: pool) }
    public var subscriptions: SubscriptionRepository { SubscriptionRepository(pool: pool) }
    public var appleData: AppleDataRepository { AppleDataRepository(pool: pool) }
    public var customerRecords: CustomerRecordsRepository { CustomerRecordsRepository(pool: pool) }
    public var signatures: SignatureLedger { SignatureLedger(pool: pool) }
    public var funnel: FunnelRepository { FunnelRepository(pool: pool) }
    public var retention: RetentionRepository { RetentionRepository(pool: pool) }
}

/// What `OfferDatabase.schemaState()` found.
public enum SchemaState: Sendable, Equatable {
    case current
    case databaseDown
    /// Migrations this binary carries that the database has not applied.
    case behind(missing: [Int])
}

/// A snapshot of the database pool's counters (for `system.stats`).
public struct PoolStats: Sendable, Equatable {
    /// Open connections (idle + in use).
    public var open: Int
    public var idle: Int
    public var inUse: Int
    /// Connections being opened.
    public var connecting: Int
    /// Tasks waiting for a connection.
    public var waiters: Int
    public var maxConnections: Int

    public init(open: Int, idle: Int, inUse: Int, connecting: Int, waiters: Int, maxConnections: Int) {
        self.open = open
        self.idle = idle
        self.inUse = inUse
        self.connecting = connecting
        self.waiters = waiters
        self.maxConnections = maxConnections
    }
}
