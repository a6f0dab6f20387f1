import Foundation
import HTTPClient
import HTTPServer
import JSONRPC
import OfferCrypto
import OfferGateway
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// An in-process gateway on a fresh database, listening on a Unix socket and on TCP loopback.
struct TestGateway: Sendable {
    static let adminKey = "og_admin_test_" + UUID().uuidString
    /// The decision clock of every test gateway: decisions and signature timestamps are reproducible.
    static let now = Date(timeIntervalSince1970: 1_795_089_600)  // 2026-11-19T12:00:00Z

    let service: GatewayService
    let database: OfferDatabase
    let configuration: PostgresConfiguration
    let unix: ListenAddress
    let tcp: ListenAddress
    /// The HTTP listener (`--http tcp:127.0.0.1:0`; port 0 for gateways a test starts without one).
    var http: ListenAddress = .tcp(host: "127.0.0.1", port: 0)
    let logs: MemoryLogSink

    /// Runs `body` against a fresh gateway (and database), then shuts both down.
    static func with<T>(
        server: TestServer = .main, logLevel: LogLevel = .info, poolSize: Int = 8,
        acquireTimeout: Duration = .seconds(15), http: HTTPServerConfiguration? = nil,
        configure: (inout GatewayOptions, inout RPCServerConfiguration) -> Void = { _, _ in },
        _ body: (TestGateway) async throws -> T
    ) async throws -> T {
        try await TestDatabase.with(on: server) { configuration in
            let gateway = try await start(
                configuration: configuration, logLevel: logLevel, poolSize: poolSize, acquireTimeout: acquireTimeout,
                http: http, configure: configure)
            do {
                let value = try await body(gateway)
                await gateway.stop()
                return value
            } catch {
                await gateway.stop()
                throw error
            }
        }
    }

    /// Runs `body` against two gateway processes' worth of services on one fresh database (as two processes would
    /// share it), then stops both. `configure` sets each one up (0: the first, 1: the second).
    static func withPair<T>(
        configure: @escaping (Int, inout GatewayOptions, inout RPCServerConfiguration) -> Void = { _, _, _ in },
        _ body: (TestGateway, TestGateway) async throws -> T
    ) async throws -> T {
        try await TestDatabase.with { configuration in
            // One master key for both, as every gateway sharing a database must have.
            let keyring = MasterKeyring(current: try MasterKey.generate())
            let one = try await start(configuration: configuration, keyring: keyring) { configure(0, &$0, &$1) }
            let two: TestGateway
            do {
                two = try await start(configuration: configuration, keyring: keyring) { configure(1, &$0, &$1) }
            } catch {
                await one.stop()
                throw error
            }
            do {
                let value = try await body(one, two)
                await one.stop()
                await two.stop()
                return value
            } catch {
                await one.stop()
                await two.stop()
                throw error
            }
        }
    }

    /// Starts a gateway on an existing (migrated or not) database.
    static func start(
        configuration: PostgresConfiguration, logLevel: LogLevel = .info, poolSize: Int = 8,
        acquireTimeout: Duration = .seconds(15), keyring: MasterKeyring? = nil,
        http httpConfiguration: HTTPServerConfiguration? = nil,
        configure: (inout GatewayOptions, inout RPCServerConfiguration) -> Void = { _, _ in }
    ) async throws -> TestGateway {
        let database = OfferDatabase(
            pool: PostgresPool(configuration: configuration, maxConnections: poolSize, acquireTimeout: acquireTimeout))
        try await database.migrate()
        var options = GatewayOptions(adminKey: adminKey)
        options.clock = { TestGateway.now }
        var rpc = RPCServerConfiguration()
        configure(&options, &rpc)
        let logs = MemoryLogSink()
        let service = try GatewayService(
            database: database, sealer: KeySealer(keyring: try keyring ?? MasterKeyring(current: MasterKey.generate())),
            options: options, rpc: rpc, logger: Logger(level: logLevel, sink: logs), http: httpConfiguration)
        let path = "/tmp/og-gwt-\(UUID().uuidString.prefix(8)).sock"
        let bound = try await service.start(
            listen: [ListenAddress(parsing: "unix:\(path)"), ListenAddress(parsing: "tcp:127.0.0.1:0")],
            http: [ListenAddress(parsing: "tcp:127.0.0.1:0")])
        return TestGateway(
            service: service, database: database, configuration: configuration, unix: bound[0], tcp: bound[1],
            http: bound[2], logs: logs)
    }

    func stop() async {
        await service.shutdown(gracePeriod: .seconds(2))
        if case .unix(let path) = unix { unlink(path) }
    }

    /// `http://127.0.0.1:PORT` of the HTTP listener.
    var httpBase: String {
        guard case .tcp(let host, let port) = http else { return "" }
        return "http://\(host):\(port)"
    }

    /// An HTTP connection (libcurl, keep-alive) to the HTTP listener.
    func httpConnection() throws -> HTTPConnection {
        try HTTPConnection(HTTPEndpoint(baseURL: httpBase))
    }

    /// An unauthenticated connection.
    func connect(tcp useTCP: Bool = false) async throws -> RPCClient {
        try await RPCClient.connect(to: useTCP ? tcp : unix)
    }

    /// A connection authenticated with the admin key.
    func admin(tcp useTCP: Bool = false) async throws -> RPCClient {
        let client = try await connect(tcp: useTCP)
        _ = try await client.call(method: "session.authenticate", params: ["apiKey": .string(Self.adminKey)])
        return client
    }

