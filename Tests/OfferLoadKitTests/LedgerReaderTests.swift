import Foundation
import Metrics
import Testing

@testable import OfferLoadKit

/// The ledger gathering against a database filled by hand with SQL: the schema and the tenant's catalog come from
/// a real gateway (offergate migrates at start; the admin API creates the tenant), the campaigns, codes and
/// redemptions are inserted directly, first consistent, then deliberately over-redeemed.
@Suite(.serialized) struct LedgerReaderTests {
    static let ids = (1...9).map { "00000000-0000-4000-8000-00000000000\($0)" }

    static func ack(_ i: Int, _ campaign: String) -> AcknowledgedRedemption {
        AcknowledgedRedemption(requestIndex: i, redemptionId: ids[i - 1], campaignId: campaign, replayed: false)
    }

    @Test func consistentStatePassesAndOverRedeemedStateBreaches() async throws {
        try await SpawnedGateway.with { gateway, conninfo in
            let tag = "rledger"
            let admin = try await AdminClient.connect(address: gateway.address, adminKey: SpawnedGateway.adminKey)
            let setup = try await ScenarioSetup.run(
                [.tenant, .catalog], options: SetupOptions(runTag: tag, products: 1, offersPerProduct: 2),
                admin: admin)
            admin.close()
            let tenant = "(SELECT tenant_id FROM tenants WHERE slug = '\(setup.tenant)')"
            func redemption(_ id: Int, _ campaign: String, _ code: String, oneTime: Bool, key: String) -> String {
                "INSERT INTO redemptions (tenant_id, redemption_id, campaign_id, code, one_time, customer_id, "
                    + "idempotency_key) VALUES (\(tenant), '\(Self.ids[id - 1])', '\(campaign)', '\(code)', "
                    + "\(oneTime), 'c\(id)', '\(key)');\n"
            }
            try await TestSQL.execute(
                conninfo,
                """
                INSERT INTO campaigns
                    (tenant_id, campaign_id, offer_id, product_id, kind, custom_code, total_limit, redeemed)
                    VALUES (\(tenant), 'hot', 'p0-o1', 'p0', 'custom', 'HOTCODE', 2, 2),
                           (\(tenant), 'pool', 'p0-o1', 'p0', 'oneTime', NULL, NULL, 2);
                INSERT INTO offer_codes (tenant_id, code, campaign_id, one_time)
                    VALUES (\(tenant), 'HOTCODE', 'hot', false), (\(tenant), 'AAAA1', 'pool', true),
                           (\(tenant), 'AAAA2', 'pool', true);
                """
                    + redemption(1, "hot", "HOTCODE", oneTime: false, key: "\(tag)-k1")
                    + redemption(2, "hot", "HOTCODE", oneTime: false, key: "\(tag)-k2")
                    + redemption(3, "pool", "AAAA1", oneTime: true, key: "\(tag)-k3")
                    + redemption(4, "pool", "AAAA2", oneTime: true, key: "\(tag)-k4"))
            let reader = try LedgerReader(conninfo: conninfo)
            let snapshot = try await reader.snapshot(tenant: setup.tenant, campaigns: ["hot", "pool"], withIds: true)
            #expect(snapshot.map(\.recorded) == [2, 2])
            #expect(snapshot.map(\.counter) == [2, 2])
            #expect(snapshot.map(\.totalLimit) == [2, nil])
            #expect(snapshot[0].ids == [Self.ids[0], Self.ids[1]])

            let acknowledged = [Self.ack(1, "hot"), Self.ack(2, "hot"), Self.ack(3, "pool"), Self.ack(4, "pool")]
            let clean = try await reader.ledger(
                tenant: setup.tenant, runTag: tag, campaigns: ["hot", "pool"], acknowledged: acknowledged, before: nil)
            let cleanReport = clean.check()
            #expect(cleanReport.breaches == [])
            #expect(cleanReport.exitStatus == 0)

            // A broken gateway: the unique indexes gone, a third hot redemption (over the limit of 2, reusing an
            // idempotency key), a one-time code redeemed twice, and an acknowledged redemption never recorded.
            try await TestSQL.execute(
                conninfo,
                "DROP INDEX redemptions_one_time_once; DROP INDEX redemptions_idempotency;\n"
                    + redemption(5, "hot", "HOTCODE", oneTime: false, key: "\(tag)-k1")
                    + redemption(6, "pool", "AAAA1", oneTime: true, key: "\(tag)-k6"))
            let broken = try await reader.ledger(
                tenant: setup.tenant, runTag: tag, campaigns: ["hot", "pool"],
                acknowledged: acknowledged + [Self.ack(9, "pool")], before: nil)
            let report = broken.check()
            #expect(
                report.breaches == [
                    .successCountMismatch(campaignId: "hot", acknowledged: 2, recordedBefore: 0, recordedAfter: 3),
                    .overLimit(campaignId: "hot", limit: 2, recorded: 3),
                    .acknowledgedButMissing(campaignId: "pool", count: 1, examples: [Self.ids[8]]),
                    .oneTimeCodeRedeemedTwice(codes: 1, worst: 2),
                    .idempotencyKeyRedeemedTwice(keys: 1, examples: ["\(tag)-k1×2"]),
                ])
            #expect(report.exitStatus == 2)
            let plan = LoadPlan(model: .closed(connections: 1, depth: 1), stop: .requests(1), targets: ["unix:/x"])
            let result = RunResult(
                latency: LatencyHistogram(), timeline: Timeline(origin: 0), errors: [:], measuredRequests: 0,
                measuredSuccesses: 0, warmupRequests: 0, measuredNanoseconds: 0, redemptions: [])
            let runReport = RunReport(scenario: "redeem-hot", plan: plan, result: result, invariants: report)
            #expect(runReport.exitStatus == 2)
            #expect(SummaryRenderer.render(runReport).contains("!!! INVARIANT BREACH: 5 found !!!"))

            // Keys of other runs are not this run's business.
            let other = try await reader.idempotencyKeysRedeemedTwice(tenant: setup.tenant, prefix: "other-k")
            #expect(other.isEmpty)
        }
    }

    @Test func aBadConnectionStringIsALedgerError() async throws {
        let reader = try LedgerReader(conninfo: "host=/nonexistent/socket-dir user=postgres dbname=postgres")
        await #expect(throws: OfferLoadError.self) {
            _ = try await reader.snapshot(tenant: "x", campaigns: ["c"], withIds: false)
        }
    }
}
