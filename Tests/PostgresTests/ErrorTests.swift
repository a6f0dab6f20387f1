import Foundation
import OfferTestSupport
import Postgres
import Testing

extension PostgresIntegrationTests {
    @Suite("Errors")
    struct ErrorTests {
        static let secret = "sk_live_TOP-SECRET-4242"

        @Test func serverErrorsCarrySQLStateButNeverBoundValues() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                let cast = await expectPostgresError { try await pool.query("SELECT \(Self.secret)::int") }
                #expect(cast?.kind == .server)
                #expect(cast?.sqlState == "22P02")
                #expect(cast?.isRetryable == false)
                for text in [
                    cast.map { String(describing: $0) }, cast.map { String(reflecting: $0) },
                    cast.map { "\($0.localizedDescription)" },
                ] {
                    #expect(text?.contains(Self.secret) == false)
                    #expect(text?.contains("TOP-SECRET") == false)
                }
                #expect(cast.map { String(reflecting: $0) }?.contains("SELECT $1::int") == true)
                #expect(cast.map { String(describing: $0) }?.contains("SELECT") == false)

                try await pool.query("CREATE TABLE keys (k text CONSTRAINT keys_k_unique UNIQUE)")
                try await pool.query("INSERT INTO keys VALUES (\(Self.secret))")
                let dup = await expectPostgresError { try await pool.query("INSERT INTO keys VALUES (\(Self.secret))") }
                #expect(dup?.sqlState == "23505")
                #expect(dup?.isUniqueViolation == true)
                #expect(dup?.constraint == "keys_k_unique")
                #expect(dup?.table == "keys")
                #expect(dup.map { String(describing: $0) }?.contains(Self.secret) == false)
                #expect(dup.map { String(reflecting: $0) }?.contains(Self.secret) == false)
                #expect(dup?.detail?.contains(Self.secret) == false)

                let syntax = await expectPostgresError { try await pool.query("SELEC 1") }
                #expect(syntax?.sqlState == "42601")
                // The pool is still usable after errors.
                #expect(try await pool.query("SELECT 1").scalar(Int.self) == 1)
            }
        }

        @Test func noticesAreSwallowedWithoutBreakingQueries() async throws {
            try await TestDatabase.with { config in
                let connection = try await PostgresConnection.connect(configuration: config)
                let rows = try await connection.query("DO $$ BEGIN RAISE NOTICE 'hello'; RAISE WARNING 'w'; END $$")
                #expect(rows.commandTag == "DO")
                await connection.close()
            }
        }
    }
}
