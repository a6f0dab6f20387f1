import Foundation
import Testing

@testable import JSONRPC
@testable import OfferLoadKit

/// The adapter, the setup and short runs against a real gateway (the built `offergate`, spawned on a temporary
/// socket over a fresh database).
@Suite(.serialized) struct GatewayRunTests {
    static let options = SetupOptions(
        runTag: SetupOptions.freshRunTag(), products: 3, offersPerProduct: 6, customers: 20,
        now: Date(timeIntervalSince1970: 1_795_000_000))

    @Test("--http: best and ping over POST /v1/rpc (keep-alive, Bearer key), a wrong key answered -32001")
    func bestAndPingOverHTTP() async throws {
        try await SpawnedGateway.with { gateway, _ in
            let admin = try await AdminClient.connect(address: gateway.address, adminKey: SpawnedGateway.adminKey)
            defer { admin.close() }
            let setup = try await ScenarioSetup.run(
                [.tenant, .catalog, .signingKey, .customersWithHistories], options: Self.options, admin: admin)
            let best = try Scenario(kind: .best).requests(setup.fixture)
            let plan = LoadPlan(
                model: .closed(connections: 3, depth: 1), stop: .requests(150), targets: [gateway.httpAddress])
            let result = try await LoadRunner(connector: HTTPLoadConnector(apiKey: setup.apiKey)).run(
                plan, request: best)
            #expect(result.measuredRequests == 150)
            #expect(result.measuredSuccesses == 150)
            #expect(result.errors.isEmpty)
            let ping = try Scenario(kind: .ping).requests(setup.fixture)
            let pings = try await LoadRunner(connector: HTTPLoadConnector(apiKey: nil)).run(
                LoadPlan(model: .closed(connections: 2, depth: 1), stop: .requests(50), targets: [gateway.httpAddress]),
                request: ping)
            #expect(pings.measuredSuccesses == 50)
            let refused = try await LoadRunner(connector: HTTPLoadConnector(apiKey: "og_wrong_key")).run(
                LoadPlan(model: .closed(connections: 1, depth: 1), stop: .requests(10), targets: [gateway.httpAddress]),
                request: best)
            #expect(refused.measuredSuccesses == 0)
            #expect(refused.errors == ["-32001": 10], "\(refused.errors)")
        }
    }

