import Foundation
import Synchronization
import Testing

@testable import OfferLoadKit

/// A gateway double that redeems codes against an in-memory "database", correctly or with a deliberate flaw.
final class RedeemGatewayDouble: LoadConnection, LoadConnector {
    enum Flaw: Sendable { case none, ignoresLimit, reusesOneTimeCodes, losesEveryTenthRow, insertsTwicePerKey }
    struct Row {
        let id: String
        let campaignId: String
        let code: String
        let key: String
    }
    struct Database {
        var rows: [Row] = []
        var answered = 0
    }
    let flaw: Flaw
    let hotCode = "HOT"
    let hotLimit: Int
    let oneTimeCodes: Set<String>
    private let db = Mutex(Database())

    init(flaw: Flaw, hotLimit: Int = 100, oneTimeCodes: Set<String> = []) {
        self.flaw = flaw
        self.hotLimit = hotLimit
        self.oneTimeCodes = oneTimeCodes
    }

    func connect(address: String) async throws -> any LoadConnection { self }

    func call(_ request: LoadRequest) async -> CallOutcome {
        guard request.method == "codes.redeem", let p = try? decode(RedeemParams.self, request.params) else {
            return .rpcError(code: -32601)
        }
        return db.withLock { d -> CallOutcome in
            d.answered += 1
            let campaign: String
            if p.code == hotCode {
                campaign = "hot"
                let used = d.rows.filter { $0.campaignId == "hot" }.count
                if used >= hotLimit && flaw != .ignoresLimit { return .rpcError(code: -32041) }
            } else if oneTimeCodes.contains(p.code) {
                campaign = "onetime"
                if d.rows.contains(where: { $0.code == p.code }) && flaw != .reusesOneTimeCodes {
                    return .rpcError(code: -32041)
                }
            } else {
                return .rpcError(code: -32040)
            }
            let id = "r\(d.answered)"
            if !(flaw == .losesEveryTenthRow && d.answered % 10 == 0) {
                d.rows.append(Row(id: id, campaignId: campaign, code: p.code, key: p.idempotencyKey))
            }
            if flaw == .insertsTwicePerKey && d.answered % 25 == 0 {
                d.rows.append(Row(id: id + "-dup", campaignId: campaign, code: p.code, key: p.idempotencyKey))
            }
            return .redeemed(redemptionId: id, campaignId: campaign, replayed: false)
        }
    }

    /// What the admin API and the database would say after the run.
    func ledger(_ acknowledged: [AcknowledgedRedemption]) -> RedemptionLedger {
        let rows = db.withLock { $0.rows }
        func facts(_ campaign: String, limit: Int?) -> CampaignFacts {
            let mine = rows.filter { $0.campaignId == campaign }
            return CampaignFacts(
                campaignId: campaign, totalLimit: limit, recordedAfter: mine.count, recordedIds: Set(mine.map(\.id)))
        }
        var codes: [String: Int] = [:]
        for row in rows where row.campaignId == "onetime" { codes[row.code, default: 0] += 1 }
        var keys: [String: Int] = [:]
        for row in rows { keys[row.key, default: 0] += 1 }
        return RedemptionLedger(
            acknowledged: acknowledged,
            campaigns: [facts("hot", limit: hotLimit), facts("onetime", limit: oneTimeCodes.count)],
            oneTimeCodeRedemptions: codes, idempotencyKeyRedemptions: keys)
    }
}

/// Runs a redemption scenario against the double and checks the invariants, as `offer-load` will.
func runAndCheck(_ double: RedeemGatewayDouble, _ kind: ScenarioKind, requests: Int) async throws
    -> (RunResult, InvariantReport)
{
    let fixture = ScenarioFixture(
        runTag: "inv", hotCode: double.hotCode, hotCampaignId: "hot", oneTimeCodes: double.oneTimeCodes.sorted(),
        oneTimeCampaignId: "onetime")
    let plan = LoadPlan(model: .closed(connections: 4, depth: 4), stop: .requests(requests), targets: ["a", "b"])
    let result = try await LoadRunner(connector: double).run(plan, request: try Scenario(kind: kind).requests(fixture))
    return (result, double.ledger(result.redemptions).check())
}

let fiftyCodes = Set((0..<50).map { "CODE\($0)" })

@Suite struct InvariantTests {
    @Test func aCorrectGatewayPasses() async throws {
        let (result, report) = try await runAndCheck(RedeemGatewayDouble(flaw: .none), .redeemHot, requests: 200)
        #expect(result.redemptions.count == 100)
        #expect(result.errors == ["-32041": 100])
        #expect(report.breaches == [])
        #expect(report.passed)
        #expect(report.exitStatus == 0)
        let (oneTime, oneTimeReport) = try await runAndCheck(
            RedeemGatewayDouble(flaw: .none, oneTimeCodes: fiftyCodes), .redeemOneTime, requests: 100)
        #expect(oneTime.redemptions.count == 50)
        #expect(oneTimeReport.exitStatus == 0)
    }

