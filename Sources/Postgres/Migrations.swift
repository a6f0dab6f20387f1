import Foundation

/// One schema migration: applied once, in its own transaction, recorded in `schema_migrations`.
///
/// The SQL runs with the simple query protocol, so it may hold several statements; it must not contain its own
/// `BEGIN`/`COMMIT` or statements that cannot run in a transaction (`CREATE INDEX CONCURRENTLY`).
public struct Migration: Sendable, Hashable {
    public var version: Int
    public var name: String
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// Reads `NNNN_name.sql` files (name: letters, digits, `_`, `-`) sorted by number. Other file extensions are
    /// ignored; a `.sql` file with a bad name or a duplicate number throws `.invalidMigration`.
    public static func load(directory: URL) throws -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw PostgresError(kind: .invalidMigration, message: "cannot list migrations directory: \(error)")
        }
        var migrations: [Migration] = []
        for file in names.sorted() where file.hasSuffix(".sql") {
            guard let (version, name) = parseFileName(file) else {
                throw PostgresError(
                    kind: .invalidMigration, message: "bad migration file name \(file) (want NNNN_name.sql)")
            }
            if migrations.contains(where: { $0.version == version }) {
                throw PostgresError(kind: .invalidMigration, message: "duplicate migration number \(version)")
            }
            let sql: String
            do {
                sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            } catch {
                throw PostgresError(kind: .invalidMigration, message: "cannot read migration \(file): \(error)")
            }
            migrations.append(Migration(version: version, name: name, sql: sql))
        }
        return migrations.sorted { $0.version < $1.version }
    }

    static func parseFileName(_ file: String) -> (Int, String)? {
        let stem = file.dropLast(4)
        guard let underscore = stem.firstIndex(of: "_") else { return nil }
        let digits = stem[..<underscore]
        let name = stem[stem.index(after: underscore)...]
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let version = Int(digits),
            !name.isEmpty,
            name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") })
        else { return nil }
        return (version, String(name))
    }
}

/// Applies migrations exactly once, even with several processes migrating at once: the whole run holds a
/// session-level `pg_advisory_lock` on one dedicated connection.
public struct Migrator: Sendable {
    /// The advisory lock key ("OfferGat" in ASCII).
    public static let advisoryLockKey: Int64 = 0x4f66_6665_7247_6174

    public let migrations: [Migration]

    public init(migrations: [Migration]) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    /// Applies pending migrations in version order; returns the versions applied by this call (empty when all
    /// were applied already). Throws `.migrationChecksumMismatch(version:)` if an applied migration's SQL changed.
    public func migrate(on pool: PostgresPool) async throws -> [Int] {
        try await migrate(configuration: pool.configuration)
    }

    /// Same, connecting with `configuration`.
    public func migrate(configuration: PostgresConfiguration) async throws -> [Int] {
        var seen = Set<Int>()
        for m in migrations where !seen.insert(m.version).inserted {
            throw PostgresError(kind: .invalidMigration, message: "duplicate migration version \(m.version)")
        }
        let connection = try await PostgresConnection.connect(configuration: configuration)
        do {
            let applied = try await connection.runMigrations(migrations, lockKey: Self.advisoryLockKey)
            await connection.close()
            return applied
        } catch {
            // Closing the session releases the advisory lock.
            await connection.close()
            throw error
        }
    }
}

extension PostgresConnection {
    func runMigrations(_ migrations: [Migration], lockKey: Int64) throws -> [Int] {
        // A migration, and the wait for another process's, may take longer than a request's statement timeout.
        try runSimpleQuery(unsafeSQL: "SET statement_timeout = 0")
        try runQuery("SELECT pg_advisory_lock(\(lockKey))")
        defer { _ = try? runQuery("SELECT pg_advisory_unlock(\(lockKey))") }
        try runSimpleQuery(
            unsafeSQL: """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version int PRIMARY KEY,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """)
        var appliedChecksums: [Int: String] = [:]
        for row in try runQuery("SELECT version, checksum FROM schema_migrations") {
            let (version, checksum) = try row.decode(Int.self, String.self)
            appliedChecksums[version] = checksum
        }
        var applied: [Int] = []
        for migration in migrations {
            let checksum =
                try runQuery("SELECT encode(sha256(convert_to(\(migration.sql), 'UTF8')), 'hex')")
                .scalar(String.self) ?? ""
            if let existing = appliedChecksums[migration.version] {
                guard existing == checksum else {
                    throw PostgresError(
                        kind: .migrationChecksumMismatch(version: migration.version),
                        message: "migration \(migration.version) (\(migration.name)) was changed after it was applied")
                }
                continue
            }
            try runSimpleQuery(unsafeSQL: "BEGIN")
            do {
                try runSimpleQuery(unsafeSQL: migration.sql)
                try runQuery(
                    """
                    INSERT INTO schema_migrations (version, name, checksum)
                    VALUES (\(migration.version), \(migration.name), \(checksum))
                    """)
                try runSimpleQuery(unsafeSQL: "COMMIT")
            } catch var error as PostgresError {
                rollbackIfInTransaction()
                error.message = "migration \(migration.version) (\(migration.name)): " + error.message
                throw error
            } catch {
                rollbackIfInTransaction()
                throw error
            }
            applied.append(migration.version)
        }
        return applied
    }
}
