import Foundation
import Synchronization
import Testing

@testable import JSONRPC
@testable import OfferLoadKit

/// What `ops/bench/b10-failover` relies on in the harness: retrying -32050 unchanged, replaying acknowledged
/// redemptions, and reading the nonce of every answered signature.
@Suite struct FailoverHarnessTests {
    /// A connection that answers -32050 during `outage` (virtual time) and redeems otherwise.
    static func connection(_ clock: VirtualClock, outage: Range<UInt64>) -> FakeConnection {
        FakeConnection(clock: clock, serviceNanos: 1 * ms) { request in
            if outage.contains(clock.now()) { return .rpcError(code: -32050) }
            let key = request.params["idempotencyKey"]?.stringValue ?? "?"
            return .redeemed(redemptionId: "r-" + key, campaignId: "c", replayed: false)
        }
    }

    static func run(retry: Double?) async throws -> RunResult {
        let clock = VirtualClock()
        let t0 = clock.now()
        let outage = (t0 + 100 * ms)..<(t0 + 1_100 * ms)
        let connector = FakeConnector((0..<2).map { _ in connection(clock, outage: outage) })
        let plan = LoadPlan(
            model: .closed(connections: 2, depth: 1), stop: .duration(seconds: 2), targets: ["unix:/a"],
            retryUnavailableSeconds: retry)
        return try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: connector).run(plan) { i in
                LoadRequest(method: "codes.redeem", params: ["idempotencyKey": .string("k\(i)")])
            }
        }
    }

    @Test func aRetriedRequestRidesOutTheOutageAndItsWaitIsRecorded() async throws {
        let result = try await Self.run(retry: 5)
        // Each connection's request in flight when the outage began was sent again until it ended.
        #expect(result.errors["-32050"] == nil)
        #expect(result.retries.retriedRequests == 2)
        #expect(result.retries.gaveUp == 0)
        #expect(result.retries.unavailableAnswers >= 2 * 40)
        #expect(result.retries.longestWaitNanoseconds >= 1_000 * ms)
        #expect(result.retries.longestWaitNanoseconds < 1_100 * ms)
        // The retried requests kept their idempotency keys: one redemption per request index, none lost.
        #expect(Set(result.redemptions.map(\.requestIndex)).count == result.redemptions.count)
        #expect(result.redemptions.allSatisfy { $0.redemptionId == "r-k\($0.requestIndex)" })
    }

    @Test func withoutRetriesOrPastTheWindowTheUnavailableAnswerIsTheOutcome() async throws {
        let plain = try await Self.run(retry: nil)
        #expect((plain.errors["-32050"] ?? 0) > 2)
        #expect(plain.retries == RetryFigures())
        let short = try await Self.run(retry: 0.5)
        #expect(short.retries.gaveUp == 2)
        #expect((short.errors["-32050"] ?? 0) >= 2)
    }

    @Test func theRetryWindowNeedsTheClosedLoop() throws {
        #expect(throws: OfferLoadError.self) {
            try LoadPlan.fromOptions(targets: ["unix:/a"], rate: 100, retryUnavailable: 5)
        }
        #expect(throws: OfferLoadError.self) { try LoadPlan.fromOptions(targets: ["unix:/a"], retryUnavailable: 0) }
        #expect(try LoadPlan.fromOptions(targets: ["unix:/a"], retryUnavailable: 5).retryUnavailableSeconds == 5)
    }

    @Test func replayingFindsARedemptionThatDoesNotReplay() async throws {
        let clock = VirtualClock()
        let served = FakeConnection(clock: clock, serviceNanos: 0) { request in
            let key = request.params["idempotencyKey"]?.stringValue ?? "?"
            if key == "k2" { return .rpcError(code: -32041) }  // as if the acknowledged redemption were gone
            return .redeemed(redemptionId: "r-" + key, campaignId: "c", replayed: true)
        }
        let acknowledged = (0..<4).map {
            AcknowledgedRedemption(requestIndex: $0, redemptionId: "r-k\($0)", campaignId: "c", replayed: false)
        }
        let breaches = try await ReplayCheck.run(
            acknowledged: acknowledged,
            request: { LoadRequest(method: "codes.redeem", params: ["idempotencyKey": .string("k\($0)")]) },
            connector: FakeConnector([served]), address: "unix:/a", connections: 2)
        #expect(breaches == [.replayMismatch(count: 1, examples: ["request 2: error -32041"])])
        let clean = try await ReplayCheck.run(
            acknowledged: acknowledged.filter { $0.requestIndex != 2 },
            request: { LoadRequest(method: "codes.redeem", params: ["idempotencyKey": .string("k\($0)")]) },
            connector: FakeConnector([served]), address: "unix:/a")
        #expect(clean.isEmpty)
    }

    @Test func theNonceOfEveryAnsweredSignatureIsRead() throws {
        let nonce = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
        let v1: JSONValue = ["format": "v1", "nonce": .string(nonce.uppercased()), "signature": "MEUC"]
        #expect(RPCLoadConnection.outcome(method: "offers.sign", result: v1) == .signed(nonce: nonce))
        let payload = Data(#"{"nonce":"\#(nonce)","offerIdentifier":"o"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        let jws: JSONValue = ["format": "jws", "compactJWS": .string("eyJhbGciOiJFUzI1NiJ9.\(payload).c2ln")]
        #expect(RPCLoadConnection.outcome(method: "offers.sign", result: jws) == .signed(nonce: nonce))
        // As answers arrive: the raw result, with only the members the outcome reads built.
        for (result, expected) in [(v1, CallOutcome.signed(nonce: nonce)), (jws, .signed(nonce: nonce))] {
            let raw = RPCRawResult(frame: JSONSerializer.serialize(result))
            #expect(
                try RPCLoadConnection.outcome(
                    method: "offers.sign", fields: RPCLoadConnection.resultFields["offers.sign"], raw: raw) == expected)
        }
        let broken: JSONValue = ["format": "jws", "compactJWS": "not-a-jws"]
        #expect(RPCLoadConnection.outcome(method: "offers.sign", result: broken) == .success)
    }
}
