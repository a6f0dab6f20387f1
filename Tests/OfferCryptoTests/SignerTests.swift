import Foundation
import Testing

@testable import OfferCrypto

@Suite("Offer signer")
struct SignerTests {
    let nonce = UUID(uuidString: "B2B0F5C6-1E0D-4A4B-9C2A-3F1E5D7C9A11")!

    @Test("V1: injected nonce and clock, lowercase nonce, ms timestamp, base64 DER that verifies over the payload")
    func v1() throws {
        let signer = try makeSigner()
        let signature = try signer.signV1(
            productId: "com.example.monthly", offerId: "WINBACK50",
            appAccountToken: "4A1B7C2D-0000-4000-8000-00000000ABCD")
        #expect(signature.nonce == nonce)
        #expect(signature.nonceString == "b2b0f5c6-1e0d-4a4b-9c2a-3f1e5d7c9a11")
        #expect(signature.timestamp == 1_700_000_000_123)
        #expect(signature.keyId == "ABC123DEFG")
        let der = try #require(Data(base64Encoded: signature.signature))
        #expect(der.first == 0x30)
        #expect((68...72).contains(der.count))
        let payload = signer.v1Payload(
            productId: "com.example.monthly", offerId: "WINBACK50",
            appAccountToken: "4a1b7c2d-0000-4000-8000-00000000abcd", nonce: nonce,
            timestamp: 1_700_000_000_123)
        let expected =
            "com.example.offers\u{2063}ABC123DEFG\u{2063}com.example.monthly\u{2063}WINBACK50\u{2063}"
            + "4a1b7c2d-0000-4000-8000-00000000abcd\u{2063}b2b0f5c6-1e0d-4a4b-9c2a-3f1e5d7c9a11\u{2063}1700000000123"
        #expect(payload.bytes == Array(expected.utf8))
        #expect(try signer.key.publicKey.verify(derSignature: Array(der), message: payload.bytes))
        // Not valid for another timestamp.
        var other = payload
        other.timestamp += 1
        #expect(try !signer.key.publicKey.verify(derSignature: Array(der), message: other.bytes))
    }

