import Foundation
import HTTPClient
import HTTPServer
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Testing

@testable import OfferGateway
@testable import OfferStore

/// Retention Messaging over real HTTP (`POST /v1/apple/{tenant}/retention`): Python's urllib as Apple would call it,
/// and libcurl; status codes and bodies as API.md §9 and §12 have them; the answers in `/metrics`.
@Suite("Retention Messaging over HTTP", .serialized)
struct RetentionHTTPTests {
    @Test("200 with Apple's shapes (a signed offer, the default message); 400 forged or malformed; 404 unknown")
    func routeAnswersAsApple() async throws {
        try await RetentionTests.withRetention { app, key in
            let token = UUID().uuidString.lowercased()
            let original = "4000000000000101"
            try await app.atRisk(token: token, original: original)
            try await app.configureRetention(offers: [("promo.free", RetentionTests.freeMessage)])
            let path = "/v1/apple/\(app.slug)/retention"
            let good = RetentionTests.body(try app.signed(app.retentionPayload(original: original)))

            // Python's urllib, as Apple's servers would.
            let python = try await app.postWithPython(path: path, body: good)
            #expect(python["status"]?.int64Value == 200, "\(python.text)")
            #expect(python["contentType"]?.stringValue == "application/json")
            let offer = try #require(python["body"]?["promotionalOffer"], "\(python.text)")
            #expect(offer["messageIdentifier"]?.stringValue == RetentionTests.freeMessage)
            #expect(python["body"]?.objectValue?.members.count == 1)
            let jws = try #require(offer["promotionalOfferSignatureV2"]?.stringValue)
            #expect(try PublicKey(pem: key.publicKeyPEM).verifyJWS(compact: jws))
            let checked = try await pythonCrossCheck([
                "verify": [
                    "publicKeyPEM": .string(key.publicKeyPEM),
                    "jws": [["token": .string(jws), "audience": "promotional-offer"]],
                ]
            ])
            #expect(checked["verify"]?["jws"]?[0]?["ok"]?.boolValue == true, "\(checked.text)")
            let claims = try JSONParsing.parse(CompactJWS(compact: jws).payload)
            #expect(claims["transactionId"]?.stringValue == original)

            // libcurl, keep-alive: the other answers.
            let http = try app.gateway.httpConnection()
            let stranger = try await http.send(
                "POST", path, headers: [("Content-Type", "application/json")],
                body: RetentionTests.body(try app.signed(app.retentionPayload(original: "4999999999999991"))))
            #expect(stranger.status == 200)
            #expect(
                try JSONParsing.parse(stranger.body)
                    == ["message": ["messageIdentifier": .string(RetentionTests.defaultMessage)]])

            let parts = try app.signed(app.retentionPayload(original: original)).split(separator: ".").map(String.init)
            let forged =
                parts[0] + "."
                + Base64URL.encode(JSONSerializer.serialize(app.retentionPayload(original: "4000000000000102"))) + "."
                + parts[2]
            let refusals: [(String, [UInt8], Int, String)] = [
                (path, RetentionTests.body(forged), 400, "invalid_signature"),
                (path, Array("{}".utf8), 400, "malformed_body"),
                (path, Array("not json".utf8), 400, "malformed_body"),
                ("/v1/apple/no-such-app/retention", good, 404, "unknown_tenant"),
            ]
            for (target, body, status, reason) in refusals {
                let response = try await http.send(
                    "POST", target, headers: [("Content-Type", "application/json")], body: body)
                #expect(response.status == status, "\(target): \(response.status) \(response.text)")
                #expect(
                    try JSONParsing.parse(response.body)["reason"]?.stringValue == reason,
                    "\(target): \(response.text)")
            }
            // Answers, not refusals, are recorded: two of them.
            #expect(try await app.recordedAnswers(count: 2).count == 2)

            let metrics = try await http.send("GET", "/metrics").text
            #expect(
                metrics.contains(#"offergate_retention_answers_total{kind="promotionalOffer",reason="none"} 1"#),
                "\(metrics)")
            #expect(metrics.contains(#"offergate_retention_answers_total{kind="message",reason="no_customer"} 1"#))
            #expect(metrics.contains(#"offergate_retention_answer_duration_seconds_count{kind="promotionalOffer"} 1"#))
            #expect(metrics.contains(#"offergate_http_requests_total{route="apple_retention",status="400"} 3"#))
        }
    }
}

