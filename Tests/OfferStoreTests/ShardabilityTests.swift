import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// The schema stays shardable by tenant (Citus, distribution column `tenant_id`; docs/scaling.md), read from the
/// migrated schema's catalog, so every migration anyone adds is checked too: every table is a declared reference
/// table (`OfferDatabase.referenceTables`) or has a primary key leading with `tenant_id`, foreign keys leading with
/// `tenant_id` onto a key that leads with it (or onto a reference table), and unique keys that include it; a
/// reference table refers only to reference tables.
@Suite("The schema stays shardable by tenant")
struct ShardabilityTests {
    struct Constraint: Sendable {
        let table: String
        let kind: String
        let name: String
        let columns: [String]
        let referencedTable: String?
        let referencedColumns: [String]
    }

    @Test func everyKeyLeadsWithTenantIdOrTheTableIsADeclaredReferenceTable() async throws {
        try await TestDatabase.with { configuration in
            let database = try OfferDatabase.connect(url: configuration.conninfo, maxConnections: 1)
            defer { Task { await database.close() } }
            try await database.migrate()
            let tables = Set(
                try await database.pool.query(
                    """
                    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                    """
                ).map { try $0.decode(String.self, at: 0) })
            let constraints = try await Self.constraints(database)
            let uniqueIndexes = try await database.pool.query(
                """
                SELECT t.relname, i.relname,
                       ARRAY(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY k(n, o)
                               JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.n ORDER BY k.o)::text[]
                  FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
                  JOIN pg_namespace n ON n.oid = t.relnamespace
                 WHERE n.nspname = 'public' AND x.indisunique AND NOT x.indisprimary
                """
            ).map { try $0.decode(String.self, String.self, [String].self) }
            let reference = Set(OfferDatabase.referenceTables.keys)

            #expect(tables.count >= 17, "the migrated schema has its tables")
            #expect(reference.isSubset(of: tables), "declared reference tables exist: \(reference.subtracting(tables))")
            var findings: [String] = []
            for table in tables.sorted() where !reference.contains(table) {
                let primary = constraints.first { $0.table == table && $0.kind == "p" }
                if primary?.columns.first != "tenant_id" {
                    findings.append("\(table): primary key \(primary?.columns ?? []) does not lead with tenant_id")
                }
            }
            for fk in constraints where fk.kind == "f" {
                let target = fk.referencedTable ?? "?"
                if reference.contains(fk.table) {
                    if !reference.contains(target) {
                        findings.append("\(fk.table).\(fk.name): a reference table refers to distributed \(target)")
                    }
                } else if !reference.contains(target)
                    && (fk.columns.first != "tenant_id" || fk.referencedColumns.first != "tenant_id")
                {
                    findings.append(
                        "\(fk.table).\(fk.name): \(fk.columns) → \(target)\(fk.referencedColumns) does not lead with "
                            + "tenant_id")
                }
            }
            for (table, index, columns) in uniqueIndexes where !reference.contains(table) {
                if !columns.contains("tenant_id") {
                    findings.append("\(table).\(index): unique on \(columns) without tenant_id")
                }
            }
            #expect(findings.isEmpty, "\(findings.joined(separator: "\n"))")
        }
    }

    /// Primary, foreign and unique constraints of the public schema, with their columns in key order.
    static func constraints(_ database: OfferDatabase) async throws -> [Constraint] {
        try await database.pool.query(
            """
            SELECT t.relname, c.contype::text, c.conname,
                   ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o)
                           JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o)::text[],
                   r.relname,
                   ARRAY(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, o)
                           JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)::text[]
              FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
              JOIN pg_namespace n ON n.oid = t.relnamespace
              LEFT JOIN pg_class r ON r.oid = c.confrelid
             WHERE n.nspname = 'public' AND c.contype IN ('p', 'f', 'u')
            """
        ).map { row in
            let (table, kind, name, columns, referenced, referencedColumns) = try row.decode(
                String.self, String.self, String.self, [String].self, String?.self, [String].self)
            return Constraint(
                table: table, kind: kind, name: name, columns: columns, referencedTable: referenced,
                referencedColumns: referencedColumns)
        }
    }
}
