import Foundation
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Postgres
import Testing

@testable import OfferGateway
@testable import OfferStore

/// Support for the campaign and redemption tests: gateways on Unix sockets over a fresh database (OfferTestSupport's
/// TestDatabase), and a seeded tenant.
enum RedemptionSupport {
    static let adminKey = "og_admin_redemption_tests_key"

    /// A unique Unix socket path.
    static func socketPath() -> String {
        "/tmp/og-redeem-\(UUID().uuidString.prefix(8).lowercased()).sock"
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

    static func start(
        url: String, count: Int = 1, poolSize: Int = 8, clock: (@Sendable () -> Date)? = nil,
        logger: Logger = Logger(level: .error)
    ) async throws -> RedemptionGateways {
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
                logger: logger)
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
        try await TestDatabase.withConninfo { url in
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
