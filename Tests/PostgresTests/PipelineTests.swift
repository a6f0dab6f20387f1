import Foundation
import OfferTestSupport
import Postgres
import Testing

extension PostgresIntegrationTests {
    @Suite("Pipelines")
    struct PipelineTests {
        @Test func pipelineReturnsEachStatementsResult() async throws {
            try await TestDatabase.with { config in
                let connection = try await PostgresConnection.connect(configuration: config)
                try await connection.query("CREATE TABLE p (k int PRIMARY KEY, v text)")
                for prepared in [false, true] {
                    try await connection.query("TRUNCATE p")
                    var queries: [PostgresQuery] = (1...50).map { "INSERT INTO p VALUES (\($0), \("v\($0)"))" }
                    queries.append("SELECT count(*), max(v) FROM p WHERE k > \(0)")
                    let results = try await connection.pipeline(queries, prepared: prepared)
                    #expect(results.count == 51)
                    for result in results.prefix(50) { #expect(try result.get().affectedRows == 1) }
                    let last = try results[50].get()
                    #expect(try last[0].decode(Int.self, at: 0) == 50)
                    #expect(try last[0].decode(String.self, at: 1) == "v9")
                }
                #expect(try await connection.pipeline([]).isEmpty)
                await connection.close()
            }
        }

        @Test func failingStatementAbortsTheRestAndTheConnectionStaysUsable() async throws {
            try await TestDatabase.with { config in
                let connection = try await PostgresConnection.connect(configuration: config)
                try await connection.query("CREATE TABLE p (k int PRIMARY KEY)")
                let results = try await connection.pipeline([
                    "INSERT INTO p VALUES (\(1))",
                    "SELECT 1 / \(0)",
                    "INSERT INTO p VALUES (\(2))",
                ])
                #expect(results.count == 3)
                #expect(try results[0].get().affectedRows == 1)
                guard case .failure(let middle) = results[1], case .failure(let aborted) = results[2] else {
                    Issue.record("expected the second and third statements to fail")
                    return
                }
                #expect(middle.sqlState == "22012")
                #expect(middle.kind == .server)
                #expect(aborted.kind == .pipelineAborted)
                // The sync group is one implicit transaction: the first insert was rolled back too.
                #expect(try await connection.query("SELECT count(*) FROM p").scalar(Int.self) == 0)
                // Still usable, outside pipeline mode, for both plain queries and a new pipeline.
                #expect(try await connection.query("SELECT 5").scalar(Int.self) == 5)
                let again = try await connection.pipeline(["INSERT INTO p VALUES (\(3))", "SELECT k FROM p"])
                #expect(try again[1].get().scalar(Int.self) == 3)
                await connection.close()
            }
        }

        @Test func pipelineInsideATransaction() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                try await pool.query("CREATE TABLE p (k int PRIMARY KEY)")
                let count = try await pool.withTransaction { tx in
                    let results = try await tx.pipeline(["INSERT INTO p VALUES (\(1))", "INSERT INTO p VALUES (\(2))"])
                    for r in results { _ = try r.get() }
                    return try await tx.query("SELECT count(*) FROM p").scalar(Int.self)
                }
                #expect(count == 2)
                let error = await expectPostgresError {
                    try await pool.withTransaction { tx in
                        try await tx.query("INSERT INTO p VALUES (\(10))")
                        let results = try await tx.pipeline([
                            "INSERT INTO p VALUES (\(11))", "INSERT INTO p VALUES (\(1))",
                        ])
                        for r in results { _ = try r.get() }
                    }
                }
                #expect(error?.sqlState == "23505")
                #expect(try await pool.query("SELECT array_agg(k ORDER BY k) FROM p").scalar([Int64].self) == [1, 2])
            }
        }

        @Test func largePipelineDoesNotDeadlock() async throws {
            try await TestDatabase.with { config in
                let connection = try await PostgresConnection.connect(configuration: config)
                // Big results and big requests at once: exercises non-blocking flush while reading.
                let payload = String(repeating: "x", count: 20_000)
                let queries: [PostgresQuery] = (0..<400).map { _ in "SELECT repeat(\(payload), 5)" }
                let results = try await connection.pipeline(queries, prepared: true)
                #expect(results.count == 400)
                #expect(try results[399].get().scalar(String.self)?.count == 100_000)
                await connection.close()
            }
        }
    }
}
