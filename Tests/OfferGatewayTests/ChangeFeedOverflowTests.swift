import Foundation
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Postgres
import Testing

@testable import OfferGateway
@testable import OfferStore

/// "Caches are never stale", even when the change feed's consumer falls behind: a flood past the feed's buffer
/// turns into one "drop everything", never into silently lost changes.
@Suite("Change feed overflow")
struct ChangeFeedOverflowTests {
    /// A gateway like `TestGateway.start`, with a change feed buffer of `bufferSize`.
    static func start(configuration: PostgresConfiguration, bufferSize: Int) async throws -> TestGateway {
        let database = OfferDatabase(pool: PostgresPool(configuration: configuration, maxConnections: 4))
        try await database.migrate()
        var options = GatewayOptions(adminKey: TestGateway.adminKey)
        options.clock = { TestGateway.now }
        let logs = MemoryLogSink()
        let service = try GatewayService(
            database: database, sealer: KeySealer(keyring: MasterKeyring(current: try MasterKey.generate())),
            options: options, rpc: RPCServerConfiguration(), logger: Logger(level: .info, sink: logs),
            changeFeedBufferSize: bufferSize)
        let path = "/tmp/og-feed-\(UUID().uuidString.prefix(8)).sock"
        let bound = try await service.start(
            listen: [ListenAddress(parsing: "unix:\(path)"), ListenAddress(parsing: "tcp:127.0.0.1:0")],
            http: [ListenAddress(parsing: "tcp:127.0.0.1:0")])
        return TestGateway(
            service: service, database: database, configuration: configuration, unix: bound[0], tcp: bound[1],
            http: bound[2], logs: logs)
    }

    static func price(_ catalog: JSONValue, product: String) -> String? {
        catalog["products"]?.arrayValue?.first { $0["id"]?.stringValue == product }?["price"]?.text
    }

    @Test("a flood of changes past the feed's buffer: afterwards no cached answer is stale")
    func floodPastTheBuffer() async throws {
        try await TestDatabase.with { configuration in
            let gw = try await Self.start(configuration: configuration, bufferSize: 2)
            let writer = PostgresPool(configuration: configuration, maxConnections: 1)
            do {
                let admin = try await gw.admin()
                defer { admin.close() }
                let acme = try await gw.tenant(try await gw.createTenant("acme", admin: admin))
                defer { acme.close() }
                let other = try await gw.tenant(try await gw.createTenant("other", admin: admin))
                defer { other.close() }
                try await gw.upsertStandardCatalog(tenant: "acme", admin: admin)
                try await gw.upsertStandardCatalog(tenant: "other", admin: admin)
                // Both catalogs are now cached in the gateway.
                let acmeBefore = try await acme.call(method: "catalog.get", params: [:])
                let otherBefore = try await other.call(method: "catalog.get", params: [:])
                let acmePriceBefore = try #require(Self.price(acmeBefore, product: "monthly"))
                let otherPriceBefore = try #require(Self.price(otherBefore, product: "yearly"))
                #expect(!acmePriceBefore.contains("7.77"))
                #expect(!otherPriceBefore.contains("8.88"))

                // From another connection, in one transaction: thousands of changes to customers of unknown
                // tenants around one real catalog change of acme (written behind the gateway's back, as another
                // process would). They arrive together, far faster than any consumer takes them one by one.
                try await writer.withTransaction { tx in
                    let flood: PostgresQuery = """
                        SELECT pg_notify('offergate_customer', gen_random_uuid()::text || ':c' || n)
                        FROM generate_series(1, 5000) n
                        """
                    try await tx.query(flood)
                    try await tx.query(
                        """
                        UPDATE products SET price = 7.77
                        WHERE tenant_id = (SELECT tenant_id FROM tenants WHERE slug = 'acme') AND product_id = 'monthly'
                        """)
                    try await tx.query(flood)
                }
                // Then one more change, after the flood: once it is seen, the feed has delivered past the flood.
                try await writer.query(
                    """
                    UPDATE products SET price = 8.88
                    WHERE tenant_id = (SELECT tenant_id FROM tenants WHERE slug = 'other') AND product_id = 'yearly'
                    """)
                let sentinelSeen = try await eventually(timeout: .seconds(20)) {
                    let catalog = try await other.call(method: "catalog.get", params: [:])
                    return Self.price(catalog, product: "yearly")?.contains("8.88") == true
                }
                #expect(sentinelSeen)

                // The buffer did overflow, and the gateway was told so (and dropped every cache) ...
                #expect(gw.service.changeFeed.overflows > 0)
                #expect(gw.logs.all.contains { $0.contains("change feed overflowed") })
                // ... so acme's answer, asked once and not polled, already shows the change made inside the flood.
                let acmeAfter = try await acme.call(method: "catalog.get", params: [:])
                #expect(Self.price(acmeAfter, product: "monthly")?.contains("7.77") == true, "\(acmeAfter.text)")
            } catch {
                await writer.close()
                await gw.stop()
                throw error
            }
            await writer.close()
            await gw.stop()
        }
    }