    @Test func setupThenBestAndSignRunsHaveRealFigures() async throws {
        try await SpawnedGateway.with { gateway, conninfo in
            let admin = try await AdminClient.connect(address: gateway.address, adminKey: SpawnedGateway.adminKey)
            defer { admin.close() }
            let setup = try await ScenarioSetup.run(
                [.tenant, .catalog, .signingKey, .customersWithHistories], options: Self.options, admin: admin)
            #expect(setup.tenant == "load-\(Self.options.runTag)")
            #expect(setup.apiKey.count >= 20)
            #expect(setup.fixture.products == ["p0", "p1", "p2"])
            // Offers 3, 4, 5 of each product are promotional (2 is win-back), 16 of 20 customers have a history.
            #expect(setup.fixture.promotionalOffers.count == 9)
            #expect(setup.fixture.customers.count == 16)
            let stored = try await TestSQL.scalar(
                conninfo, "SELECT count(*)::text FROM offers o JOIN tenants t USING (tenant_id)")
            #expect(stored == String(3 * 6))
            let transactions = try await TestSQL.scalar(
                conninfo, "SELECT count(*)::text FROM subscription_transactions")
            #expect(
                transactions
                    == String(
                        HistorySeed(
                            runTag: "x", count: 20, products: ["p0"], now: Self.options.now
                        ).requests.count))

            let connector = RPCLoadConnector(apiKey: setup.apiKey)
            let best = try Scenario(kind: .best).requests(setup.fixture)
            let plan = LoadPlan(
                model: .closed(connections: 4, depth: 2), stop: .requests(200), targets: [gateway.address])
            let bestResult = try await LoadRunner(connector: connector).run(plan, request: best)
            #expect(bestResult.measuredRequests == 200)
            #expect(bestResult.measuredSuccesses == 200)
            #expect(bestResult.errors.isEmpty)
            #expect(bestResult.latency.count == 200)
            #expect(bestResult.throughput > 0)

            let sign = try Scenario(kind: .sign).requests(setup.fixture)
            let signPlan = LoadPlan(
                model: .closed(connections: 2, depth: 4), stop: .requests(60), targets: [gateway.address])
            let signResult = try await LoadRunner(connector: connector).run(signPlan, request: sign)
            #expect(signResult.measuredSuccesses == 60)
            #expect(signResult.errors.isEmpty)
            // Every acknowledged signature is in the ledger, half of each format.
            let signed = try await TestSQL.scalar(
                conninfo,
                "SELECT count(*)::text || '/' || count(*) FILTER (WHERE format = 'jws')::text FROM issued_signatures")
            #expect(signed == "60/30")

            let report = RunReport(scenario: "best", plan: plan, result: bestResult)
            #expect(report.exitStatus == 0)
            #expect(SummaryRenderer.render(report).contains("200 (200 ok, 0 errors)"))
        }
    }

    @Test func pingNeedsNoKeyAndTenantMethodsDoWithoutOne() async throws {
        try await SpawnedGateway.with { gateway, _ in
            let plan = LoadPlan(
                model: .closed(connections: 2, depth: 8), stop: .requests(300), targets: [gateway.address])
            let ping = try Scenario(kind: .ping).requests(ScenarioFixture(runTag: "t"))
            // The gateway behind the socket is found (SO_PEERCRED) and its CPU sampled beside offer-load's.
            let pids = ProcessCPU.serverPIDs(of: [gateway.address])
            #expect(pids == [gateway.process.pid])
            let result = try await LoadRunner(connector: RPCLoadConnector(apiKey: nil), gatewayPIDs: pids)
                .run(plan, request: ping)
            #expect(result.measuredSuccesses == 300)
            #expect(result.errors.isEmpty)
            let cpu = try #require(result.cpu)
            #expect(cpu.requests == 300)
            #expect(cpu.gatewayPIDs == pids)
            #expect(cpu.gatewayNanoseconds != nil)
            let report = RunReport(scenario: "ping", plan: plan, result: result)
            let summary = try #require(report.cpu)
            #expect(summary.gatewayMsPer1000 != nil)
            #expect(SummaryRenderer.render(report).contains("(pid \(gateway.process.pid))"))
            #expect(report.json().contains("\"offerLoadMsPer1000\""))
            #expect(HTMLReport.render(report).contains("CPU per 1,000 requests"))

            // offers.best on an unauthenticated connection: every answer is -32001, counted by code.
            let fixture = ScenarioFixture(runTag: "t", customers: ["c1"], products: ["p0"])
            let best = try Scenario(kind: .best).requests(fixture)
            let denied = try await LoadRunner(connector: RPCLoadConnector(apiKey: nil)).run(plan, request: best)
            #expect(denied.measuredSuccesses == 0)
            #expect(denied.errors == ["-32001": 300])
        }
    }

    @Test func anOpenLoopOverRealSocketsKeepsToItsSchedule() async throws {
        try await SpawnedGateway.with { gateway, _ in
            // 1,500 pings at 5,000/s over 3 connections, paced on the client loop's timer: every one answered and
            // counted, none sent before its time (the last is intended 0.2998 s after the first), the cap held.
            let plan = LoadPlan(
                model: .open(connections: 3, rate: 5_000, maxInFlight: 4), stop: .requests(1_500),
                targets: [gateway.address])
            let ping = try Scenario(kind: .ping).requests(ScenarioFixture(runTag: "t"))
            let result = try await LoadRunner(connector: RPCLoadConnector(apiKey: nil)).run(plan, request: ping)
            #expect(result.measuredRequests == 1_500)
            #expect(result.measuredSuccesses == 1_500)
            #expect(result.latency.count == 1_500)
            #expect(result.errors.isEmpty)
            #expect(result.measuredNanoseconds >= 1_499 * 1_000_000_000 / 5_000)
            // Error answers are counted by code in the open loop too (offers.best without a key).
            let fixture = ScenarioFixture(runTag: "t", customers: ["c1"], products: ["p0"])
            let best = try Scenario(kind: .best).requests(fixture)
            let small = LoadPlan(
                model: .open(connections: 2, rate: 2_000, maxInFlight: 8), stop: .requests(200),
                targets: [gateway.address])
            let denied = try await LoadRunner(connector: RPCLoadConnector(apiKey: nil)).run(small, request: best)
            #expect(denied.measuredSuccesses == 0)
            #expect(denied.errors == ["-32001": 200])
        }
    }

    @Test func aWrongKeyFailsToConnect() async throws {
        try await SpawnedGateway.with { gateway, _ in
            await #expect(throws: OfferLoadError.self) {
                _ = try await RPCLoadConnector(apiKey: "og_not_a_key").connect(address: gateway.address)
            }
            await #expect(throws: OfferLoadError.self) {
                _ = try await AdminClient.connect(address: gateway.address, adminKey: "og_not_the_admin_key")
            }
        }
    }

    @Test func redeemResultsBecomeRedemptions() throws {
        let result: JSONValue = [
            "redemptionId": "0F8E2C1A-0000-4000-8000-000000000001", "campaignId": "spring", "offerId": "p0-o1",
            "productId": "p0", "replayed": true,
        ]
        #expect(
            RPCLoadConnection.outcome(method: "codes.redeem", result: result)
                == .redeemed(
                    redemptionId: "0f8e2c1a-0000-4000-8000-000000000001", campaignId: "spring", replayed: true))
        #expect(RPCLoadConnection.outcome(method: "offers.best", result: result) == .success)
        // As answers arrive: the raw result, only the members read built; a best answer is not parsed at all.
        let raw = RPCRawResult(frame: JSONSerializer.serialize(result))
        #expect(
            try RPCLoadConnection.outcome(
                method: "codes.redeem", fields: RPCLoadConnection.resultFields["codes.redeem"], raw: raw)
                == .redeemed(
                    redemptionId: "0f8e2c1a-0000-4000-8000-000000000001", campaignId: "spring", replayed: true))
        #expect(
            try RPCLoadConnection.outcome(
                method: "offers.best", fields: RPCLoadConnection.resultFields["offers.best"],
                raw: RPCRawResult(frame: Array("{".utf8))) == .success)
        #expect(RPCLoadConnection.outcome(method: "codes.redeem", result: ["replayed": false]) == .success)
    }

    @Test func catalogParamsFollowTheRules() {
        let params = ScenarioSetup.catalogParams(products: 2, offers: 14)
        let offers = params["offers"]?.arrayValue ?? []
        let types = offers.compactMap { $0["type"]?.stringValue }
        // Per product: 1 intro, 1 code, win-back at 2, 6, 10, promotional at the other 9 of 3…13.
        #expect(types.filter { $0 == "introductory" }.count == 2)
        #expect(types.filter { $0 == "code" }.count == 2)
        #expect(types.filter { $0 == "winBack" }.count == 6)
        #expect(types.filter { $0 == "promotional" }.count == 18)
        #expect(ScenarioSetup.promotionalOffers(products: 2, offers: 14).count == 18)
        #expect(ScenarioSetup.hotCode(runTag: "r3lw-a9") == "HOTR3LWA9")
    }
}