    @Test func overRedeemingGatewayIsCaughtAndExitsTwo() async throws {
        let (result, report) = try await runAndCheck(
            RedeemGatewayDouble(flaw: .ignoresLimit), .redeemHot, requests: 200)
        #expect(result.redemptions.count == 200)
        #expect(report.breaches.contains(.overLimit(campaignId: "hot", limit: 100, recorded: 200)))
        #expect(report.breaches.contains(.acknowledgedOverLimit(campaignId: "hot", limit: 100, acknowledged: 200)))
        #expect(report.breaches.count == 2)
        #expect(report.exitStatus == 2)
    }

    @Test func reusedOneTimeCodesAreCaught() async throws {
        let (_, report) = try await runAndCheck(
            RedeemGatewayDouble(flaw: .reusesOneTimeCodes, oneTimeCodes: fiftyCodes), .redeemOneTime, requests: 100)
        #expect(report.breaches.contains(.oneTimeCodeRedeemedTwice(codes: 50, worst: 2)))
        #expect(report.breaches.contains(.overLimit(campaignId: "onetime", limit: 50, recorded: 100)))
        #expect(report.exitStatus == 2)
    }

    @Test func lostRowsAreCaught() async throws {
        let (result, report) = try await runAndCheck(
            RedeemGatewayDouble(flaw: .losesEveryTenthRow, hotLimit: 1_000), .redeemHot, requests: 200)
        #expect(result.redemptions.count == 200)
        #expect(
            report.breaches.contains(
                .successCountMismatch(campaignId: "hot", acknowledged: 200, recordedBefore: 0, recordedAfter: 180)))
        #expect(
            report.breaches.contains { breach in
                if case .acknowledgedButMissing("hot", 20, let examples) = breach { return examples.count == 5 }
                return false
            })
        #expect(report.exitStatus == 2)
    }

    @Test func doubleRedemptionsOfOneIdempotencyKeyAreCaught() async throws {
        let (_, report) = try await runAndCheck(
            RedeemGatewayDouble(flaw: .insertsTwicePerKey, hotLimit: 1_000), .redeemHot, requests: 200)
        #expect(
            report.breaches.contains {
                if case .idempotencyKeyRedeemedTwice(keys: 8, _) = $0 { return true }
                return false
            })
        #expect(
            report.breaches.contains(
                .successCountMismatch(campaignId: "hot", acknowledged: 200, recordedBefore: 0, recordedAfter: 208)))
        #expect(report.exitStatus == 2)
    }

    @Test func replaysCountOnceAndEarlierRedemptionsAreTheBaseline() {
        let acks = [
            AcknowledgedRedemption(requestIndex: 0, redemptionId: "r1", campaignId: "c", replayed: false),
            AcknowledgedRedemption(requestIndex: 1, redemptionId: "r1", campaignId: "c", replayed: true),
            AcknowledgedRedemption(requestIndex: 2, redemptionId: "r2", campaignId: "c", replayed: false),
        ]
        let ok = RedemptionLedger(
            acknowledged: acks,
            campaigns: [
                CampaignFacts(
                    campaignId: "c", totalLimit: 10, recordedBefore: 8, recordedAfter: 10,
                    recordedIds: ["r1", "r2", "old"])
            ])
        #expect(ok.check().breaches == [])
        let unlimited = RedemptionLedger(
            acknowledged: acks, campaigns: [CampaignFacts(campaignId: "c", totalLimit: nil, recordedAfter: 2)])
        #expect(unlimited.check().passed)
    }

    @Test func everyBreachIsListedNotJustTheFirst() {
        let ledger = RedemptionLedger(
            acknowledged: [
                AcknowledgedRedemption(requestIndex: 0, redemptionId: "r1", campaignId: "c", replayed: false),
                AcknowledgedRedemption(requestIndex: 1, redemptionId: "r9", campaignId: "ghost", replayed: false),
            ],
            campaigns: [CampaignFacts(campaignId: "c", totalLimit: 0, recordedAfter: 3, recordedIds: [])],
            oneTimeCodeRedemptions: ["SECRETCODE": 3, "OTHER": 1], idempotencyKeyRedemptions: ["k1": 2, "k2": 1])
        let report = ledger.check()
        #expect(
            report.breaches.map(\.name) == [
                "unknown_campaign", "success_count_mismatch", "over_limit", "acknowledged_over_limit",
                "acknowledged_but_missing", "one_time_code_redeemed_twice", "idempotency_key_redeemed_twice",
            ])
        #expect(report.exitStatus == 2)
        // Codes are secrets in bulk: the report says how many, never which.
        #expect(!report.breaches.map(\.description).joined().contains("SECRETCODE"))
        #expect(report.breaches.contains(.idempotencyKeyRedeemedTwice(keys: 1, examples: ["k1×2"])))
    }
}
