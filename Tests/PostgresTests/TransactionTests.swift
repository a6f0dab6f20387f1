import Foundation
import Postgres
import Synchronization
import Testing

/// Waits until `parties` tasks have arrived (later arrivals pass straight through).
actor Rendezvous {
    let parties: Int
    private var arrived = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(parties: Int) { self.parties = parties }

    func arrive() async {
        arrived += 1
        if arrived >= parties {
            waiting.forEach { $0.resume() }
            waiting.removeAll()
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }
}

struct Boom: Error {}

extension PostgresIntegrationTests {
    @Suite("Transactions")
    struct TransactionTests {
        @Test func commitAndRollbackOnThrow() async throws {
            try await PostgresTestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                try await pool.query("CREATE TABLE t (k text PRIMARY KEY)")
                let value = try await pool.withTransaction { tx in
                    try await tx.query("INSERT INTO t VALUES (\("kept"))")
                    return try await tx.query("SELECT count(*) FROM t").scalar(Int.self)
                }
                #expect(value == 1)
                await #expect(throws: Boom.self) {
                    try await pool.withTransaction { tx in
                        try await tx.query("INSERT INTO t VALUES (\("dropped"))")
                        throw Boom()
                    }
                }
                // A server error inside the body also rolls back.
                let error = await expectPostgresError {
                    try await pool.withTransaction { tx in
                        try await tx.query("INSERT INTO t VALUES (\("dropped-too"))")
                        try await tx.query("INSERT INTO t VALUES (\("kept"))")
                    }
                }
                #expect(error?.sqlState == "23505")
                #expect(error?.constraint == "t_pkey")
                // Swallowing an error inside the body cannot commit: COMMIT reports the rollback.
                let aborted = await expectPostgresError {
                    try await pool.withTransaction { tx in
                        try await tx.query("INSERT INTO t VALUES (\("swallowed"))")
                        _ = try? await tx.query("SELECT 1/0")
                    }
                }
                #expect(aborted?.kind == .transactionAborted)
                let keys = try await pool.query("SELECT k FROM t ORDER BY k").map { try $0.decode(String.self, at: 0) }
                #expect(keys == ["kept"])
                // The connection went back clean (not left inside a transaction).
                let xid1 = try await pool.query("SELECT txid_current()").scalar(Int64.self)
                let xid2 = try await pool.query("SELECT txid_current()").scalar(Int64.self)
                #expect(xid1 != xid2)
                #expect(pool.stats().inUse == 0)
            }
        }

        @Test func isolationLevelIsApplied() async throws {
            try await PostgresTestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                for level in [PostgresIsolationLevel.readCommitted, .repeatableRead, .serializable] {
                    let shown = try await pool.withTransaction(isolation: level) { tx in
                        try await tx.query("SHOW transaction_isolation").scalar(String.self)
                    }
                    #expect(shown == level.rawValue.lowercased())
                }
            }
        }

        @Test func serializationFailureIsRetried() async throws {
            try await PostgresTestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 2)
                defer { Task { await pool.close() } }
                try await pool.query("CREATE TABLE items (k int, seen bigint)")
                let rendezvous = Rendezvous(parties: 2)
                let runs = Atomic<Int>(0)
                // Write skew: each reads the other's class, then inserts into its own. Under SERIALIZABLE one of
                // the two must fail with 40001 and is run again; the retry sees the other's row.
                let writeSkew: @Sendable (Int, Int) async throws -> Int64 = { reads, writes in
                    try await pool.withTransaction(isolation: .serializable) { tx in
                        runs.add(1, ordering: .relaxed)
                        let seen =
                            try await tx.query("SELECT count(*) FROM items WHERE k = \(reads)")
                            .scalar(Int64.self) ?? -1
                        await rendezvous.arrive()
                        try await tx.query("INSERT INTO items VALUES (\(writes), \(seen))")
                        return seen
                    }
                }
                let seen = try await withThrowingTaskGroup(of: Int64.self) { group in
                    group.addTask { try await writeSkew(1, 2) }
                    group.addTask { try await writeSkew(2, 1) }
                    return try await group.reduce(into: []) { $0.append($1) }.sorted()
                }
                #expect(runs.load(ordering: .relaxed) == 3)
                #expect(seen == [0, 1])
                let rows = try await pool.query("SELECT k, seen FROM items ORDER BY seen")
                #expect(rows.count == 2)
                #expect(try rows.map { try $0.decode(Int64.self, at: 1) } == [0, 1])
            }
        }

        @Test func retriesAreBoundedAndTheLastErrorIsThrown() async throws {
            try await PostgresTestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                let runs = Atomic<Int>(0)
                let error = await expectPostgresError {
                    try await pool.withTransaction(maxAttempts: 3) { tx in
                        runs.add(1, ordering: .relaxed)
                        try await tx.query(
                            """
                            DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = 'serialization_failure'; END $$
                            """)
                    }
                }
                #expect(error?.sqlState == "40001")
                #expect(error?.isRetryable == true)
                #expect(runs.load(ordering: .relaxed) == 3)
            }
        }
    }
}
