import Foundation
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Postgres
import Testing

@testable import OfferGateway
@testable import OfferStore

/// Apple's Python tools over a signature the gateway returned (tests/python/offer_crypto_check.py, run with the
/// ops/pyenv venv): `cryptography` and PyJWT verify ours with the public key, and Apple's app-store-server-library
/// signs the same inputs so its V1 signature is checked over our payload bytes and its JWS compared claim by claim.
enum ApplePython {
    static func python() throws -> String {
        let configured = ProcessInfo.processInfo.environment["OFFERGATE_PYTHON"] ?? ""
        let python =
            configured.isEmpty ? PackagePaths.root.appendingPathComponent(".build/pyenv/bin/python3").path : configured
        try #require(
            FileManager.default.isExecutableFile(atPath: python),
            "no Python with Apple's library at \(python): run ops/pyenv or set OFFERGATE_PYTHON")
        return python
    }

    static func check(_ request: JSONValue) async throws -> JSONValue {
        let script = PackagePaths.root.appendingPathComponent("tests/python/offer_crypto_check.py").path
        let outcome = try await ChildProcess.run(
            try python(), [script], environment: ChildProcess.environment(), input: request.text)
        try #require(outcome.status == 0, "offer_crypto_check.py: \(outcome)")
        return try JSONParsing.parse(outcome.stdout)
    }
}

/// Issue 14 point 1: a campaign granting a promotional offer, redeemed and signed in one call.
@Suite("codes.redeem with sign")
struct RedeemAndSignTests {
    static let slug = "story"
    static let bundleId = "com.example.story"
    static let keyId = "KEY1ABCDEF"
    static let issuerId = "57246542-96fe-1a63-e053-0824d011072a"
    static let retention: JSONValue = [
        "id": "retention_50_off", "type": "promotional", "productId": "monthly", "paymentMode": "payAsYouGo",
        "period": "P1M", "periodCount": 3, "price": "2.49",
    ]
    static let codeOffer: JSONValue = [
        "id": "code.free", "type": "code", "productId": "monthly", "paymentMode": "freeTrial", "period": "P1M",
    ]

    struct Story {
        let gateway: TestGateway
        let admin: RPCClient
        let app: RPCClient
        let key: SigningKey
    }

    /// A tenant with the standard catalog plus `retention_50_off`, a signing key, and campaign `save50` (code
    /// SAVE50) granting it.
    static func story(_ gateway: TestGateway) async throws -> Story {
        let admin = try await gateway.admin()
        let apiKey = try await gateway.createTenant(slug, bundleId: bundleId, admin: admin)
        try await gateway.upsertStandardCatalog(tenant: slug, admin: admin, extraOffers: [retention, codeOffer])
        let key = try await gateway.importKey(tenant: slug, keyId: keyId, issuerId: issuerId, admin: admin)
        _ = try await admin.call(
            method: "campaigns.create",
            params: [
                "tenant": .string(slug), "campaignId": "save50", "offerId": "retention_50_off", "kind": "custom",
                "code": "SAVE50",
            ])
        return Story(gateway: gateway, admin: admin, app: try await gateway.tenant(apiKey), key: key)
    }

    static func ledgerRow(_ gateway: TestGateway, nonce: String) async throws -> (String?, String, String?) {
        let rows = try await gateway.database.pool.query(
            """
            SELECT redemption_id::text, customer_id, offer_id FROM issued_signatures WHERE nonce = \(nonce)::uuid
            """)
        let row = try #require(rows.first, "no ledger row for nonce \(nonce)")
        return try row.decode(String?.self, String.self, String?.self)
    }