    @Test("V1: explicit nonce and timestamp override the injected ones; default is a fresh nonce per call")
    func v1Explicit() throws {
        let key = try SigningKey.generate()
        let signer = OfferSigner(key: key, keyId: "K", issuerId: "I", bundleId: "B")
        let first = try signer.signV1(productId: "p", offerId: "o")
        let second = try signer.signV1(productId: "p", offerId: "o")
        #expect(first.nonce != second.nonce)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(abs(first.timestamp - now) < 60_000)
        let fixed = try signer.signV1(productId: "p", offerId: "o", appAccountToken: "", nonce: nonce, timestamp: 42)
        #expect(fixed.nonce == nonce && fixed.timestamp == 42)
        let payload = signer.v1Payload(productId: "p", offerId: "o", appAccountToken: "", nonce: nonce, timestamp: 42)
        #expect(Hex.encode(payload.bytes).contains("e281a3e281a3"))  // empty token: separators touch
        #expect(
            try key.publicKey.verify(
                derSignature: Array(Data(base64Encoded: fixed.signature) ?? Data()),
                message: payload.bytes))
    }

    @Test("Promotional JWS: exact header, claims in order, transactionId omitted when absent, verifies")
    func promotionalJWS() throws {
        let signer = try makeSigner()
        for transactionId in [String?.none, "2000000123456789"] {
            let token = try signer.promotionalOfferJWS(
                productId: "com.example.monthly", offerId: "PROMO1",
                transactionId: transactionId)
            #expect(try signer.key.publicKey.verifyJWS(compact: token))
            let jws = try CompactJWS(compact: token)
            #expect(String(decoding: jws.header, as: UTF8.self) == #"{"alg":"ES256","kid":"ABC123DEFG","typ":"JWT"}"#)
            var expected =
                #"{"iss":"57246542-96fe-1a63-e053-0824d011072a","iat":1700000000,"#
                + #""bid":"com.example.offers","nonce":"b2b0f5c6-1e0d-4a4b-9c2a-3f1e5d7c9a11","#
                + #""aud":"promotional-offer","productId":"com.example.monthly","offerIdentifier":"PROMO1""#
            if let transactionId { expected += #","transactionId":"\#(transactionId)""# }
            expected += "}"
            #expect(String(decoding: jws.payload, as: UTF8.self) == expected)
            let claims = try jsonObject(jws.payload)
            #expect(claims["exp"] == nil)
            #expect(claims["iat"] as? Int == 1_700_000_000)
            #expect((claims["transactionId"] as? String) == transactionId)
            #expect(!token.contains("=") && !token.contains("+") && !token.contains("/"))
        }
    }

    @Test("Intro eligibility JWS: allowIntroductoryOffer is a JSON boolean, transactionId required, verifies")
    func introJWS() throws {
        let signer = try makeSigner()
        for allow in [true, false] {
            let token = try signer.introductoryOfferEligibilityJWS(
                productId: "com.example.yearly",
                allowIntroductoryOffer: allow,
                transactionId: "appTx-1")
            #expect(try signer.key.publicKey.verifyJWS(compact: token))
            let jws = try CompactJWS(compact: token)
            let expected =
                #"{"iss":"57246542-96fe-1a63-e053-0824d011072a","iat":1700000000,"#
                + #""bid":"com.example.offers","nonce":"b2b0f5c6-1e0d-4a4b-9c2a-3f1e5d7c9a11","#
                + #""aud":"introductory-offer-eligibility","productId":"com.example.yearly","#
                + #""allowIntroductoryOffer":\#(allow),"transactionId":"appTx-1"}"#
            #expect(String(decoding: jws.payload, as: UTF8.self) == expected)
            // Tampering with the claims breaks the signature.
            let parts = token.split(separator: ".").map(String.init)
            let forgedClaims = Base64URL.encode(
                Array(expected.replacingOccurrences(of: "\(allow)", with: "\(!allow)").utf8))
            #expect(try !signer.key.publicKey.verifyJWS(compact: "\(parts[0]).\(forgedClaims).\(parts[2])"))
        }
    }

    @Test("JSON escaping: quotes, backslash, control characters and non-ASCII round-trip through a JSON parser")
    func escaping() throws {
        let awkward = "a\"b\\c/d\n\r\t\u{08}\u{0C}\u{01}\u{1F}é漢字🎟️\u{2028}"
        let signer = try OfferSigner(
            key: SigningKey.generate(), keyId: "k\"id", issuerId: awkward,
            bundleId: "bundle\\id")
        let token = try signer.promotionalOfferJWS(productId: awkward, offerId: "o", transactionId: "t\u{7F}")
        #expect(try signer.key.publicKey.verifyJWS(compact: token))
        let jws = try CompactJWS(compact: token)
        let header = try jsonObject(jws.header)
        #expect(header["kid"] as? String == "k\"id")
        let claims = try jsonObject(jws.payload)
        #expect(claims["iss"] as? String == awkward)
        #expect(claims["productId"] as? String == awkward)
        #expect(claims["bid"] as? String == "bundle\\id")
        #expect(claims["transactionId"] as? String == "t\u{7F}")
        let text = String(decoding: jws.payload, as: UTF8.self)
        #expect(text.contains(#"a\"b\\c/d\n\r\t\b\f\u0001\u001f"#))
        #expect(text.contains("é漢字🎟️"))  // raw UTF-8, not \u escapes
    }

    @Test("Reserved or repeated extra claims are refused")
    func reservedClaims() throws {
        let signer = try makeSigner()
        for extra: [(String, JWSClaimValue)] in [
            [("aud", .string("x"))], [("iat", .integer(1))],
            [("a", .bool(true)), ("a", .bool(false))],
        ] {
            do {
                _ = try signer.signJWS(audience: .promotionalOffer, extraClaims: extra)
                Issue.record("accepted reserved/repeated claims")
            } catch {
                #expect(error.code == .invalidClaims)
            }
        }
        let custom = try signer.signJWS(
            audience: JWSAudience(rawValue: "custom-aud"),
            extraClaims: [("n", .integer(-5))])
        #expect(try jsonObject(CompactJWS(compact: custom).payload)["n"] as? Int == -5)
    }

    @Test("Concurrency: 8 tasks signing at once with one signer produce only valid signatures")
    func concurrentSigning() async throws {
        let signer = try OfferSigner(key: SigningKey.generate(), keyId: "K", issuerId: "I", bundleId: "B")
        let publicKey = signer.key.publicKey
        let results = try await withThrowingTaskGroup(of: [(V1Signature, String, String)].self) { group in
            for task in 0..<8 {
                group.addTask {
                    var out: [(V1Signature, String, String)] = []
                    for index in 0..<150 {
                        let product = "product-\(task)-\(index)"
                        let v1 = try signer.signV1(productId: product, offerId: "o", appAccountToken: "T")
                        let jws = try signer.promotionalOfferJWS(productId: product, offerId: "o")
                        out.append((v1, jws, product))
                    }
                    return out
                }
            }
            var all: [(V1Signature, String, String)] = []
            for try await chunk in group { all += chunk }
            return all
        }
        #expect(results.count == 1200)
        var valid = 0
        for (v1, jws, product) in results {
            let payload = signer.v1Payload(
                productId: product, offerId: "o", appAccountToken: "T", nonce: v1.nonce,
                timestamp: v1.timestamp)
            let der = Array(Data(base64Encoded: v1.signature) ?? Data())
            if try publicKey.verify(derSignature: der, message: payload.bytes),
                try publicKey.verifyJWS(compact: jws),
                try jsonObject(CompactJWS(compact: jws).payload)["productId"] as? String == product
            {
                valid += 1
            }
        }
        #expect(valid == 1200)
        #expect(Set(results.map { $0.0.nonce }).count == 1200)
    }

    @Test(
        "Verifying: 8 tasks at once with one key (pooled contexts), good, tampered, foreign, undecodable, each as alone"
    )
    func concurrentVerifying() async throws {
        let key = try SigningKey.generate()
        let other = try SigningKey.generate()
        let publicKey = key.publicKey
        let messages = (0..<40).map { Array("message \($0)".utf8) }
        let good = try messages.map { try key.signatureDER(for: $0) }
        let foreign = try messages.map { try other.signatureDER(for: $0) }
        // (signature, message, expected verdict); undecodable ones come between good ones, so a context reused after
        // a failure must still verify the next good signature.
        var cases: [([UInt8], [UInt8], Bool)] = []
        for (index, message) in messages.enumerated() {
            cases.append((good[index], message, true))
            cases.append((good[index], messages[(index + 1) % messages.count], false))
            cases.append((foreign[index], message, false))
            cases.append((Array(good[index].dropLast()), message, false))
            cases.append(([0x30, 0x02, 0x02, 0x00], message, false))
            cases.append(([], message, false))
            cases.append((good[index] + [0], message, false))
        }
        let all = cases
        let wrong = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<10 {
                        for (index, c) in all.enumerated() where (index + round + task) % 3 != 0 {
                            if try publicKey.verify(derSignature: c.0, message: c.1) != c.2 { wrong += 1 }
                        }
                    }
                    return wrong
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(wrong == 0)
        for c in all { #expect(try publicKey.verify(derSignature: c.0, message: c.1) == c.2) }
    }

    @Test("Raw r||s: signatures are always 64 bytes, including when r or s has leading zero bytes")
    func rawSignatures() throws {
        let key = try SigningKey.generate()
        var sawShortComponent = false
        var sawShortDirect = false
        for index in 0..<2000 {
            let message = Array("m\(index)".utf8)
            let der = try key.signatureDER(for: message)
            let raw = try ECDSASignatureEncoding.derToRaw(der)
            #expect(raw.count == 64)
            if raw[0] == 0 || raw[32] == 0 { sawShortComponent = true }
            #expect(try key.publicKey.verify(rawSignature: raw, message: message))
            #expect(try ECDSASignatureEncoding.rawToDER(raw) == der)
            // The signer's own path (pooled ECDSA_SIG reused across signatures).
            let direct = try key.signatureRaw(for: message)
            #expect(direct.count == 64)
            if direct[0] == 0 || direct[32] == 0 { sawShortDirect = true }
            #expect(try key.publicKey.verify(rawSignature: direct, message: message))
        }
        // A leading zero byte in r or s has P ≈ 2/256 per signature; over 2000, P(never) ≈ e^-15.
        #expect(sawShortComponent)
        #expect(sawShortDirect)
    }

    @Test("Nonces: secureRandom is a v4 UUID; the lowercase formatter equals Foundation's form lowercased")
    func nonces() async throws {
        var seen = Set<UUID>()
        for _ in 0..<1000 {
            let uuid = UUID.secureRandom()
            let text = uuid.lowercasedString
            #expect(text == uuid.uuidString.lowercased())
            #expect(Array(text.utf8)[14] == UInt8(ascii: "4"))
            #expect("89ab".utf8.contains(Array(text.utf8)[19]))
            seen.insert(uuid)
        }
        #expect(seen.count == 1000)
        let fixed = try #require(UUID(uuidString: "00FF10AB-CDEF-4000-8000-0123456789AB"))
        #expect(fixed.lowercasedString == "00ff10ab-cdef-4000-8000-0123456789ab")
        // Separate threads draw from separate buffers, never the same values.
        let perTask = try await withThrowingTaskGroup(of: [UUID].self) { group in
            for _ in 0..<4 { group.addTask { (0..<300).map { _ in UUID.secureRandom() } } }
            var all: [UUID] = []
            for try await chunk in group { all += chunk }
            return all
        }
        #expect(Set(perTask).count == 1200)
    }

    @Test("Nonces: timeOrdered is a v7 UUID carrying its millisecond first, random after it, and sorts by time")
    func timeOrderedNonces() {
        let at = Date(timeIntervalSince1970: 1_765_000_000.123_9)
        var seen = Set<UUID>()
        for _ in 0..<1000 {
            let uuid = UUID.timeOrdered(at: at)
            let text = uuid.lowercasedString
            #expect(text == uuid.uuidString.lowercased())
            // 1_765_000_000_123 ms = 0x019a_f232_b27b.
            #expect(text.hasPrefix("019af232-b27b-7"))
            #expect("89ab".utf8.contains(Array(text.utf8)[19]))
            seen.insert(uuid)
        }
        // 74 random bits: a thousand in one millisecond never repeat.
        #expect(seen.count == 1000)
        // Later milliseconds sort after earlier ones, byte by byte (as PostgreSQL orders uuid).
        let times = (0..<50).map { Date(timeIntervalSince1970: 1_765_000_000 + Double($0) * 0.001) }
        let bytes = times.map { date in withUnsafeBytes(of: UUID.timeOrdered(at: date).uuid) { Array($0) } }
        #expect(zip(bytes, bytes.dropFirst()).allSatisfy { $0.lexicographicallyPrecedes($1) })
        #expect(UUID.timeOrdered(at: Date(timeIntervalSince1970: 0)).lowercasedString.hasPrefix("00000000-0000-7"))
    }
}
