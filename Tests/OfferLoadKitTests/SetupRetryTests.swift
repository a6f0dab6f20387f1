import Foundation
import JSONRPC
import OfferTestSupport
import Testing

@testable import OfferLoadKit

/// The setup's bulk `subscriptions.record` against a gateway whose PostgreSQL goes away: the gateway answers
/// -32050 (retry later) meanwhile, and the setup sends those calls again instead of failing the run.
@Suite(.serialized) struct SetupRetryTests {
    static let server = TestServer.restartable("offer-load-setup-retry")

    @Test("callAll sends an idempotent write answered -32050 again: every record lands once PostgreSQL is back")
    func callAllRetriesWhileTheDatabaseIsDown() async throws {
        try await SpawnedGateway.with(on: Self.server) { gateway, conninfo in
            let admin = try await AdminClient.connect(address: gateway.address, adminKey: SpawnedGateway.adminKey)
            defer { admin.close() }
            let options = SetupOptions(
                runTag: SetupOptions.freshRunTag(), products: 2, offersPerProduct: 2, customers: 10,
                now: Date(timeIntervalSince1970: 1_795_000_000))
            _ = try await ScenarioSetup.run([.tenant, .catalog], options: options, admin: admin)
            let seed = HistorySeed(
                runTag: options.runTag, count: options.customers, products: ["p0", "p1"], now: options.now)
            let params = seed.requests.map { request in
                var object = request.params
                object["tenant"] = .string(options.tenantSlug)
                return object
            }
            #expect(params.count > 20)

            try await Self.server.pg("stop")
            // Without retries, the same call fails with -32050 while PostgreSQL is down.
            do throws(OfferLoadError) {
                try await admin.call("subscriptions.record", params[0])
                Issue.record("subscriptions.record succeeded with PostgreSQL stopped")
            } catch {
                #expect(error.message.contains("-32050"), "\(error)")
            }
            async let bringBack: Void = {
                try await Task.sleep(for: .seconds(2))
                try await Self.server.pg("start")
            }()
            try await admin.callAll("subscriptions.record", params, window: 8)
            try await bringBack

            let stored = try await TestSQL.scalar(
                conninfo, "SELECT count(*)::text FROM subscription_transactions")
            #expect(stored == String(params.count))
        }
    }
}
