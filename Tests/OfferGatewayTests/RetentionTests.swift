import Foundation
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Testing

@testable import OfferGateway
@testable import OfferStore

/// Retention Messaging (API.md §12) end to end below HTTP: Apple's request signed by the test CA (which Apple's own
/// library referees), answered by the gateway's `RetentionService` against a real PostgreSQL; signatures verified
/// with the public key, PyJWT and Apple's `PromotionalOfferV2SignatureCreator`.
@Suite("Retention Messaging", .serialized)
struct RetentionTests {
    static let defaultMessage = "0d6c1c2a-5d5e-4b8f-9a51-6f2f7f7b0001"
    static let freeMessage = "0d6c1c2a-5d5e-4b8f-9a51-6f2f7f7b0002"
    static let halfMessage = "0d6c1c2a-5d5e-4b8f-9a51-6f2f7f7b0003"
    static let yearlyMessage = "0d6c1c2a-5d5e-4b8f-9a51-6f2f7f7b0004"

    static func withRetention<T>(
        server: TestServer = .main, _ body: (AppleTenant, SigningKey) async throws -> T
    ) async throws -> T {
        let ca = try await AppleTestCA.shared()
        let verifier = try ca.verifier()
        return try await TestGateway.with(server: server, configure: { options, _ in options.appleVerifier = verifier })
        { gateway in
            let app = try await AppleTenant.setUp(gateway, ca: ca)
            let key = try await gateway.importKey(tenant: app.slug, admin: app.admin)
            return try await body(app, key)
        }
    }

    @Test("retention.configure validates against the catalog: unknown or non-promotional offers, unknown products")
    func configureValidates() async throws {
        try await Self.withRetention { app, _ in
            let cases: [(JSONObject, String, String)] = [
                (
                    ["offers": [["offerId": "promo.nope", "messageId": "m1"]]], "params.offers[0].offerId",
                    "unknown_offer"
                ),
                (
                    [
                        "offers": [
                            ["offerId": "promo.free", "messageId": "m1"], ["offerId": "intro.week", "messageId": "m2"],
                        ]
                    ],
                    "params.offers[1].offerId", "not_promotional"
                ),
                (
                    ["offers": [], "alternateProducts": [["productId": "weekly", "messageId": "m3"]]],
                    "params.alternateProducts[0].productId", "unknown_product"
                ),
                (["offers": [], "budgetMs": 0], "params.budgetMs", "invalid_value"),
                (
                    ["offers": [["offerId": "promo.free", "messageId": ""]]], "params.offers[0].messageId",
                    "invalid_value"
                ),
                (["offers": [], "defaultMessageId": ""], "params.defaultMessageId", "invalid_value"),
            ]
            for (extra, param, reason) in cases {
                var params: JSONObject = [
                    "tenant": .string(app.slug), "defaultMessageId": .string(Self.defaultMessage),
                ]
                for member in extra { params[member.key] = member.value }
                let error = await expectRPCError(-32602, param: param) {
                    try await app.admin.call(method: "retention.configure", params: .object(params))
                }
                #expect(error?.reason == reason, "\(params)")
            }
            // Nothing was stored by any of them.
            let missing = await expectRPCError(-32004) {
                try await app.admin.call(method: "retention.get", params: ["tenant": .string(app.slug)])
            }
            #expect(missing?.reason == "retention_not_configured")
            #expect(try await app.count("retention_settings") == 0)

            let stored = try await app.admin.call(
                method: "retention.configure",
                params: [
                    "tenant": .string(app.slug), "defaultMessageId": .string(Self.defaultMessage),
                    "offers": [["offerId": "promo.free", "messageId": .string(Self.freeMessage)]],
                    "alternateProducts": [["productId": "yearly", "messageId": .string(Self.yearlyMessage)]],
                ])
            let got = try await app.admin.call(method: "retention.get", params: ["tenant": .string(app.slug)])
            #expect(got == stored)
            #expect(got["budgetMs"]?.int64Value == 500)
            #expect(got["defaultMessageId"]?.stringValue == Self.defaultMessage)
            #expect(got["offers"] == [["offerId": "promo.free", "messageId": .string(Self.freeMessage)]])
            #expect(got["alternateProducts"] == [["productId": "yearly", "messageId": .string(Self.yearlyMessage)]])
            // A tenant key may not configure (admin only).
            await expectRPCError(-32002) {
                try await app.client.call(method: "retention.get", params: ["tenant": .string(app.slug)])
            }
        }
    }

