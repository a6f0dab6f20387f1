import Foundation
import JSONRPC
import OfferCrypto
import OfferStore
import Postgres
import Testing

@testable import OfferGateway

/// Support for the campaign and redemption tests: a fresh database per test (on the server named by
/// OFFERGATE_TEST_DATABASE_URL, or the restartable one), gateways on Unix sockets, and a seeded tenant.
enum RedemptionSupport {
    struct MissingEnvironment: Error, CustomStringConvertible {
        var variable: String
        var description: String {
            "\(variable) is not set: run the tests through `ops/test` (it starts PostgreSQL and sets it)"
        }
    }

    static let adminKey = "og_admin_redemption_tests_key"

    static func serverURL(restartable: Bool = false) throws -> String {
        let variable = restartable ? "OFFERGATE_TEST_RESTART_DATABASE_URL" : "OFFERGATE_TEST_DATABASE_URL"
        guard let url = ProcessInfo.processInfo.environment[variable], !url.isEmpty else {
            throw MissingEnvironment(variable: variable)
        }
        return url
    }

    /// Creates `og_test_<random>`, runs `body` with its conninfo (the server's, `dbname` overridden), drops it.
    static func withDatabase<T>(restartable: Bool = false, _ body: (String) async throws -> T) async throws -> T {
        let server = try serverURL(restartable: restartable)
        let name = "og_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try await PostgresConnection.connect(
            configuration: try PostgresConfiguration(conninfo: server, applicationName: "offergate-tests"))
        try await admin.simpleQuery(unsafeSQL: "CREATE DATABASE \(name)")
        let url = server + " dbname=\(name)"
        do {
            let value = try await body(url)
            try await drop(name, admin: admin)
            return value
        } catch {
            try? await drop(name, admin: admin)
            throw error
        }
    }

    private static func drop(_ name: String, admin: PostgresConnection) async throws {
        if await !admin.isConnected { try await admin.connect() }
        do {
            try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        } catch let error as PostgresError where error.kind == .connection {
            try await admin.connect()
            try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
        await admin.close()
    }

    /// A unique Unix socket path.
    static func socketPath() -> String {
        "/tmp/og-redeem-\(UUID().uuidString.prefix(8).lowercased()).sock"
    }

    /// Runs a shell command on a dedicated thread (never blocking the cooperative pool); returns its exit status.
    static func shell(_ command: String) async -> Int32 {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: system(command)) }
            thread.start()
        }
    }

    /// The repository root (for `ops/pg` and `.build/debug/offergate`).
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// `ops/pg restart $OFFERGATE_TEST_PG_DIR`.
    static func restartServer() async throws {
        guard let dir = ProcessInfo.processInfo.environment["OFFERGATE_TEST_PG_DIR"], !dir.isEmpty else {
            throw MissingEnvironment(variable: "OFFERGATE_TEST_PG_DIR")
        }
        func quoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let script = repositoryRoot.appendingPathComponent("ops/pg").path
        let status = await shell("/bin/bash \(quoted(script)) restart \(quoted(dir)) </dev/null >/dev/null 2>&1")
        #expect(status == 0, "ops/pg restart failed with status \(status)")
    }

    /// The error code of an RPC failure, or nil for a success (other errors are rethrown).
    static func errorCode(_ body: () async throws -> JSONValue) async throws -> Int? {
        do {
            _ = try await body()
            return nil
        } catch let error as RPCError {
            return error.code
        }
    }

    /// Seeds a tenant with one group, one product and a `code` offer; returns the tenant's API key.
    static func seedTenant(_ admin: RPCClient, slug: String) async throws -> String {
        let created = try await admin.call(
            method: "tenants.create", params: ["slug": .string(slug), "bundleId": "com.example.app"])
        let apiKey = try #require(created["apiKey"]?.stringValue)
        _ = try await admin.call(
            method: "catalog.upsert",
            params: [
                "tenant": .string(slug),
                "groups": [["id": "g1", "name": "Premium"]],
                "products": [
                    ["id": "p1", "groupId": "g1", "period": "P1M", "price": "4.99", "currency": "USD", "level": 1]
                ],
                "offers": [
                    [
                        "id": "code1", "type": "code", "productId": "p1", "paymentMode": "freeTrial", "period": "P1M",
                    ]
                ],
            ])
        return apiKey
    }
}

