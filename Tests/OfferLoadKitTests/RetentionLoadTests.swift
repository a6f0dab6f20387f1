import Foundation
import JSONRPC
import Metrics
import OfferCrypto
import OfferTestSupport
import Testing

@testable import OfferLoadKit

/// The `retention` scenario's parts: Apple's answer shapes told apart, the performance-test report's arithmetic,
/// the request signer (its JWS verified as Apple's verifier would, against the test CA), and the connection.
@Suite struct RetentionLoadTests {
    static let promo: [UInt8] = Array(
        #"{"promotionalOffer":{"messageIdentifier":"m1","promotionalOfferSignatureV2":"a.b.c"}}"#.utf8)
    static let alternate: [UInt8] = Array(#"{"alternateProduct":{"messageIdentifier":"m2","productId":"p1"}}"#.utf8)
    static let message: [UInt8] = Array(#"{"message":{"messageIdentifier":"m3"}}"#.utf8)

    @Test func tallyTellsApplesShapesApart() {
        let tally = RetentionTally()
        #expect(tally.record(status: 200, body: Self.promo))
        #expect(tally.record(status: 200, body: Self.alternate))
        #expect(tally.record(status: 200, body: Self.message, late: true))
        for bad in [
            #"{"message":{}}"#, #"{"message":{"messageIdentifier":""}}"#,
            #"{"promotionalOffer":{"messageIdentifier":"m"}}"#,
            #"{"message":{"messageIdentifier":"m"},"alternateProduct":{"messageIdentifier":"m","productId":"p"}}"#,
            "not json", "",
        ] {
            #expect(!tally.record(status: 200, body: Array(bad.utf8)), "\(bad)")
        }
        #expect(!tally.record(status: 503, body: Self.message))
        #expect(!tally.record(status: 400, body: Array(#"{"reason":"invalid_signature"}"#.utf8)))
        let counts = tally.counts
        #expect([counts.promotionalOffer, counts.alternateProduct, counts.message] == [Int](repeating: 1, count: 3))
        #expect(counts.invalidResponse == 6)
        #expect(counts.statuses == ["503": 1, "400": 1])
        #expect(counts.late == 1)
    }

    @Test func reportInApplesShape() {
        var latency = LatencyHistogram()
        for i in 0..<1_000 { latency.record(microseconds: i < 990 ? 2_000 : 40_000) }
        let run = RunResult(
            latency: latency, timeline: Timeline(origin: 0), errors: ["transport": 2, "503": 8],
            measuredRequests: 1_000, measuredSuccesses: 990, warmupRequests: 0, measuredNanoseconds: 1_000_000_000,
            redemptions: [])
        var counts = RetentionTally.Counts()
        counts.promotionalOffer = 900
        counts.message = 90
        counts.statuses = ["503": 8]
        counts.late = 5
        let report = RetentionReport(
            result: run, tally: counts, concurrency: 50, distinctSubscribers: 1_000, thresholdMs: 700,
            successRateThreshold: 95)
        #expect(report.config.totalRequests == 1_000)
        #expect(report.config.maxConcurrentRequests == 50)
        #expect(report.failures == ["TIMED_OUT": 5, "UNSUCCESSFUL_HTTP_RESPONSE_CODE": 8, "NO_RESPONSE": 2])
        #expect(report.successRate == 98)  // (990 - 5) / 1000, rounded down
        #expect(report.successFraction == 0.985)
        #expect(report.result == "PASS")
        #expect(report.responseTimes.p50 == 2)
        #expect(report.responseTimes.p99 == 2)
        #expect(report.responseTimesMicros.p50 / 10 == 200)  // within the histogram's bucket of 2,000 µs
        #expect(report.responseTimes.average == 2)  // (990 × 2 + 10 × 40) / 1000 = 2.38 ms
        let strict = RetentionReport(
            result: run, tally: counts, concurrency: 50, distinctSubscribers: 1_000, thresholdMs: 700,
            successRateThreshold: 99)
        #expect(strict.result == "FAIL")
        #expect(report.text.contains("result PASS: success rate 98 %"))
        #expect(report.json().contains(#""successRate":98"#))
    }

    @Test func scenarioRequestsNameTheirBody() throws {
        let scenario = try Scenario(kind: .retention)
        #expect(scenario.needs.contains(.retentionMessaging) && scenario.needs.contains(.customersWithHistories))
        #expect(throws: OfferLoadError.self) { _ = try scenario.requests(ScenarioFixture(runTag: "r")) }
        let fixture = ScenarioFixture(
            runTag: "r", retentionSubscribers: [RetentionSubscriber(originalTransactionId: "t", productId: "p0")])
        #expect(try scenario.requests(fixture)(7) == LoadRequest(method: "retention", params: ["index": 7]))
        let seed = HistorySeed(runTag: "r", count: 3, products: ["p0", "p1"], now: Date())
        #expect(
            ScenarioSetup.retentionSubscribers(seed).map(\.originalTransactionId) == ["r-t0-0", "r-t1-0", "r-t2-0"])
        #expect(ScenarioSetup.retentionSubscribers(seed).map(\.productId) == ["p0", "p1", "p0"])
        let params = ScenarioSetup.retentionParams(products: 2, offers: 4)
        #expect(
            params["offers"] == [
                ["offerId": "p0-o3", "messageId": "msg-p0-o3"], ["offerId": "p1-o3", "messageId": "msg-p1-o3"],
            ])
    }

    @Test func connectionCountsAnswersAndFailures() async {
        let tally = RetentionTally()
        let bodies: [[UInt8]] = [[1], [2]]
        let connection = RetentionLoadConnection(bodies: bodies, tally: tally, threshold: .seconds(60)) { body, reply in
            switch body {
            case [1]: reply(.success((200, RetentionLoadTests.promo)))
            default: reply(.success((503, Array(#"{"reason":"unavailable"}"#.utf8))))
            }
        }
        #expect(await connection.call(LoadRequest(method: "retention", params: ["index": 0])) == .success)
        #expect(await connection.call(LoadRequest(method: "retention", params: ["index": 3])) == .rpcError(code: 503))
        guard case .transportError = await connection.call(LoadRequest(method: "retention", params: [:])) else {
            Issue.record("a request without an index is the harness's own error")
            return
        }
        #expect(tally.counts.promotionalOffer == 1 && tally.counts.statuses == ["503": 1])
    }

    @Test func signedRequestsVerifyAsApplesWould() async throws {
        let ca = try await TestCA.make()
        let signer = try RetentionRequestSigner(leafKeyPKCS8: ca.leafKeyPKCS8, x5c: ca.x5c, appAppleId: 1_234_567_890)
        let subscribers = [
            RetentionSubscriber(originalTransactionId: "t-1", productId: "p0"),
            RetentionSubscriber(originalTransactionId: "t-2", productId: "p1"),
        ]
        let bodies = try signer.bodies(subscribers, count: 3)
        let verifier = try AppleSignedDataVerifier(
            additionalRoots: [Array(Data(base64Encoded: ca.rootDER) ?? Data())], trustAppleRootCAG3: false)
        var requestIds: Set<String> = []
        for (i, body) in bodies.enumerated() {
            let jws = try #require(try JSONParsing.parse(body)["signedPayload"]?.stringValue)
            let verified = try verifier.verify(
                jws, as: .retentionMessagingRequest,
                expecting: AppleSignedDataExpectation(
                    bundleId: "com.example.any", appAppleId: 1_234_567_890, allowSandbox: true))
            #expect(verified.environment == .sandbox)
            let payload = try JSONParsing.parse(verified.payload)
            #expect(payload["originalTransactionId"]?.stringValue == subscribers[i % 2].originalTransactionId)
            #expect(payload["productId"]?.stringValue == subscribers[i % 2].productId)
            requestIds.insert(try #require(payload["requestIdentifier"]?.stringValue))
        }
        #expect(requestIds.count == 3, "every request has its own id")
        // In Production the app's id is checked: the signer signs exactly what it was told.
        let production = try RetentionRequestSigner(
            leafKeyPKCS8: ca.leafKeyPKCS8, x5c: ca.x5c, appAppleId: 1_234_567_890, environment: "Production")
        let jws = try #require(
            try JSONParsing.parse(production.body(for: subscribers[0]))["signedPayload"]?.stringValue)
        _ = try verifier.verify(
            jws, as: .retentionMessagingRequest,
            expecting: AppleSignedDataExpectation(bundleId: "x", appAppleId: 1_234_567_890))
        #expect(throws: AppleSignedDataError.self) {
            _ = try verifier.verify(
                jws, as: .retentionMessagingRequest,
                expecting: AppleSignedDataExpectation(bundleId: "x", appAppleId: 42))
        }
    }
}

/// The test certificate authority of OfferCryptoTests (its referee script, which Apple's own library checks).
struct TestCA: Decodable {
    let rootDER: String
    let leafKeyPKCS8: String
    let x5c: [String]

    static func make() async throws -> TestCA {
        let configured = ProcessInfo.processInfo.environment["OFFERGATE_PYTHON"] ?? ""
        let venv = PackagePaths.root.appendingPathComponent(".build/pyenv/bin/python3").path
        let python = configured.isEmpty ? venv : configured
        try #require(FileManager.default.isExecutableFile(atPath: python), "no Python at \(python): run ops/pyenv")
        let script = PackagePaths.root.appendingPathComponent(
            "Tests/OfferCryptoTests/Fixtures/AppleSignedData/test_ca_referee.py")
        let outcome = try await ChildProcess.run(
            python, [script.path], environment: ChildProcess.environment(), timeout: .seconds(120))
        try #require(outcome.status == 0, "test_ca_referee.py: \(outcome)")
        return try JSONDecoder().decode(TestCA.self, from: Data(outcome.stdout.utf8))
    }
}
