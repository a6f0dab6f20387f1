import Foundation
import Testing

@testable import OfferCrypto

/// A test certificate authority shaped like Apple's signs transactions, renewal infos, notifications and Retention
/// Messaging requests; Apple's own `SignedDataVerifier` (PyPI app-store-server-library, online checks off) is the
/// referee: OfferGate accepts exactly when Apple's library accepts, except where this table says OfferGate is
/// deliberately stricter (and says why).
@Suite("Apple signed data: test CA, refereed by Apple's library")
struct AppleSignedDataRefereeTests {
    enum Expected: Equatable {
        /// Both accept.
        case accept(AppleSignedDataAuthenticity)
        /// Both reject; OfferGate with this reason.
        case reject(AppleSignedDataError.Reason)
        /// Apple's library accepts; OfferGate rejects on purpose (reason given in the table).
        case stricterThanApple(AppleSignedDataError.Reason)
        /// Apple's Python library rejects; OfferGate accepts on purpose (reason given in the table).
        case looserThanApple(AppleSignedDataAuthenticity)
    }

    /// Every case the script makes, with what must happen. A case missing on either side fails the test.
    static let expected: [String: Expected] = [
        "good_transaction_production": .accept(.verifiedChain),
        "good_transaction_sandbox": .accept(.verifiedChain),
        // Apple's library insists on an app Apple id for any Production verifier but compares it only for
        // notifications and realtime requests; OfferGate needs none for a Production transaction (API.md §8).
        "good_transaction_production_no_app_apple_id": .accept(.verifiedChain),
        "good_renewal_production": .accept(.verifiedChain),
        "good_renewal_sandbox": .accept(.verifiedChain),
        "good_notification_production": .accept(.verifiedChain),
        "good_notification_sandbox": .accept(.verifiedChain),
        "good_notification_summary": .accept(.verifiedChain),
        "good_realtime_production": .accept(.verifiedChain),

        "wrong_root": .reject(.invalidCertificateChain),
        "leaf_missing_oid": .reject(.invalidCertificateChain),
        "intermediate_missing_oid": .reject(.invalidCertificateChain),
        "expired_at_signed_date_valid_now": .reject(.invalidCertificateChain),
        "not_yet_valid_at_signed_date": .reject(.invalidCertificateChain),
        "valid_at_signed_date_expired_now": .accept(.verifiedChain),
        "two_certificates": .reject(.invalidCertificateChain),
        "four_certificates": .reject(.invalidCertificateChain),
        "x5c_reordered": .reject(.invalidCertificateChain),
        "leaf_issued_by_root": .reject(.invalidCertificateChain),
        // Apple's library never reads x5c[2] (it verifies leaf + intermediate against its own roots). API.md §8
        // says x5c is leaf, intermediate, root with the root equal to a pinned one: we hold data to that.
        "x5c_last_is_not_the_root": .stricterThanApple(.invalidCertificateChain),
        "x5c_entry_not_base64": .stricterThanApple(.invalidCertificateChain),
        // Apple's library loads certificates with d2i semantics that ignore bytes after the DER; x5c holds DER.
        "leaf_der_with_trailing_bytes": .stricterThanApple(.invalidCertificateChain),

        "tampered_payload": .reject(.invalidSignature),
        "tampered_signature": .reject(.invalidSignature),
        "der_signature": .reject(.invalidSignature),
        // PyJWT decodes base64url leniently ("==" appended still yields the same signature): the compact form is
        // unpadded (RFC 7515), and one token has one spelling here.
        "signature_segment_padded": .stricterThanApple(.malformedJWS),
        "alg_none": .reject(.unsupportedAlgorithm),
        "alg_hs256": .reject(.unsupportedAlgorithm),
        "alg_rs256": .reject(.unsupportedAlgorithm),

        "wrong_bundle_id": .reject(.wrongBundleId),
        "wrong_environment": .reject(.environmentNotAllowed),
        "renewal_wrong_environment": .reject(.environmentNotAllowed),
        "unknown_environment": .reject(.environmentNotAllowed),
        "notification_production_without_app_apple_id": .reject(.wrongAppAppleId),
        "notification_wrong_app_apple_id": .reject(.wrongAppAppleId),
        "notification_wrong_bundle_id": .reject(.wrongBundleId),
        "realtime_wrong_app_apple_id": .reject(.wrongAppAppleId),
        "good_notification_external_purchase_token_sandbox": .accept(.verifiedChain),
        "notification_external_purchase_token_sandbox_not_allowed": .reject(.environmentNotAllowed),
        "good_notification_external_purchase_token_production": .accept(.verifiedChain),
        "good_notification_app_data": .accept(.verifiedChain),
        "payload_not_an_object": .reject(.malformedJWS),
        // Without signedDate Apple's library validates the chain at the wall clock's time (a nondeterministic
        // verdict for the same bytes); we require the claim every Apple payload carries.
        "payload_without_signed_date": .stricterThanApple(.malformedJWS),
        // Apple's library passes signedDate through Python's int(), which also takes the string "1748736000000".
        "signed_date_as_string": .stricterThanApple(.malformedJWS),
        // PyJWT, which Apple's Python library decodes with, enforces RFC 7519 exp/nbf/aud when present, against the
        // wall clock. Apple's payloads carry none of them and Apple's other libraries do not check them; OfferGate
        // follows the payload contract (validity at signedDate), so its verdict never depends on when it runs.
        "payload_with_past_exp": .looserThanApple(.verifiedChain),
        "payload_with_aud": .looserThanApple(.verifiedChain),

        "xcode_transaction_allowed": .accept(.unverifiedDevelopmentData),
        "xcode_transaction_not_allowed": .reject(.environmentNotAllowed),
        "local_testing_renewal_allowed": .accept(.unverifiedDevelopmentData),
        "local_testing_renewal_not_allowed": .reject(.environmentNotAllowed),
    ]