/// In-process gateways (one `GatewayService` per "process") sharing one database, each on its own Unix socket.
final class RedemptionGateways: Sendable {
    let url: String
    let services: [GatewayService]
    let sockets: [String]

    private init(url: String, services: [GatewayService], sockets: [String]) {
        self.url = url
        self.services = services
        self.sockets = sockets
    }

    static func start(url: String, count: Int = 1, poolSize: Int = 8, clock: (@Sendable () -> Date)? = nil)
        async throws -> RedemptionGateways
    {
        let sealer = KeySealer(keyring: MasterKeyring(current: try MasterKey.generate()))
        var services: [GatewayService] = []
        var sockets: [String] = []
        for index in 0..<count {
            let database = try OfferDatabase.connect(url: url, maxConnections: poolSize)
            if index == 0 { try await database.migrate() }
            var options = GatewayOptions(adminKey: RedemptionSupport.adminKey)
            options.logRequests = false
            if let clock { options.clock = clock }
            let service = try GatewayService(
                database: database, sealer: sealer, options: options, rpc: RPCServerConfiguration(),
                logger: Logger(level: .error))
            let socket = RedemptionSupport.socketPath()
            _ = try await service.start(listen: [try ListenAddress(parsing: "unix:" + socket)])
            services.append(service)
            sockets.append(socket)
        }
        return RedemptionGateways(url: url, services: services, sockets: sockets)
    }

    func shutdown() async {
        for service in services { await service.shutdown(gracePeriod: .seconds(2)) }
        for socket in sockets { unlink(socket) }
    }

    /// A client on gateway `index`, authenticated with `apiKey` (default: the admin key).
    func client(_ index: Int = 0, apiKey: String = RedemptionSupport.adminKey) async throws -> RPCClient {
        let client = try await RPCClient.connect(to: "unix:" + sockets[index])
        _ = try await client.call(method: "session.authenticate", params: ["apiKey": .string(apiKey)])
        return client
    }

    /// Runs `body` with gateways started on a fresh database and shuts them down after.
    static func with<T>(
        count: Int = 1, poolSize: Int = 8, clock: (@Sendable () -> Date)? = nil,
        _ body: (RedemptionGateways) async throws -> T
    ) async throws -> T {
        try await RedemptionSupport.withDatabase { url in
            let gateways = try await start(url: url, count: count, poolSize: poolSize, clock: clock)
            do {
                let value = try await body(gateways)
                await gateways.shutdown()
                return value
            } catch {
                await gateways.shutdown()
                throw error
            }
        }
    }

    /// A direct connection to the test database (for checking rows).
    func database() throws -> OfferDatabase {
        try OfferDatabase.connect(url: url, maxConnections: 2)
    }
}

/// Counts of a campaign's rows, straight from the database.
struct RedemptionRows: Equatable {
    var live: Int
    var rolledBack: Int
    var counter: Int

    static func read(_ database: OfferDatabase, campaignId: String) async throws -> RedemptionRows {
        let rows = try await database.pool.query(
            """
            SELECT (SELECT count(*) FROM redemptions WHERE campaign_id = \(campaignId) AND rolled_back_at IS NULL),
                   (SELECT count(*) FROM redemptions WHERE campaign_id = \(campaignId) AND rolled_back_at IS NOT NULL),
                   (SELECT redeemed FROM campaigns WHERE campaign_id = \(campaignId))
            """)
        let row = try #require(rows.first)
        let (live, rolledBack, counter) = try row.decode(Int64.self, Int64.self, Int64.self)
        return RedemptionRows(live: Int(live), rolledBack: Int(rolledBack), counter: Int(counter))
    }
}