    /// A connection authenticated with a tenant key.
    func tenant(_ apiKey: String, tcp useTCP: Bool = false) async throws -> RPCClient {
        let client = try await connect(tcp: useTCP)
        _ = try await client.call(method: "session.authenticate", params: ["apiKey": .string(apiKey)])
        return client
    }

    /// Creates a tenant; returns its API key.
    @discardableResult
    func createTenant(_ slug: String, bundleId: String? = nil, admin: RPCClient) async throws -> String {
        let result = try await admin.call(
            method: "tenants.create",
            params: ["slug": .string(slug), "bundleId": .string(bundleId ?? "com.example.\(slug)")])
        return try #require(result["apiKey"]?.stringValue)
    }

    /// Generates a P-256 key and imports it for `tenant`; returns it (its public half verifies signatures).
    @discardableResult
    func importKey(
        tenant: String, keyId: String = "KEY1ABCDEF", issuerId: String? = "57246542-96fe-1a63-e053-0824d011072a",
        admin: RPCClient
    ) async throws -> SigningKey {
        let key = try SigningKey.generate()
        var params: JSONObject = [
            "tenant": .string(tenant), "keyId": .string(keyId), "privateKeyPem": .string(try key.exportPKCS8PEM()),
        ]
        if let issuerId { params["issuerId"] = .string(issuerId) }
        _ = try await admin.call(method: "keys.import", params: .object(params))
        return key
    }

    /// Upserts the standard test catalog (see `Catalogs.standard`).
    func upsertStandardCatalog(
        tenant: String, admin: RPCClient, extraProducts: [JSONValue] = [],
        extraOffers: [JSONValue] = []
    ) async throws {
        var catalog = Catalogs.standard(tenant: tenant)
        if case .array(let products)? = catalog["products"] { catalog["products"] = .array(products + extraProducts) }
        if case .array(let offers)? = catalog["offers"] { catalog["offers"] = .array(offers + extraOffers) }
        _ = try await admin.call(method: "catalog.upsert", params: .object(catalog))
    }

    /// One integer from a query.
    func count(_ query: PostgresQuery) async throws -> Int {
        let rows = try await database.pool.query(query)
        return try #require(rows.first).decode(Int.self, at: 0)
    }

    /// The tenant id of a slug.
    func tenantId(_ slug: String) async throws -> UUID {
        let rows = try await database.pool.query("SELECT tenant_id FROM tenants WHERE slug = \(slug)")
        return try #require(rows.first).decode(UUID.self, at: 0)
    }
}

enum Catalogs {
    /// Group `premium` with `monthly` ($4.99/month) and `yearly` ($39.99/year); monthly has a free-week intro,
    /// two promotional offers and a win-back offer; yearly has a free-month intro.
    static func standard(tenant: String) -> JSONObject {
        [
            "tenant": .string(tenant),
            "groups": [["id": "premium", "name": "Premium"]],
            "products": [
                [
                    "id": "monthly", "groupId": "premium", "period": "P1M", "price": "4.99", "currency": "USD",
                    "level": 2,
                ],
                [
                    "id": "yearly", "groupId": "premium", "period": "P1Y", "price": "39.99", "currency": "USD",
                    "level": 1,
                ],
            ],
            "offers": [
                [
                    "id": "intro.week", "type": "introductory", "productId": "monthly", "paymentMode": "freeTrial",
                    "period": "P1W",
                ],
                [
                    "id": "intro.yearly", "type": "introductory", "productId": "yearly", "paymentMode": "freeTrial",
                    "period": "P1M",
                ],
                [
                    "id": "promo.half", "type": "promotional", "productId": "monthly", "paymentMode": "payAsYouGo",
                    "period": "P1M", "periodCount": 3, "price": "2.49",
                ],
                [
                    "id": "promo.free", "type": "promotional", "productId": "monthly", "paymentMode": "freeTrial",
                    "period": "P1M",
                ],
                [
                    "id": "winback.monthly", "type": "winBack", "productId": "monthly", "paymentMode": "payUpFront",
                    "period": "P3M", "price": "4.99", "minPaidMonths": 2, "monthsSinceLapse": ["min": 1, "max": 12],
                ],
            ],
        ]
    }
}

/// Awaits `body`, expecting a JSON-RPC error with `code`; returns it.
@discardableResult
func expectRPCError(
    _ code: Int, param: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> JSONValue
) async -> RPCError? {
    do {
        let value = try await body()
        Issue.record("expected error \(code), got result \(value)", sourceLocation: sourceLocation)
        return nil
    } catch let error as RPCError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        #expect(
            error.data?["retryable"]?.boolValue != nil, "data.retryable missing: \(error)",
            sourceLocation: sourceLocation)
        #expect(error.reason != nil, "data.reason missing: \(error)", sourceLocation: sourceLocation)
        if let param {
            #expect(error.data?["param"]?.stringValue == param, "\(error)", sourceLocation: sourceLocation)
        }
        return error
    } catch {
        Issue.record("expected RPCError \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

extension RPCClient {
    /// Sends `line` raw and returns the next unmatched line, parsed.
    func rawExchange(_ line: String, timeout: Duration = .seconds(10)) async throws -> JSONValue {
        try sendRaw(line)
        return try #require(try await nextRawValue(timeout: timeout))
    }
}

extension JSONValue {
    /// The JSON text (for messages and transcripts).
    var text: String { String(decoding: JSONSerializer.serialize(self), as: UTF8.self) }
}