    @Test("An at-risk subscriber gets the best promotional offer that has a message, signed as Apple's V2 JWS")
    func atRiskSubscriberGetsSignedOffer() async throws {
        try await Self.withRetention { app, key in
            let token = UUID().uuidString.lowercased()
            let original = "4000000000000001"
            try await app.atRisk(token: token, original: original)
            // promo.half saves more than promo.free, but only promo.free has an approved message.
            try await app.configureRetention(offers: [("promo.free", Self.freeMessage)])
            let best = try await app.client.call(
                method: "offers.best", params: ["customerId": .string(token), "productId": "monthly"])
            #expect(best["offer"]?["offerId"]?.stringValue == "promo.half")

            let requestId = UUID()
            let outcome = try await app.askRetention(original: original, requestId: requestId)
            guard case .promotionalOffer(let messageId, let jws) = outcome.answer else {
                Issue.record("expected a promotional offer, got \(outcome.answer)")
                return
            }
            #expect(messageId == Self.freeMessage)
            #expect(outcome.fallbackReason == nil)
            #expect(
                Wire.retentionAnswer(outcome.answer)["promotionalOffer"]?["promotionalOfferSignatureV2"] == .string(jws)
            )

            // The public key verifies it; header and claims as Apple's docs have them.
            #expect(try PublicKey(pem: key.publicKeyPEM).verifyJWS(compact: jws))
            let parsed = try CompactJWS(compact: jws)
            #expect(try JSONParsing.parse(parsed.header) == ["alg": "ES256", "kid": "KEY1ABCDEF", "typ": "JWT"])
            let claims = try JSONParsing.parse(parsed.payload)
            #expect(claims["transactionId"]?.stringValue == original)
            #expect(claims["offerIdentifier"]?.stringValue == "promo.free")
            #expect(claims["productId"]?.stringValue == "monthly")
            #expect(claims["bid"]?.stringValue == app.payloads.bundleId)
            #expect(claims["aud"]?.stringValue == "promotional-offer")
            #expect(claims["exp"] == nil)
            let nonce = try #require(claims["nonce"]?.stringValue)

            // PyJWT verifies it; Apple's PromotionalOfferV2SignatureCreator makes the same header and claims.
            let python = try await pythonCrossCheck([
                "verify": [
                    "publicKeyPEM": .string(key.publicKeyPEM),
                    "jws": [["token": .string(jws), "audience": "promotional-offer"]],
                ],
                "apple": [
                    "privateKeyPEM": .string(try key.exportPKCS8PEM()), "keyId": "KEY1ABCDEF",
                    "issuerId": "57246542-96fe-1a63-e053-0824d011072a", "bundleId": .string(app.payloads.bundleId),
                    "promotional": [
                        "productId": "monthly", "offerId": "promo.free", "transactionId": .string(original),
                    ],
                ],
            ])
            let verified = try #require(python["verify"]?["jws"]?[0])
            #expect(verified["ok"]?.boolValue == true, "PyJWT: \(verified["error"]?.stringValue ?? "")")
            let appleToken = try #require(python["apple"]?["promotional"]?.stringValue)
            #expect(try PublicKey(pem: key.publicKeyPEM).verifyJWS(compact: appleToken))
            let apple = try CompactJWS(compact: appleToken)
            #expect(try JSONParsing.parse(apple.header) == JSONParsing.parse(parsed.header))
            var theirs = try #require(try JSONParsing.parse(apple.payload).objectValue)
            var ours = try #require(claims.objectValue)
            #expect(Set(theirs.keys) == Set(ours.keys))
            for name in ["nonce", "iat"] {
                theirs[name] = nil
                ours[name] = nil
            }
            #expect(theirs == ours)

            // Its ledger row, like any signature, and the answer's record.
            let tenant = try await app.gateway.tenantId(app.slug)
            let ledger = try await app.gateway.database.pool.query(
                """
                SELECT format, customer_id, offer_id, transaction_id FROM issued_signatures
                WHERE tenant_id = \(tenant) AND nonce = \(try #require(UUID(uuidString: nonce)))
                """)
            let row = try #require(ledger.first)
            #expect(
                try row.decode(String.self, String.self, String.self, String.self) == (
                    "jws", token, "promo.free", original
                ))
            let answers = try await app.recordedAnswers(count: 1)
            #expect(answers.first?.kind == .promotionalOffer)
            #expect(answers.first?.requestId == requestId)
            #expect(answers.first?.customerId == token)
            #expect(answers.first?.messageId == Self.freeMessage)
            #expect(answers.first?.nonce?.uuidString.lowercased() == nonce)
            #expect(answers.first?.originalTransactionId == original)