    @Test("new user: SAVE50 redeemed with sign v1 → a V1 signature that verifies (public key, Python, Apple's library)")
    func newUserV1() async throws {
        try await TestGateway.with { gateway in
            let s = try await Self.story(gateway)
            let customer = "5b8e7c2a-1d3f-4e6a-9b0c-7d2e1f3a4b5c"
            // The report: without the redemption the new customer is not eligible.
            let refused = await expectRPCError(-32020) {
                try await s.app.call(
                    method: "offers.sign",
                    params: [
                        "customerId": .string(customer), "productId": "monthly", "offerId": "retention_50_off",
                        "format": "v1",
                    ])
            }
            #expect(refused?.data?["reasons"] == ["no_history"])

            let result = try await s.app.call(
                method: "codes.redeem",
                params: ["code": "save-50", "customerId": .string(customer), "idempotencyKey": "k-v1", "sign": "v1"])
            let redemptionId = try #require(result["redemptionId"]?.stringValue)
            #expect(result["offerId"] == "retention_50_off" && result["replayed"] == false)
            let signature = try #require(result["signature"])
            #expect(signature["format"] == "v1" && signature["keyId"] == .string(Self.keyId))
            #expect(signature["offerId"] == "retention_50_off" && signature["productId"] == "monthly")
            #expect(signature["appAccountToken"] == .string(customer))
            let nonceText = try #require(signature["nonce"]?.stringValue)
            let nonce = try #require(UUID(uuidString: nonceText))
            let timestamp = try #require(signature["timestamp"]?.int64Value)
            #expect(timestamp == Int64(TestGateway.now.timeIntervalSince1970 * 1000))
            let der = try #require(Data(base64Encoded: signature["signature"]?.stringValue ?? ""))
            let signer = OfferSigner(key: s.key, keyId: Self.keyId, issuerId: Self.issuerId, bundleId: Self.bundleId)
            let payload = signer.v1Payload(
                productId: "monthly", offerId: "retention_50_off", appAccountToken: customer, nonce: nonce,
                timestamp: timestamp
            ).bytes
            #expect(try s.key.publicKey.verify(derSignature: Array(der), message: payload))
            #expect(try !s.key.publicKey.verify(derSignature: Array(der), message: payload + [0x30]))

            // Python: `cryptography` verifies ours; Apple's library signs the same inputs, and its signature
            // verifies over our payload bytes (so both sign the same message).
            let check = try await ApplePython.check([
                "verify": [
                    "publicKeyPEM": .string(s.key.publicKey.pem),
                    "v1": [
                        [
                            "payloadHex": .string(payload.map { String(format: "%02x", $0) }.joined()),
                            "signature": .string(der.base64EncodedString()),
                        ]
                    ],
                ],
                "apple": [
                    "privateKeyPEM": .string(try s.key.exportPKCS8PEM()), "keyId": .string(Self.keyId),
                    "issuerId": .string(Self.issuerId), "bundleId": .string(Self.bundleId),
                    "v1": [
                        "productId": "monthly", "offerId": "retention_50_off", "appAccountToken": .string(customer),
                        "nonce": .string(nonceText), "timestamp": .int(Int(timestamp)),
                    ],
                ],
            ])
            #expect(check["verify"]?["v1"] == [true])
            let appleDER = try #require(Data(base64Encoded: check["apple"]?["v1Signature"]?.stringValue ?? ""))
            #expect(try s.key.publicKey.verify(derSignature: Array(appleDER), message: payload))

            // The ledger row names the redemption.
            let (named, ledgerCustomer, offer) = try await Self.ledgerRow(gateway, nonce: nonceText)
            #expect(named == redemptionId && ledgerCustomer == customer && offer == "retention_50_off")

            // A replay: the same redemption and the same signature (still valid), and no second ledger row.
            let replay = try await s.app.call(
                method: "codes.redeem",
                params: ["code": "SAVE50", "customerId": .string(customer), "idempotencyKey": "k-v1", "sign": "v1"])
            #expect(replay["redemptionId"] == .string(redemptionId) && replay["replayed"] == true)
            #expect(replay["signature"] == signature)
            #expect(
                try await gateway.count(
                    "SELECT count(*) FROM issued_signatures WHERE redemption_id = \(redemptionId)::uuid") == 1)

            // offers.sign with the redemption: eligible whatever the audience; its ledger row names it too.
            let again = try await s.app.call(
                method: "offers.sign",
                params: [
                    "customerId": .string(customer), "productId": "monthly", "offerId": "retention_50_off",
                    "format": "v1", "redemptionId": .string(redemptionId),
                ])
            let againNonce = try #require(again["nonce"]?.stringValue)
            #expect(againNonce != nonceText)
            #expect(try await Self.ledgerRow(gateway, nonce: againNonce).0 == redemptionId)

            // Rolled back: signing with it is refused, and a replay of the redemption signs nothing.
            _ = try await s.app.call(method: "codes.rollback", params: ["redemptionId": .string(redemptionId)])
            let gone = await expectRPCError(-32020) {
                try await s.app.call(
                    method: "offers.sign",
                    params: [
                        "customerId": .string(customer), "productId": "monthly", "offerId": "retention_50_off",
                        "format": "v1", "redemptionId": .string(redemptionId),
                    ])
            }
            #expect(gone?.data?["reasons"] == ["redemption_rolled_back"])
            let ledgerBefore = try await gateway.count("SELECT count(*) FROM issued_signatures")
            await expectRPCError(-32020) {
                try await s.app.call(
                    method: "codes.redeem",
                    params: ["code": "SAVE50", "customerId": .string(customer), "idempotencyKey": "k-v1", "sign": "v1"])
            }
            #expect(try await gateway.count("SELECT count(*) FROM issued_signatures") == ledgerBefore)
        }
    }

    @Test("new user: SAVE50 redeemed with sign jws → a JWS that verifies (public key, PyJWT) and matches Apple's")
    func newUserJWS() async throws {
        try await TestGateway.with { gateway in
            let s = try await Self.story(gateway)
            let customer = "new-customer-42"
            let result = try await s.app.call(
                method: "codes.redeem",
                params: [
                    "code": "SAVE50", "customerId": .string(customer), "sign": "jws", "transactionId": "2000000123",
                ])
            let redemptionId = try #require(result["redemptionId"]?.stringValue)
            let signature = try #require(result["signature"])
            #expect(signature["format"] == "jws" && signature["offerId"] == "retention_50_off")
            let compact = try #require(signature["compactJWS"]?.stringValue)
            #expect(try s.key.publicKey.verifyJWS(compact: compact))
            let claims = try JSONParsing.parse(
                String(decoding: try CompactJWS(compact: compact).payload, as: UTF8.self))
            #expect(claims["offerIdentifier"] == "retention_50_off" && claims["productId"] == "monthly")
            #expect(claims["transactionId"] == "2000000123" && claims["bid"] == .string(Self.bundleId))
            #expect(claims["nonce"] == signature["nonce"])

            let check = try await ApplePython.check([
                "verify": [
                    "publicKeyPEM": .string(s.key.publicKey.pem),
                    "jws": [["token": .string(compact), "audience": "promotional-offer"]],
                ],
                "apple": [
                    "privateKeyPEM": .string(try s.key.exportPKCS8PEM()), "keyId": .string(Self.keyId),
                    "issuerId": .string(Self.issuerId), "bundleId": .string(Self.bundleId),
                    "promotional": [
                        "productId": "monthly", "offerId": "retention_50_off", "transactionId": "2000000123",
                    ],
                ],
            ])
            let verified = try #require(check["verify"]?["jws"]?[0])
            #expect(verified["ok"] == true, "\(verified)")
            // Apple's token for the same offer: same header and the same claims but for nonce and iat.
            let apple = try CompactJWS(compact: check["apple"]?["promotional"]?.stringValue ?? "")
            let ours = try CompactJWS(compact: compact)
            #expect(
                try JSONParsing.parse(String(decoding: apple.header, as: UTF8.self))
                    == JSONParsing.parse(String(decoding: ours.header, as: UTF8.self)))
            var theirClaims = try #require(
                try JSONParsing.parse(String(decoding: apple.payload, as: UTF8.self)).objectValue)
            var ourClaims = try #require(claims.objectValue)
            for name in ["nonce", "iat"] {
                theirClaims[name] = nil
                ourClaims[name] = nil
            }
            #expect(theirClaims == ourClaims)

            let nonce = try #require(signature["nonce"]?.stringValue)
            #expect(try await Self.ledgerRow(gateway, nonce: nonce).0 == redemptionId)

            // Without an idempotency key the same call is a new attempt: the customer's limit (1) refuses it.
            await expectRPCError(-32043) {
                try await s.app.call(
                    method: "codes.redeem", params: ["code": "SAVE50", "customerId": .string(customer), "sign": "jws"])
            }
            _ = try await s.app.call(method: "codes.rollback", params: ["redemptionId": .string(redemptionId)])
            await expectRPCError(-32020) {
                try await s.app.call(
                    method: "offers.sign",
                    params: [
                        "customerId": .string(customer), "productId": "monthly", "offerId": "retention_50_off",
                        "format": "jws", "redemptionId": .string(redemptionId),
                    ])
            }
        }
    }

    @Test("refusals: a non-promotional grant, bad params, someone else's redemption; nothing is stored")
    func refusals() async throws {
        try await TestGateway.with { gateway in
            let s = try await Self.story(gateway)
            _ = try await s.admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": .string(Self.slug), "campaignId": "free", "offerId": "code.free", "kind": "custom",
                    "code": "FREEMONTH",
                ])
            func count() async throws -> Int {
                try await gateway.count(
                    "SELECT (SELECT count(*) FROM redemptions) + (SELECT count(*) FROM issued_signatures)")
            }
            let before = try await count()
            let notSignable = await expectRPCError(-32602, param: "params.sign") {
                try await s.app.call(
                    method: "codes.redeem", params: ["code": "FREEMONTH", "customerId": "c1", "sign": "v1"])
            }
            #expect(notSignable?.reason == "offer_not_signable")
            await expectRPCError(-32602, param: "params.sign") {
                try await s.app.call(
                    method: "codes.redeem", params: ["code": "SAVE50", "customerId": "c1", "sign": "v2"])
            }
            await expectRPCError(-32602, param: "params.appAccountToken") {
                try await s.app.call(
                    method: "codes.redeem",
                    params: ["code": "SAVE50", "customerId": "c1", "sign": "v1", "appAccountToken": "not-a-uuid"])
            }
            await expectRPCError(-32602, param: "params.transactionId") {
                try await s.app.call(
                    method: "codes.redeem", params: ["code": "SAVE50", "customerId": "c1", "transactionId": "1"])
            }
            await expectRPCError(-32602, param: "params.redemptionId") {
                try await s.app.call(
                    method: "offers.sign",
                    params: [
                        "customerId": "c1", "productId": "monthly", "offerId": "retention_50_off", "format": "v1",
                        "redemptionId": "nope",
                    ])
            }
            await expectRPCError(-32004) {
                try await s.app.call(
                    method: "offers.sign",
                    params: [
                        "customerId": "c1", "productId": "monthly", "offerId": "retention_50_off", "format": "v1",
                        "redemptionId": .string(UUID().uuidString),
                    ])
            }
            #expect(try await count() == before)

            // Another customer's redemption, or one granting another offer, is no eligibility.
            let mine = try await s.app.call(method: "codes.redeem", params: ["code": "SAVE50", "customerId": "c1"])
            let id = try #require(mine["redemptionId"])
            #expect(mine["signature"] == nil)
            let other = await expectRPCError(-32020) {
                try await s.app.call(
                    method: "offers.sign",
                    params: [
                        "customerId": "c2", "productId": "monthly", "offerId": "retention_50_off", "format": "v1",
                        "redemptionId": id,
                    ])
            }
            #expect(other?.data?["reasons"] == ["redemption_not_for_offer"])
            await expectRPCError(-32020) {
                try await s.app.call(
                    method: "offers.sign",
                    params: [
                        "customerId": "c1", "productId": "monthly", "offerId": "promo.half", "format": "v1",
                        "redemptionId": id,
                    ])
            }
        }
    }
}
