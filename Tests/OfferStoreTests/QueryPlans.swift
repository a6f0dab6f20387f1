import Postgres

/// What the plan tests read of PostgreSQL's plans.
enum QueryPlans {
    /// `lookup`'s generic plan (the one a connection caches after its first executions), as `EXPLAIN (COSTS OFF)`
    /// lines: prepared as `name`, executed with `arguments` (its parameters as SQL literals, in order: EXECUTE takes
    /// no bind parameters).
    static func generic(
        _ lookup: PostgresQuery, name: String, arguments: String, on connection: PostgresConnection
    ) async throws -> String {
        try await connection.query("SET plan_cache_mode = force_generic_plan")
        try await connection.query(PostgresQuery(unsafeSQL: "PREPARE \(name) AS " + lookup.sql))
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: "EXPLAIN (COSTS OFF) EXECUTE \(name)(\(arguments))"))
        return try rows.map { try $0.decode(String.self, at: 0) }.joined(separator: "\n")
    }

    /// The plan's `Index Cond:` lines (a condition in a `Filter:` line is checked row by row, not looked up).
    static func indexCondition(of plan: String) -> String {
        plan.split(separator: "\n").filter { $0.contains("Index Cond:") }.joined(separator: "\n")
    }
}