            // With a message for promo.half too, the better offer wins.
            try await app.configureRetention(offers: [
                ("promo.free", Self.freeMessage), ("promo.half", Self.halfMessage),
            ])
            let second = try await app.askRetention(original: original)
            guard case .promotionalOffer(let secondMessage, let secondJWS) = second.answer else {
                Issue.record("expected a promotional offer, got \(second.answer)")
                return
            }
            #expect(secondMessage == Self.halfMessage)
            #expect(
                try JSONParsing.parse(CompactJWS(compact: secondJWS).payload)["offerIdentifier"]?.stringValue
                    == "promo.half")
        }
    }

    @Test("Not eligible: the default message, or an alternate product of the group when one is configured")
    func ineligibleSubscriberGetsDefault() async throws {
        try await Self.withRetention { app, _ in
            let token = UUID().uuidString.lowercased()
            let original = "4000000000000002"
            // Subscribed, auto-renew on: not in any promotional offer's default audience.
            try await app.transactions(
                [
                    app.payloads.transaction(
                        id: original, purchase: days(-10), expires: days(20), token: token, signed: days(-10))
                ],
                renewals: [app.payloads.renewal(original: original, autoRenewStatus: 1, signed: days(-1))])
            try await app.configureRetention(offers: [
                ("promo.free", Self.freeMessage), ("promo.half", Self.halfMessage),
            ])
            let ineligible = try await app.askRetention(original: original)
            #expect(ineligible.answer == .message(messageId: Self.defaultMessage))
            #expect(ineligible.fallbackReason == "no_offer")
            #expect(
                Wire.retentionAnswer(ineligible.answer) == [
                    "message": ["messageIdentifier": .string(Self.defaultMessage)]
                ])
            // Nobody is linked to this chain.
            let stranger = try await app.askRetention(original: "4999999999999999")
            #expect(stranger.answer == .message(messageId: Self.defaultMessage))
            #expect(stranger.fallbackReason == "no_customer")

            try await app.configureRetention(
                offers: [("promo.free", Self.freeMessage)],
                alternates: [("monthly", Self.halfMessage), ("yearly", Self.yearlyMessage)])
            let alternate = try await app.askRetention(original: original)
            #expect(alternate.answer == .alternateProduct(messageId: Self.yearlyMessage, productId: "yearly"))
            #expect(
                Wire.retentionAnswer(alternate.answer)
                    == ["alternateProduct": ["messageIdentifier": .string(Self.yearlyMessage), "productId": "yearly"]])

            let answers = try await app.recordedAnswers(count: 3)
            // The test clock stands still, so the three answers carry one time and their stored order is not
            // defined: compare them as a multiset.
            let recorded = answers.map { "\($0.kind.rawValue)/\($0.fallbackReason ?? "-")" }.sorted()
            let expected = [
                "\(RetentionAnswerRecord.Kind.alternateProduct.rawValue)/no_offer",
                "\(RetentionAnswerRecord.Kind.message.rawValue)/no_customer",
                "\(RetentionAnswerRecord.Kind.message.rawValue)/no_offer",
            ].sorted()
            #expect(recorded == expected)
            let tenant = try await app.gateway.tenantId(app.slug)
            #expect(
                try await app.gateway.count(
                    "SELECT count(*)::bigint FROM issued_signatures WHERE tenant_id = \(tenant)") == 0)
        }
    }

    @Test("A forged or foreign request is rejected with the verifier's reason, and nothing is answered or recorded")
    func forgedRequestRejected() async throws {
        try await Self.withRetention { app, _ in
            let token = UUID().uuidString.lowercased()
            let original = "4000000000000003"
            try await app.atRisk(token: token, original: original)
            try await app.configureRetention(offers: [("promo.free", Self.freeMessage)])
            let good = try app.signed(app.retentionPayload(original: original))
            let parts = good.split(separator: ".").map(String.init)
            // Another subscriber's request under the genuine signature.
            let forged =
                parts[0] + "."
                + Base64URL.encode(JSONSerializer.serialize(app.retentionPayload(original: "4000000000000004"))) + "."
                + parts[2]
            let foreign = try app.signed(app.retentionPayload(original: original, appAppleId: 42))
            let cases: [(String, String)] = [
                (forged, "invalid_signature"), (foreign, "wrong_app_apple_id"), ("not.a.jws", "malformed_jws"),
                (parts[0] + "." + parts[1], "malformed_jws"),
            ]
            for (jws, reason) in cases {
                do {
                    let outcome = try await app.retention.answer(tenant: app.slug, body: Self.body(jws))
                    Issue.record("expected \(reason), got \(outcome.answer)")
                } catch let error as AppleSignedDataError {
                    #expect(error.reason.rawValue == reason)
                }
            }
            for body in [Array("not json".utf8), Array(#"{"signedPayload": 7}"#.utf8), []] {
                await #expect(throws: GatewayError.self) {
                    _ = try await app.retention.answer(tenant: app.slug, body: body)
                }
            }
            do {
                _ = try await app.retention.answer(tenant: "no-such-app", body: Self.body(good))
                Issue.record("an unknown tenant must be refused")
            } catch let error as GatewayError {
                #expect(error.rpcError.code == -32004 && error.rpcError.reason == "unknown_tenant")
            }
            // The good request is answered, and it is the only answer recorded.
            guard case .promotionalOffer = try await app.askRetention(original: original).answer else {
                Issue.record("the genuine request must get the offer")
                return
            }
            #expect(try await app.recordedAnswers(count: 1).count == 1)
            #expect(try await app.count("issued_signatures") == 1)
        }
    }

    @Test("The budget: work that takes longer is abandoned at the deadline, and what finishes first wins")
    func budgetRace() async throws {
        let started = ContinuousClock.now
        let late = await RetentionService.race(until: started + .milliseconds(50)) { () async throws -> Int in
            try await Task.sleep(for: .seconds(30))
            return 1
        }
        guard case .timedOut = late else {
            Issue.record("expected the deadline to win, got \(late)")
            return
        }
        // Returned at the deadline, not after the work (which the deadline cancelled).
        #expect(ContinuousClock.now - started < .seconds(20))
        let quick = await RetentionService.race(until: .now + .seconds(30)) { () async throws -> Int in 7 }
        guard case .finished(.success(7)) = quick else {
            Issue.record("expected the work to win, got \(quick)")
            return
        }
        struct Boom: Error {}
        let failed = await RetentionService.race(until: .now + .seconds(30)) { () async throws -> Int in throw Boom() }
        guard case .finished(.failure(let error)) = failed, error is Boom else {
            Issue.record("expected the work's error, got \(failed)")
            return
        }
    }

    @Test("Concurrent requests for different subscribers: each answered for its own customer, an unlinked chain too")
    func concurrentRequestsGetTheirOwnCustomers() async throws {
        try await Self.withRetention { app, _ in
            let subscribers = (0..<12).map { i in (UUID().uuidString.lowercased(), "40000000000001\(10 + i)") }
            for (token, original) in subscribers { try await app.atRisk(token: token, original: original) }
            try await app.configureRetention(offers: [("promo.free", Self.freeMessage)])
            let stranger = "4999999999999998"
            let originals = subscribers.map(\.1) + [stranger]
            let outcomes = try await withThrowingTaskGroup(of: (String, RetentionService.Outcome).self) { group in
                for original in originals {
                    group.addTask { (original, try await app.askRetention(original: original)) }
                }
                return try await group.reduce(into: [String: RetentionService.Outcome]()) { $0[$1.0] = $1.1 }
            }
            #expect(outcomes.count == originals.count)
            for (_, original) in subscribers {
                guard case .promotionalOffer(_, let jws) = outcomes[original]?.answer else {
                    Issue.record(
                        "\(original): expected a promotional offer, got \(String(describing: outcomes[original]))")
                    continue
                }
                let claims = try JSONParsing.parse(CompactJWS(compact: jws).payload)
                #expect(claims["transactionId"]?.stringValue == original)
            }
            #expect(outcomes[stranger]?.answer == .message(messageId: Self.defaultMessage))
            #expect(outcomes[stranger]?.fallbackReason == "no_customer")
            // Each answer's record and ledger row name the customer linked to its own chain.
            let recorded = try await app.recordedAnswers(count: originals.count)
            let customers = Dictionary(recorded.map { ($0.originalTransactionId ?? "", $0.customerId) }) { a, _ in a }
            for (token, original) in subscribers { #expect(customers[original] == .some(token), "\(original)") }
            #expect(customers[stranger] == .some(nil))
            let tenant = try await app.gateway.tenantId(app.slug)
            let ledger = try await app.gateway.database.pool.query(
                """
                SELECT transaction_id, customer_id FROM issued_signatures WHERE tenant_id = \(tenant)
                ORDER BY transaction_id
                """
            ).map { try $0.decode(String.self, String.self) }
            #expect(ledger.map(\.0) == subscribers.map(\.1).sorted())
            #expect(ledger.map(\.1) == ledger.map { row in subscribers.first { $0.1 == row.0 }?.0 ?? "" })
        }
    }

    @Test("A lookup stuck in PostgreSQL: the default message inside the budget, and no signature once it ends")
    func stuckLookupFallsBackInsideBudget() async throws {
        try await Self.withRetention { app, _ in
            let token = UUID().uuidString.lowercased()
            let original = "4000000000000020"
            try await app.atRisk(token: token, original: original)
            try await app.configureRetention(offers: [("promo.free", Self.freeMessage)], budgetMs: 5_000)
            // Tenant, settings and catalog in memory (another subscriber's answer); this chain's customer is not.
            try await app.atRisk(token: UUID().uuidString.lowercased(), original: "4000000000000021")
            guard case .promotionalOffer = try await app.askRetention(original: "4000000000000021").answer else {
                Issue.record("with nothing locked, the offer")
                return
            }
            // A transaction holding customer_links locked: the lookup's statement waits for it.
            let locked = AsyncStream<Void>.makeStream()
            let release = AsyncStream<Void>.makeStream()
            let holder = Task {
                try await app.gateway.database.pool.withTransaction { tx in
                    try await tx.query("LOCK TABLE customer_links IN ACCESS EXCLUSIVE MODE")
                    locked.continuation.yield()
                    for await _ in release.stream { break }
                }
            }
            for await _ in locked.stream { break }
            // Released after the answer, or after a minute if the answer waited for the lock (the test then fails on
            // the answer instead of hanging).
            let backstop = Task {
                try? await Task.sleep(for: .seconds(60))
                release.continuation.yield()
            }
            let outcome = try await app.askRetention(original: original)
            release.continuation.yield()
            backstop.cancel()
            try await holder.value
            #expect(outcome.answer == .message(messageId: Self.defaultMessage))
            #expect(outcome.fallbackReason == "budget_exceeded")
            #expect(outcome.withinBudget, "answered after \(outcome.latency)")
            // The work was cancelled at the deadline: once the lookup ends, nothing is signed for the answer given.
            let answers = try await app.recordedAnswers(count: 2)
            #expect(answers.map(\.fallbackReason).contains("budget_exceeded"))
            let tenant = try await app.gateway.tenantId(app.slug)
            let signed: @Sendable () async throws -> Int = {
                try await app.gateway.count(
                    """
                    SELECT count(*)::bigint FROM issued_signatures
                    WHERE tenant_id = \(tenant) AND transaction_id = \(original)
                    """)
            }
            // The next request for the chain is answered with the offer, and it is the chain's only signature.
            guard case .promotionalOffer = try await app.askRetention(original: original).answer else {
                Issue.record("with the lock released, the offer")
                return
            }
            #expect(try await signed() == 1)
        }
    }

    static func body(_ jws: String) -> [UInt8] {
        JSONSerializer.serialize(["signedPayload": .string(jws)])
    }
}

