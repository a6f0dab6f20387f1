import Foundation
import Testing

@testable import OfferCrypto

@Suite("Apple known-answer vectors")
struct VectorTests {
    @Test("V1 payload bytes equal the vectors' payloadUtf8Hex")
    func v1PayloadBytes() throws {
        let vectors = try AppleVectors.load()
        try #require(vectors.v1.count == 2)
        for vector in vectors.v1 {
            let nonce = try #require(UUID(uuidString: vector.nonceInput))
            let payload = PromotionalOfferV1Payload(
                bundleId: vector.bundleId, keyId: vector.keyId, productId: vector.productId, offerId: vector.offerId,
                appAccountToken: vector.appAccountTokenInput, nonce: nonce, timestamp: vector.timestamp)
            #expect(Hex.encode(payload.bytes) == vector.payloadUtf8Hex)
            #expect(payload.bytes.count == vector.payloadByteLength)
        }
    }

    @Test("An uppercase nonce and mixed-case appAccountToken are lowercased in the payload")
    func v1Lowercasing() throws {
        let vectors = try AppleVectors.load()
        let vector = vectors.v1[0]
        let nonce = try #require(UUID(uuidString: vector.nonceInput.uppercased()))
        let payload = PromotionalOfferV1Payload(
            bundleId: vector.bundleId, keyId: vector.keyId, productId: vector.productId, offerId: vector.offerId,
            appAccountToken: "APPACCOUNTTOKEN", nonce: nonce, timestamp: vector.timestamp)
        #expect(Hex.encode(payload.bytes) == vector.payloadUtf8Hex)
    }

    @Test("The vectors' V1 DER signatures verify with the vector public key; a changed payload does not")
    func v1SignaturesVerify() throws {
        let vectors = try AppleVectors.load()
        let key = try PublicKey(pem: vectors.publicKeyPEM)
        for vector in vectors.v1 {
            let payload = try #require(Hex.decode(vector.payloadUtf8Hex))
            let der = try #require(Data(base64Encoded: vector.signatureBase64DER))
            #expect(try key.verify(derSignature: Array(der), message: payload))
            var tampered = payload
            tampered[0] ^= 0x01
            #expect(try !key.verify(derSignature: Array(der), message: tampered))
        }
    }

    @Test("The vectors' JWS verify; a token with a flipped signature bit does not")
    func jwsVectorsVerify() throws {
        let vectors = try AppleVectors.load()
        let key = try PublicKey(pem: vectors.publicKeyPEM)
        for vector in vectors.jws {
            #expect(try key.verifyJWS(compact: vector.compactJWS))
            let jws = try CompactJWS(compact: vector.compactJWS)
            var badSignature = jws.signature
            badSignature[10] ^= 0x80
            let parts = vector.compactJWS.split(separator: ".")
            let forged = "\(parts[0]).\(parts[1]).\(Base64URL.encode(badSignature))"
            #expect(try !key.verifyJWS(compact: forged))
        }
    }

    @Test("Our header and claims bytes for the vector inputs equal the vectors' signed bytes exactly")
    func jwsBytesMatchVectors() throws {
        let vectors = try AppleVectors.load()
        let signer = try OfferSigner(
            key: SigningKey.generate(), keyId: "keyId", issuerId: "issuerId",
            bundleId: "bundleId")
        let nonce = try #require(UUID(uuidString: "20fba8a0-2b80-4a7d-a17f-85c1854727f8"))
        for vector in vectors.jws {
            let jws = try CompactJWS(compact: vector.compactJWS)
            #expect(OfferSigner.headerJSON(keyId: "keyId") == jws.header)
            let extra: [(String, JWSClaimValue)]
            switch vector.aud {
            case "promotional-offer":
                extra = [
                    ("productId", .string("productId")), ("offerIdentifier", .string("offerIdentifier")),
                    ("transactionId", .string("transactionId")),
                ]
            case "introductory-offer-eligibility":
                extra = [
                    ("productId", .string("productId")), ("allowIntroductoryOffer", .bool(false)),
                    ("transactionId", .string("transactionId")),
                ]
            default:
                Issue.record("unexpected audience \(vector.aud)")
                continue
            }
            let claims = try signer.claimsJSON(
                audience: JWSAudience(rawValue: vector.aud), extraClaims: extra,
                nonce: nonce, issuedAt: 1_698_148_900)
            #expect(String(decoding: claims, as: UTF8.self) == String(decoding: jws.payload, as: UTF8.self))
        }
    }

    @Test("Malformed compact JWS are rejected with malformedJWS")
    func malformedJWS() throws {
        let vectors = try AppleVectors.load()
        let key = try PublicKey(pem: vectors.publicKeyPEM)
        let good = vectors.jws[0].compactJWS
        let parts = good.split(separator: ".").map(String.init)
        for bad in [
            "", "a.b", "\(parts[0]).\(parts[1])", "\(good).x", "\(parts[0]).\(parts[1]).\(parts[2])=",
            "\(parts[0]).\(parts[1]).\(Base64URL.encode([UInt8](repeating: 1, count: 63)))",
        ] {
            do {
                _ = try key.verifyJWS(compact: bad)
                Issue.record("accepted malformed JWS \(bad)")
            } catch {
                #expect(error.code == .malformedJWS)
            }
        }
    }
}
