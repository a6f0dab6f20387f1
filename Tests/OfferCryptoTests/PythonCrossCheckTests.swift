import Foundation
import Testing

@testable import OfferCrypto

/// Cross-checks with independent implementations: Python `cryptography`, PyJWT and Apple's own
/// app-store-server-library (installed by `ops/pyenv`). A missing Python environment fails these tests.
@Suite("Python and Apple library cross-checks")
struct PythonCrossCheckTests {
    @Test("Our V1 signatures and JWS verify under Python cryptography and PyJWT; claims match field by field")
    func oursVerifyInPython() async throws {
        let signer = try OfferSigner(
            key: SigningKey.generate(), keyId: "KEY9", issuerId: "issuer-uuid",
            bundleId: "com.example.app")
        var v1Items: [[String: Any]] = []
        var expectedV1: [Bool] = []
        for (index, token) in ["", "4A1B7C2D-0000-4000-8000-00000000ABCD", "Üser\u{2063}Näme"].enumerated() {
            let signature = try signer.signV1(productId: "p\(index)", offerId: "o\(index)", appAccountToken: token)
            let payload = signer.v1Payload(
                productId: "p\(index)", offerId: "o\(index)", appAccountToken: token,
                nonce: signature.nonce, timestamp: signature.timestamp)
            v1Items.append(["payloadHex": Hex.encode(payload.bytes), "signature": signature.signature])
            expectedV1.append(true)
            // A negative control: the same signature over another timestamp must fail in Python too.
            var other = payload
            other.timestamp += 1
            v1Items.append(["payloadHex": Hex.encode(other.bytes), "signature": signature.signature])
            expectedV1.append(false)
        }
        let nonce = UUID()
        let issued = Date(timeIntervalSince1970: 1_750_000_000)
        let promo = try signer.promotionalOfferJWS(
            productId: "prod\"q", offerId: "offer/1", transactionId: nil,
            nonce: nonce, issuedAt: issued)
        let promoTx = try signer.promotionalOfferJWS(
            productId: "prod", offerId: "offer", transactionId: "tx-ü",
            nonce: nonce, issuedAt: issued)
        let intro = try signer.introductoryOfferEligibilityJWS(
            productId: "prod", allowIntroductoryOffer: true,
            transactionId: "atx", nonce: nonce, issuedAt: issued)
        let request: [String: Any] = [
            "verify": [
                "publicKeyPEM": signer.key.publicKeyPEM,
                "v1": v1Items,
                "jws": [
                    ["token": promo, "audience": "promotional-offer"],
                    ["token": promoTx, "audience": "promotional-offer"],
                    ["token": intro, "audience": "introductory-offer-eligibility"],
                    ["token": intro, "audience": "promotional-offer"],
                ],
            ]
        ]
        let response = try await pythonCheck(request)
        let verify = try #require(response["verify"] as? [String: Any])
        #expect(verify["v1"] as? [Bool] == expectedV1)
        let jws = try #require(verify["jws"] as? [[String: Any]])
        try #require(jws.count == 4)
        for entry in jws.prefix(3) {
            #expect(entry["ok"] as? Bool == true, "PyJWT: \(entry["error"] ?? "")")
            let header = try flatJSON(#require(entry["header"] as? String))
            #expect(header == ["alg": .string("ES256"), "kid": .string("KEY9"), "typ": .string("JWT")])
        }
        #expect(jws[3]["ok"] as? Bool == false)  // wrong audience is refused by PyJWT

        let base: [String: JSONScalar] = [
            "iss": .string("issuer-uuid"), "iat": .integer(1_750_000_000),
            "bid": .string("com.example.app"),
            "nonce": .string(nonce.uuidString.lowercased()),
        ]
        try expectClaims(
            jws[0]["claims"],
            base.merging([
                "aud": .string("promotional-offer"),
                "productId": .string("prod\"q"),
                "offerIdentifier": .string("offer/1"),
            ]) { $1 })
        try expectClaims(
            jws[1]["claims"],
            base.merging([
                "aud": .string("promotional-offer"),
                "productId": .string("prod"),
                "offerIdentifier": .string("offer"),
                "transactionId": .string("tx-ü"),
            ]) { $1 })
        try expectClaims(
            jws[2]["claims"],
            base.merging([
                "aud": .string("introductory-offer-eligibility"),
                "productId": .string("prod"),
                "allowIntroductoryOffer": .bool(true),
                "transactionId": .string("atx"),
            ]) { $1 })
    }

    @Test("Signatures made concurrently (4 tasks, one signer) all verify under Python cryptography and PyJWT")
    func concurrentSignaturesVerifyInPython() async throws {
        let signer = try OfferSigner(
            key: SigningKey.generate(), keyId: "CONC", issuerId: "iss", bundleId: "com.example.concurrent")
        struct Made: Sendable {
            let payloadHex: String
            let signature: String
            let token: String
        }
        let made = try await withThrowingTaskGroup(of: [Made].self) { group in
            for task in 0..<4 {
                group.addTask {
                    try (0..<50).map { index in
                        let product = "p-\(task)-\(index)"
                        let v1 = try signer.signV1(productId: product, offerId: "o", appAccountToken: "Tok\(index)")
                        let payload = signer.v1Payload(
                            productId: product, offerId: "o", appAccountToken: "Tok\(index)", nonce: v1.nonce,
                            timestamp: v1.timestamp)
                        let jws = try signer.promotionalOfferJWS(productId: product, offerId: "o")
                        return Made(payloadHex: Hex.encode(payload.bytes), signature: v1.signature, token: jws)
                    }
                }
            }
            var all: [Made] = []
            for try await chunk in group { all += chunk }
            return all
        }
        let response = try await pythonCheck([
            "verify": [
                "publicKeyPEM": signer.key.publicKeyPEM,
                "v1": made.map { ["payloadHex": $0.payloadHex, "signature": $0.signature] },
                "jws": made.map { ["token": $0.token, "audience": "promotional-offer"] },
            ]
        ])
        let verify = try #require(response["verify"] as? [String: Any])
        #expect(verify["v1"] as? [Bool] == Array(repeating: true, count: 200))
        let jws = try #require(verify["jws"] as? [[String: Any]])
        #expect(jws.count == 200)
        #expect(jws.allSatisfy { $0["ok"] as? Bool == true })
    }

    @Test("Apple's library and ours: same payload and key → both V1 signatures verify; same JWS header and claims")
    func appleLibraryAgrees() async throws {
        let key = try SigningKey.generate()
        let keyId = "APPLEKEY01"
        let issuerId = "57246542-96fe-1a63-e053-0824d011072a"
        let bundleId = "com.example.crosscheck"
        let signer = OfferSigner(key: key, keyId: keyId, issuerId: issuerId, bundleId: bundleId)
        let nonce = try #require(UUID(uuidString: "6E3D0C3B-3F7B-4A52-9D0B-2B8A9F1C4D5E"))
        let timestamp: Int64 = 1_764_460_800_000
        let token = "A0B1C2D3-E4F5-4678-9ABC-DEF012345678"
        let request: [String: Any] = [
            "apple": [
                "privateKeyPEM": try key.exportPKCS8PEM(), "keyId": keyId, "issuerId": issuerId, "bundleId": bundleId,
                "v1": [
                    "productId": "com.example.monthly", "offerId": "PROMO_50", "appAccountToken": token,
                    "nonce": nonce.uuidString, "timestamp": timestamp,
                ],
                "promotional": [
                    "productId": "com.example.monthly", "offerId": "PROMO_50", "transactionId": "20000001",
                ],
                "intro": [
                    "productId": "com.example.yearly", "allowIntroductoryOffer": false,
                    "transactionId": "appTx-42",
                ],
            ]
        ]
        let started = Int(Date().timeIntervalSince1970)
        let response = try await pythonCheck(request)
        let finished = Int(Date().timeIntervalSince1970)
        let apple = try #require(response["apple"] as? [String: Any])

        // V1: Apple's signature verifies over OUR payload bytes (so Apple signed the same bytes), and ours too.
        let ours = try signer.signV1(
            productId: "com.example.monthly", offerId: "PROMO_50", appAccountToken: token,
            nonce: nonce, timestamp: timestamp)
        let payload = signer.v1Payload(
            productId: "com.example.monthly", offerId: "PROMO_50", appAccountToken: token,
            nonce: nonce, timestamp: timestamp)
        let appleV1 = try #require(apple["v1Signature"] as? String)
        let appleDER = try #require(Data(base64Encoded: appleV1))
        #expect(try key.publicKey.verify(derSignature: Array(appleDER), message: payload.bytes))
        #expect(
            try key.publicKey.verify(
                derSignature: Array(Data(base64Encoded: ours.signature) ?? Data()),
                message: payload.bytes))

        // JWS: same header, same claim names and values except nonce and iat; Apple's token verifies with our code.
        let applePromo = try #require(apple["promotional"] as? String)
        let appleIntro = try #require(apple["intro"] as? String)
        let ourPromo = try signer.promotionalOfferJWS(
            productId: "com.example.monthly", offerId: "PROMO_50",
            transactionId: "20000001")
        let ourIntro = try signer.introductoryOfferEligibilityJWS(
            productId: "com.example.yearly",
            allowIntroductoryOffer: false,
            transactionId: "appTx-42")
        for (theirs, mine) in [(applePromo, ourPromo), (appleIntro, ourIntro)] {
            #expect(try key.publicKey.verifyJWS(compact: theirs))
            let a = try CompactJWS(compact: theirs)
            let b = try CompactJWS(compact: mine)
            #expect(try flatJSON(a.header) == flatJSON(b.header))
            var claimsA = try flatJSON(a.payload)
            var claimsB = try flatJSON(b.payload)
            #expect(Set(claimsA.keys) == Set(claimsB.keys))
            // Both nonces are fresh lowercase UUIDs; both iat are integer seconds around now.
            for claims in [claimsA, claimsB] {
                guard case .string(let nonceText) = claims["nonce"], case .integer(let iat) = claims["iat"] else {
                    Issue.record("nonce must be a string and iat an integer: \(claims)")
                    continue
                }
                #expect(nonceText == nonceText.lowercased() && UUID(uuidString: nonceText) != nil)
                #expect(iat >= Int64(started - 5) && iat <= Int64(finished + 5))
            }
            for name in ["nonce", "iat"] {
                claimsA[name] = nil
                claimsB[name] = nil
            }
            #expect(claimsA == claimsB)
            #expect(claimsA["aud"] != nil && claimsA["exp"] == nil)
        }
        #expect(try flatJSON(CompactJWS(compact: ourIntro).payload)["allowIntroductoryOffer"] == .bool(false))
    }

    private func expectClaims(
        _ value: Any?, _ expected: [String: JSONScalar],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let text = try #require(value as? String, "PyJWT did not decode the claims", sourceLocation: sourceLocation)
        #expect(try flatJSON(text) == expected, sourceLocation: sourceLocation)
    }
}