/// Stops and starts its own PostgreSQL cluster (no other suite uses it).
@Suite("Retention Messaging with the database down", .serialized)
struct RetentionDatabaseDownTests {
    static let server = TestServer.restartable("retention-down")

    @Test("With PostgreSQL stopped, Apple still gets the default message, inside the budget")
    func databaseDown() async throws {
        try await RetentionTests.withRetention(server: Self.server) { app, _ in
            let token = UUID().uuidString.lowercased()
            try await app.atRisk(token: token, original: "4000000000000010")
            try await app.configureRetention(offers: [("promo.free", RetentionTests.freeMessage)], budgetMs: 5_000)
            // Tenant, settings and catalog are now in memory; this customer is not.
            guard case .promotionalOffer = try await app.askRetention(original: "4000000000000010").answer else {
                Issue.record("with the database up, the offer")
                return
            }
            let other = UUID().uuidString.lowercased()
            try await app.atRisk(token: other, original: "4000000000000011")
            try await Self.server.pg("stop")
            do {
                let outcome = try await app.askRetention(original: "4000000000000011")
                #expect(outcome.answer == .message(messageId: RetentionTests.defaultMessage))
                #expect(["unavailable", "budget_exceeded", "internal_error"].contains(outcome.fallbackReason ?? ""))
                #expect(outcome.withinBudget, "answered after \(outcome.latency)")
            } catch {
                try await Self.server.pg("start")
                throw error
            }
            try await Self.server.pg("start")
            let logged = await eventually(timeout: .seconds(20)) {
                app.gateway.logs.all.contains { $0.contains("a retention answer was given but not recorded") }
            }
            #expect(logged, "the answer that could not be recorded is logged")
        }
    }
}