extension RetentionHTTPTests {
    @Test(
        "the budget counts from the request's arrival at the listener: a request queued past it gets the default message"
    )
    func budgetCountsFromArrival() async throws {
        try await RetentionTests.withRetention { app, _ in
            let original = "4000000000000120"
            try await app.atRisk(token: UUID().uuidString.lowercased(), original: original)
            // A generous budget first, so that the unqueued answer is an offer even on a loaded machine.
            try await app.configureRetention(offers: [("promo.free", RetentionTests.freeMessage)], budgetMs: 10_000)
            let path = "/v1/apple/\(app.slug)/retention"
            func post(_ connection: HTTPConnection) async throws -> JSONValue {
                let response = try await connection.send(
                    "POST", path, headers: [("Content-Type", "application/json")],
                    body: RetentionTests.body(try app.signed(app.retentionPayload(original: original))))
                #expect(response.status == 200, "\(response.text)")
                return try JSONParsing.parse(response.body)
            }
            // Unqueued, the subscriber gets the signed offer.
            let direct = try await post(try app.gateway.httpConnection())
            #expect(direct["promotionalOffer"] != nil, "\(direct)")
            let budget = Duration.milliseconds(300)
            try await app.configureRetention(offers: [("promo.free", RetentionTests.freeMessage)], budgetMs: 300)

            // A listener whose handler queue holds each request until its whole budget has passed since it arrived,
            // then hands it to the same routes: the time queued counts, so the answer is the default message.
            let router = HTTPRouter(gateway: app.gateway.service.gateway)
            let queued = HTTPServer { request in
                try? await Task.sleep(until: request.receivedAt + budget, clock: .continuous)
                return await router.respond(request)
            }
            guard case .tcp(let host, let port) = try queued.listen(.tcp(host: "127.0.0.1", port: 0)) else { return }
            let connection = try HTTPConnection(HTTPEndpoint(baseURL: "http://\(host):\(port)"), timeout: .seconds(60))
            let late = try await post(connection)
            await queued.shutdown(gracePeriod: .seconds(5))
            #expect(late == ["message": ["messageIdentifier": .string(RetentionTests.defaultMessage)]], "\(late)")
            let answers = try await app.recordedAnswers(count: 2)
            let recorded = try #require(answers.first { $0.fallbackReason == "budget_exceeded" }, "\(answers)")
            // Its recorded latency runs from the arrival, so it covers the time queued: at least the budget.
            #expect(recorded.latencyMicros >= 300_000, "\(recorded)")
            #expect(recorded.kind == .message && recorded.offerId == nil)
        }
    }
}

/// Beside the in-process database-down test: the same restartable cluster, so the same serialized suite.
extension RetentionDatabaseDownTests {
    @Test("With PostgreSQL stopped, the route still answers 200 with the default message")
    func databaseDownOverHTTP() async throws {
        try await RetentionTests.withRetention(server: Self.server) { app, _ in
            try await app.atRisk(token: UUID().uuidString.lowercased(), original: "4000000000000110")
            try await app.atRisk(token: UUID().uuidString.lowercased(), original: "4000000000000111")
            try await app.configureRetention(offers: [("promo.free", RetentionTests.freeMessage)], budgetMs: 5_000)
            let path = "/v1/apple/\(app.slug)/retention"
            let http = try app.gateway.httpConnection()
            let warm = try await http.send(
                "POST", path, headers: [("Content-Type", "application/json")],
                body: RetentionTests.body(try app.signed(app.retentionPayload(original: "4000000000000110"))))
            #expect(try JSONParsing.parse(warm.body)["promotionalOffer"] != nil, "\(warm.text)")
            try await Self.server.pg("stop")
            do {
                let response = try await http.send(
                    "POST", path, headers: [("Content-Type", "application/json")],
                    body: RetentionTests.body(try app.signed(app.retentionPayload(original: "4000000000000111"))))
                #expect(response.status == 200, "\(response.text)")
                #expect(
                    try JSONParsing.parse(response.body)
                        == ["message": ["messageIdentifier": .string(RetentionTests.defaultMessage)]])
            } catch {
                try await Self.server.pg("start")
                throw error
            }
            try await Self.server.pg("start")
            let metrics = try await http.send("GET", "/metrics").text
            #expect(metrics.contains(#"offergate_retention_answers_total{kind="message",reason="#), "\(metrics)")
            #expect(app.gateway.service.gateway.metrics.retentionOutsideBudget.value() == 0)
        }
    }
}

extension AppleTenant {
    /// POSTs `body` to `path` with Python's urllib (HTTPScripts/retention_post.py).
    func postWithPython(path: String, body: [UInt8]) async throws -> JSONValue {
        let configured = ProcessInfo.processInfo.environment["OFFERGATE_PYTHON"] ?? ""
        let venv = PackagePaths.root.appendingPathComponent(".build/pyenv/bin/python3").path
        let python = configured.isEmpty ? venv : configured
        let script = PackagePaths.root.appendingPathComponent("Tests/OfferGatewayTests/HTTPScripts/retention_post.py")
        let dir = try PackagePaths.scratch("og-retention")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("body.json")
        try Data(body).write(to: file)
        let outcome = try await ChildProcess.run(
            python, [script.path, gateway.httpBase + path, file.path], environment: ChildProcess.environment())
        try #require(outcome.status == 0, "retention_post.py: \(outcome)")
        return try JSONParsing.parse(Array(outcome.stdout.utf8))
    }
}