    @Test("shutdown stops the change feed: no listener connection is left behind")
    func shutdownStopsTheFeed() async throws {
        try await TestDatabase.with { configuration in
            let gw = try await Self.start(configuration: configuration, bufferSize: 16)
            let observer = PostgresPool(configuration: configuration, maxConnections: 1)
            let listening: PostgresQuery = """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()
                """
            #expect(try await observer.query(listening).scalar(Int64.self) == 1)
            await gw.stop()
            #expect(try await eventually { try await observer.query(listening).scalar(Int64.self) == 0 })
            await observer.close()
        }
    }

    // The statement timeout, seen by a client (the gateway half of the same store work: the feed's connection and
    // the pool's run under it).

    @Test("a statement over the statement timeout is an internal error for the client, not 'unavailable'")
    func statementTimeoutIsNotUnavailable() async throws {
        try await TestDatabase.with { configuration in
            var limited = configuration
            // Long enough that the test's ordinary statements (creating the tenants) never reach it on a loaded CI
            // machine (300 ms did once, with the whole suite running on two cores); the blocked one waits it out.
            limited.statementTimeout = .seconds(2)
            let gw = try await Self.start(configuration: limited, bufferSize: 16)
            let blocker = PostgresPool(configuration: configuration, maxConnections: 1)
            do {
                let admin = try await gw.admin()
                defer { admin.close() }
                try await gw.createTenant("acme", admin: admin)
                try await blocker.withConnection { connection in
                    // Another session holds the table: the gateway's statement waits until its timeout stops it.
                    try await connection.query("BEGIN")
                    try await connection.query("LOCK TABLE tenants IN ACCESS EXCLUSIVE MODE")
                    let started = ContinuousClock.now
                    let error = await expectRPCError(-32603) {
                        try await admin.call(
                            method: "tenants.create", params: ["slug": "blocked", "bundleId": "com.example.blocked"])
                    }
                    #expect(ContinuousClock.now - started < .seconds(30))
                    #expect(error?.data?["retryable"]?.boolValue == false)
                    try await connection.query("ROLLBACK")
                }
                #expect(gw.logs.all.contains { $0.contains("57014") }, "\(gw.logs.all)")
                // Nothing is left broken: the same call works once the table is free.
                try await gw.createTenant("after", admin: admin)
            } catch {
                await blocker.close()
                await gw.stop()
                throw error
            }
            await blocker.close()
            await gw.stop()
        }
    }

    @Test func serveHelpDocumentsTheStatementTimeoutAndABadValueIsAUsageError() async throws {
        let help = try await ServeCommandTests.run(["serve", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("--statement-timeout"))
        let bad = try await ServeCommandTests.run(["serve", "--stdio", "--statement-timeout", "-1"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("--statement-timeout"), "\(bad.stderr)")
    }
}