extension AppleTenant {
    var retention: RetentionService { gateway.service.gateway.services.retention }

    /// A subscriber of `monthly` with auto-renew turned off: at risk, in every promotional offer's default audience.
    func atRisk(token: String, original: String) async throws {
        try await transactions(
            [
                payloads.transaction(
                    id: original, purchase: days(-10), expires: days(20), token: token, signed: days(-10))
            ],
            renewals: [payloads.renewal(original: original, autoRenewStatus: 0, signed: days(-1))])
    }

    func configureRetention(
        offers: [(String, String)], alternates: [(String, String)] = [], budgetMs: Int? = nil
    ) async throws {
        var params: JSONObject = [
            "tenant": .string(slug), "defaultMessageId": .string(RetentionTests.defaultMessage),
            "offers": .array(offers.map { ["offerId": .string($0.0), "messageId": .string($0.1)] }),
            "alternateProducts": .array(alternates.map { ["productId": .string($0.0), "messageId": .string($0.1)] }),
        ]
        // A generous budget by default: on a loaded machine 500 ms can pass, and these tests check what is decided,
        // not how fast (the budget's own behaviour has its tests: the race, and the database down).
        params["budgetMs"] = .int(budgetMs ?? 10_000)
        _ = try await admin.call(method: "retention.configure", params: .object(params))
    }

