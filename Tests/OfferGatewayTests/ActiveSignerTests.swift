import Foundation
import JSONRPC
import OfferCrypto
import Testing

@testable import OfferGateway

/// `ActiveSigner` keeps the last `OfferSigner` it made (its JWS header and V1 prefix are built once), so it must
/// never sign for one app with another app's bundle id.
@Suite("Active signer")
struct ActiveSignerTests {
    @Test("each app's signatures carry its own bundle id, whichever app signed before")
    func signaturesNameTheirApp() throws {
        let key = try SigningKey.generate()
        let active = ActiveSigner(keyId: "K1", issuerId: "issuer-1", key: key)
        let nonce = UUID()
        for bundleId in ["com.acme.app", "com.acme.app", "com.other.app", "com.acme.app"] {
            let signer = active.offerSigner(bundleId: bundleId)
            // V1: the signed payload is `bundleId ⁣ keyId ⁣ productId ⁣ offerId ⁣ token ⁣ nonce ⁣ timestamp`.
            let v1 = try signer.signV1(
                productId: "monthly", offerId: "promo", nonce: nonce, timestamp: 1_700_000_000_000)
            let expected = PromotionalOfferV1Payload(
                bundleId: bundleId, keyId: "K1", productId: "monthly", offerId: "promo", appAccountToken: "",
                nonce: nonce, timestamp: 1_700_000_000_000)
            let der = try #require(Data(base64Encoded: v1.signature))
            #expect(try key.publicKey.verify(derSignature: Array(der), message: expected.bytes), "\(bundleId)")
            // JWS: the header names the key, the claims the app.
            let compact = try signer.promotionalOfferJWS(
                productId: "monthly", offerId: "promo", transactionId: nil, nonce: nonce, issuedAt: nil)
            #expect(try key.publicKey.verifyJWS(compact: compact))
            let jws = try CompactJWS(compact: compact)
            #expect(try JSONParsing.parse(jws.header)["kid"] == .string("K1"))
            #expect(try JSONParsing.parse(jws.payload)["bid"] == .string(bundleId))
        }
    }
}