    @Test("Every case: OfferGate's verdict is the table's, and Apple's library agrees (documented exceptions aside)")
    func refereedCases() async throws {
        let ca = try await TestCertificateAuthority.shared()
        #expect(Set(ca.cases.map(\.name)) == Set(Self.expected.keys))
        let verifier = try ca.verifier()
        for item in ca.cases {
            let expected = try #require(Self.expected[item.name], "no expectation for \(item.name)")
            let kind = try item.dataKind
            let ours = Outcome { () throws(AppleSignedDataError) in
                try verifier.verify(item.jws, as: kind, expecting: item.expectation.value)
            }
            switch expected {
            case .accept(let authenticity):
                #expect(ours == .accepted(authenticity), "\(item.name): OfferGate \(ours)")
                #expect(item.apple.accepted, "\(item.name): Apple's library refused: \(item.apple.results)")
            case .reject(let reason):
                #expect(ours == .rejected(reason), "\(item.name): OfferGate \(ours)")
                #expect(!item.apple.accepted, "\(item.name): Apple's library accepted: \(item.apple.results)")
            case .stricterThanApple(let reason):
                #expect(ours == .rejected(reason), "\(item.name): OfferGate \(ours)")
                #expect(item.apple.accepted, "\(item.name): Apple's library now refuses too: \(item.apple.results)")
            case .looserThanApple(let authenticity):
                #expect(ours == .accepted(authenticity), "\(item.name): OfferGate \(ours)")
                #expect(!item.apple.accepted, "\(item.name): Apple's library now accepts too: \(item.apple.results)")
            }
        }
    }

    @Test("Accepted data comes back as signed: exact payload bytes, environment, signedDate, bundle and app ids")
    func acceptedPayloads() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let verifier = try ca.verifier()
        let byName = Dictionary(uniqueKeysWithValues: ca.cases.map { ($0.name, $0) })
        let cases: [(String, AppleEnvironment, String?, Int64?)] = [
            ("good_transaction_production", .production, "com.example.offergate", nil),
            ("good_transaction_sandbox", .sandbox, "com.example.offergate", nil),
            ("good_renewal_sandbox", .sandbox, nil, nil),
            ("good_notification_production", .production, "com.example.offergate", 1_234_567_890),
            ("good_realtime_production", .production, nil, 1_234_567_890),
            ("xcode_transaction_allowed", .xcode, "com.example.offergate", nil),
        ]
        for (name, environment, bundleId, appAppleId) in cases {
            let item = try #require(byName[name])
            let verified = try verifier.verify(item.jws, as: item.dataKind, expecting: item.expectation.value)
            let segment = try #require(item.jws.split(separator: ".").dropFirst().first)
            #expect(verified.payload == Base64URL.decode(segment), "\(name)")
            #expect(verified.environment == environment, "\(name)")
            #expect(verified.signedDateMilliseconds == 1_748_736_000_000, "\(name)")
            #expect(verified.signedDate == Date(timeIntervalSince1970: 1_748_736_000), "\(name)")
            #expect(verified.bundleId == bundleId, "\(name)")
            #expect(verified.appAppleId == appAppleId, "\(name)")
            #expect(try verified.jsonObject()["signedDate"] as? Int == 1_748_736_000_000, "\(name)")
        }
    }

    @Test("The test CA's data is refused by a verifier that does not pin the test root")
    func testRootMustBePinned() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let appleOnly = try AppleSignedDataVerifier()
        let strangerOnly = try AppleSignedDataVerifier(additionalRoots: [ca.strangerRoot], trustAppleRootCAG3: false)
        let item = try #require(ca.cases.first { $0.name == "good_transaction_production" })
        for verifier in [appleOnly, strangerOnly] {
            #expect(
                Outcome { () throws(AppleSignedDataError) in
                    try verifier.verify(item.jws, as: .transaction, expecting: item.expectation.value)
                } == .rejected(.invalidCertificateChain))
        }
    }

    @Test("Production Xcode-signed data is refused: a StoreKit test certificate is no Apple chain")
    func xcodeChainClaimingProduction() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let verifier = try ca.verifier()
        let item = try #require(ca.cases.first { $0.name == "xcode_transaction_allowed" })
        // The same header and signing key, with the payload saying Production: now the chain is checked (and fails).
        let header = try #require(item.jws.split(separator: ".").first)
        let payload = try #require(Base64URL.decode(item.jws.split(separator: ".")[1]))
        let production = String(decoding: payload, as: UTF8.self).replacingOccurrences(
            of: "\"environment\":\"Xcode\"", with: "\"environment\":\"Production\"")
        let forged = header + "." + Base64URL.encode(Array(production.utf8)) + "." + item.jws.split(separator: ".")[2]
        #expect(
            Outcome { () throws(AppleSignedDataError) in
                try verifier.verify(forged, as: .transaction, expecting: item.expectation.value)
            } == .rejected(.invalidCertificateChain))
    }
}