    /// The payload of Apple's realtime request (APPLE_OFFERS.md §8).
    func retentionPayload(
        original: String, product: String = "monthly", requestId: UUID = UUID(),
        appAppleId: Int64 = AppleTestCA.appAppleId
    ) -> JSONValue {
        [
            "originalTransactionId": .string(original), "appAppleId": .int(Int(appAppleId)),
            "productId": .string(product), "userLocale": "en-US",
            "requestIdentifier": .string(requestId.uuidString.lowercased()), "signedDate": appleMs(days(0)),
            "environment": "Production",
        ]
    }

    func askRetention(original: String, requestId: UUID = UUID()) async throws -> RetentionService.Outcome {
        let jws = try signed(retentionPayload(original: original, requestId: requestId))
        return try await retention.answer(tenant: slug, body: RetentionTests.body(jws))
    }

    /// The tenant's recorded answers, newest first, once `count` are there (they are written after the answer).
    func recordedAnswers(count: Int) async throws -> [RetentionAnswerRecord] {
        let tenant = try await gateway.tenantId(slug)
        let repository = gateway.database.retention
        _ = await eventually(timeout: .seconds(20)) {
            ((try? await repository.recentAnswers(tenant: tenant).count) ?? 0) >= count
        }
        return try await repository.recentAnswers(tenant: tenant)
    }
}

/// Runs tests/python/offer_crypto_check.py (PyJWT, Apple's app-store-server-library) on `request`.
func pythonCrossCheck(_ request: JSONValue) async throws -> JSONValue {
    let configured = ProcessInfo.processInfo.environment["OFFERGATE_PYTHON"] ?? ""
    let venv = PackagePaths.root.appendingPathComponent(".build/pyenv/bin/python3").path
    let python = configured.isEmpty ? venv : configured
    try #require(
        FileManager.default.isExecutableFile(atPath: python),
        "no Python with Apple's library at \(python): run ops/pyenv or set OFFERGATE_PYTHON")
    let script = PackagePaths.root.appendingPathComponent("tests/python/offer_crypto_check.py").path
    let outcome = try await ChildProcess.run(
        python, [script], environment: ChildProcess.environment(), input: request.text)
    try #require(outcome.status == 0, "offer_crypto_check.py: \(outcome)")
    return try JSONParsing.parse(Array(outcome.stdout.utf8))
}
