import Foundation
import OfferTestSupport
import Postgres
import Testing

extension PostgresIntegrationTests {
    @Suite("Migrations")
    struct MigrationTests {
        static let migrations = [
            Migration(
                version: 1, name: "tenants", sql: "CREATE TABLE tenants (id uuid PRIMARY KEY, name text NOT NULL);"),
            Migration(
                version: 2, name: "codes",
                sql: """
                    CREATE TABLE codes (tenant_id uuid NOT NULL REFERENCES tenants, code text NOT NULL,
                        PRIMARY KEY (tenant_id, code));
                    -- several statements in one migration; a non-ASCII comment: ü 😀
                    CREATE INDEX codes_code ON codes (code);
                    """),
            Migration(
                version: 10, name: "counter", sql: "CREATE TABLE counter (n int); INSERT INTO counter VALUES (0);"),
        ]

        @Test func appliesOnceAndIsANoOpTheSecondTime() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 2)
                defer { Task { await pool.close() } }
                let migrator = Migrator(migrations: Self.migrations.reversed())
                #expect(try await migrator.migrate(on: pool) == [1, 2, 10])
                #expect(try await migrator.migrate(on: pool) == [])
                let rows = try await pool.query(
                    "SELECT version, name, checksum FROM schema_migrations ORDER BY version")
                #expect(try rows.map { try $0.decode(Int.self, at: 0) } == [1, 2, 10])
                #expect(try rows.map { try $0.decode(String.self, at: 1) } == ["tenants", "codes", "counter"])
                // SHA-256 of the SQL text, in hex (known answer from Python's hashlib).
                #expect(
                    try rows[0].decode(String.self, at: 2)
                        == "0375d75040ea1317b77bfc2b6f2a6bc8661150404e5b2eb9957dd5e1add3d16b")
                #expect(try await pool.query("SELECT n FROM counter").scalar(Int.self) == 0)
                // A later migration is applied on its own.
                let more = Migrator(
                    migrations: Self.migrations + [
                        Migration(version: 11, name: "bump", sql: "UPDATE counter SET n = n + 1;")
                    ])
                #expect(try await more.migrate(on: pool) == [11])
                #expect(try await more.migrate(on: pool) == [])
                #expect(try await pool.query("SELECT n FROM counter").scalar(Int.self) == 1)
            }
        }

        @Test func editedAppliedMigrationIsRejected() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                #expect(try await Migrator(migrations: Self.migrations).migrate(on: pool) == [1, 2, 10])
                var edited = Self.migrations
                edited[1].sql += "\nCREATE INDEX codes_tenant ON codes (tenant_id);"
                edited.append(Migration(version: 20, name: "later", sql: "CREATE TABLE later ();"))
                let error = await expectPostgresError { _ = try await Migrator(migrations: edited).migrate(on: pool) }
                #expect(error?.kind == .migrationChecksumMismatch(version: 2))
                // Nothing after the mismatch ran.
                let later = try await pool.query("SELECT to_regclass('later') IS NULL").scalar(Bool.self)
                #expect(later == true)
            }
        }

        @Test func failingMigrationRollsBackAndIsNotRecorded() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                let bad = [
                    Self.migrations[0],
                    Migration(version: 2, name: "bad", sql: "CREATE TABLE half (x int); SELECT 1/0;"),
                ]
                let error = await expectPostgresError { _ = try await Migrator(migrations: bad).migrate(on: pool) }
                #expect(error?.sqlState == "22012")
                #expect(error?.message.contains("migration 2") == true)
                let versions = try await pool.query("SELECT array_agg(version) FROM schema_migrations")
                #expect(try versions.scalar([Int64].self) == [1])
                #expect(try await pool.query("SELECT to_regclass('half') IS NULL").scalar(Bool.self) == true)
                // The advisory lock was released: migrating again works (and fails the same way).
                let again = await expectPostgresError { _ = try await Migrator(migrations: bad).migrate(on: pool) }
                #expect(again?.sqlState == "22012")
                let duplicate = await expectPostgresError {
                    _ = try await Migrator(migrations: [Self.migrations[0], Self.migrations[0]]).migrate(on: pool)
                }
                #expect(duplicate?.kind == .invalidMigration)
            }
        }

        @Test func twoPoolsMigratingAtOnceApplyEachMigrationOnce() async throws {
            try await TestDatabase.with { config in
                let poolA = PostgresPool(configuration: config, maxConnections: 1)
                let poolB = PostgresPool(configuration: config, maxConnections: 1)
                let migrations = [
                    Migration(version: 1, name: "create", sql: "CREATE TABLE log (n int);"),
                    Migration(version: 2, name: "insert", sql: "INSERT INTO log VALUES (1);"),
                ]
                // The two runs overlap for certain: a third session holds the migration lock until both runs are
                // seen waiting for it in pg_locks, then lets them race.
                let holder = PostgresPool(configuration: config, maxConnections: 1)
                _ = try await holder.query("SELECT pg_advisory_lock(\(Migrator.advisoryLockKey))")
                let results = try await withThrowingTaskGroup(of: [Int].self) { group in
                    group.addTask { try await Migrator(migrations: migrations).migrate(on: poolA) }
                    group.addTask { try await Migrator(migrations: migrations).migrate(on: poolB) }
                    let bothWaiting = try await eventually {
                        try await holder.query(
                            """
                            SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                                AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                            """
                        ).scalar(Int.self) == 2
                    }
                    #expect(bothWaiting)
                    let unlocked = try await holder.query("SELECT pg_advisory_unlock(\(Migrator.advisoryLockKey))")
                    #expect(try unlocked.scalar(Bool.self) == true)
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                await holder.close()
                #expect(results.sorted { $0.count < $1.count } == [[], [1, 2]])
                #expect(try await poolA.query("SELECT count(*) FROM log").scalar(Int.self) == 1)
                #expect(try await poolB.query("SELECT count(*) FROM schema_migrations").scalar(Int.self) == 2)
                await poolA.close()
                await poolB.close()
            }
        }
    }
}
