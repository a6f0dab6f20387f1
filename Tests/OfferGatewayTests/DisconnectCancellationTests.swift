import Foundation
import JSONRPC
import OfferTestSupport
import Postgres
import Testing

@testable import OfferGateway
@testable import OfferStore

/// A client that goes away cancels its requests' statements in PostgreSQL (the transport cancels the request's
/// task, the connection sends PQcancel), instead of leaving them waiting for their statement timeout.
@Suite("disconnect cancels the client's queries")
struct DisconnectCancellationTests {
    @Test func aBlockedStatementIsCancelledWhenItsClientDisconnects() async throws {
        try await TestGateway.with { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            try await gw.createTenant("acme", admin: admin)
            let blocker = PostgresPool(configuration: gw.configuration, maxConnections: 1)
            do {
                try await blocker.withConnection { connection in
                    // Another session holds the table: tenants.create waits for the lock (the statement timeout is
                    // the default 30 s, far longer than this test waits).
                    try await connection.query("BEGIN")
                    try await connection.query("LOCK TABLE tenants IN ACCESS EXCLUSIVE MODE")
                    let waiting: PostgresQuery = """
                        SELECT count(*)::int8 FROM pg_stat_activity
                        WHERE wait_event_type = 'Lock' AND datname = current_database()
                        """
                    let leaving = try await gw.admin()
                    let call = Task {
                        try await leaving.call(
                            method: "tenants.create", params: ["slug": "blocked", "bundleId": "com.example.blocked"])
                    }
                    #expect(try await eventually { try await connection.query(waiting).scalar(Int64.self) == 1 })
                    leaving.close()
                    // The gateway's backend stops waiting while the lock is still held: only a cancel does that.
                    #expect(try await eventually { try await connection.query(waiting).scalar(Int64.self) == 0 })
                    _ = await call.result
                    try await connection.query("ROLLBACK")
                }
                // The cancelled statement wrote nothing, and the gateway still serves.
                let tenants = try await admin.call(method: "tenants.list")
                let slugs = tenants["tenants"]?.arrayValue?.compactMap { $0["slug"]?.stringValue } ?? []
                #expect(slugs == ["acme"])
                try await gw.createTenant("after", admin: admin)
            } catch {
                await blocker.close()
                throw error
            }
            await blocker.close()
        }
    }
}
