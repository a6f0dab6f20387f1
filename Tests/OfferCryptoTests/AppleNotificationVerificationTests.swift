import Foundation
import Testing

@testable import OfferCrypto

/// `verifyNotification` over test CA data: the nested JWS are held to every rule the outer one is.
@Suite("Apple signed data: notifications with nested JWS")
struct AppleNotificationVerificationTests {
    static let expectation = AppleSignedDataExpectation(
        bundleId: "com.example.offergate", appAppleId: 1_234_567_890, allowSandbox: true)

    static func transaction(environment: String = "Production", bundleId: String = "com.example.offergate") -> String {
        """
        {"bundleId":"\(bundleId)","environment":"\(environment)","signedDate":1748736000000,\
        "transactionId":"2000000000000001","originalTransactionId":"2000000000000001"}
        """
    }

    static func notification(_ nested: [String: String], environment: String = "Production") -> String {
        let fields = nested.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",")
        return """
            {"notificationType":"DID_RENEW","notificationUUID":"3f2e1d0c-0000-4000-8000-000000000004",\
            "version":"2.0","signedDate":1748736000000,"data":{"bundleId":"com.example.offergate",\
            "appAppleId":1234567890,"environment":"\(environment)"\(fields.isEmpty ? "" : ",")\(fields)}}
            """
    }

    func outcome(_ ca: TestCertificateAuthority, _ verifier: AppleSignedDataVerifier, _ json: String) throws -> Outcome
    {
        let jws = try ca.sign(payload: Array(json.utf8))
        return Outcome { () throws(AppleSignedDataError) in
            try verifier.verifyNotification(jws, expecting: Self.expectation).notification
        }
    }

    @Test("Nested transaction and renewal info come back verified; their bytes are what was signed")
    func nestedAccepted() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let verifier = try ca.verifier()
        let transaction = try ca.sign(payload: Array(Self.transaction().utf8))
        let renewal = try ca.sign(
            payload: Array(#"{"environment":"Production","signedDate":1748736000000,"autoRenewStatus":0}"#.utf8))
        let jws = try ca.sign(
            payload: Array(
                Self.notification([
                    "signedTransactionInfo": "\"\(transaction)\"", "signedRenewalInfo": "\"\(renewal)\"",
                ]).utf8))
        let verified = try verifier.verifyNotification(jws, expecting: Self.expectation)
        #expect(verified.transaction?.payload == Array(Self.transaction().utf8))
        #expect(verified.renewalInfo?.kind == .renewalInfo)
        #expect(try verified.renewalInfo?.jsonObject()["autoRenewStatus"] as? Int == 0)
        let bare = try verifier.verifyNotification(
            try ca.sign(payload: Array(Self.notification([:]).utf8)), expecting: Self.expectation)
        #expect(bare.transaction == nil && bare.renewalInfo == nil)
    }

    @Test("A bad nested JWS fails the whole notification with its own reason")
    func nestedRejected() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let verifier = try ca.verifier()
        let good = try ca.sign(payload: Array(Self.transaction().utf8))
        let parts = good.split(separator: ".")
        let tampered = "\(parts[0]).\(Base64URL.encode(Array(Self.transaction(bundleId: "x").utf8))).\(parts[2])"
        let cases: [(String, AppleSignedDataError.Reason)] = [
            ("\"\(tampered)\"", .invalidSignature),
            (
                "\"\(try ca.sign(payload: Array(Self.transaction(bundleId: "com.example.other").utf8)))\"",
                .wrongBundleId
            ),
            (
                "\"\(try ca.sign(payload: Array(Self.transaction(environment: "Sandbox").utf8)))\"",
                .environmentNotAllowed
            ),
            ("\"not a jws\"", .malformedJWS),
            ("42", .malformedJWS),
        ]
        for (value, reason) in cases {
            let outcome = try outcome(ca, verifier, Self.notification(["signedTransactionInfo": value]))
            #expect(outcome == .rejected(reason), "\(value.prefix(40)): \(outcome)")
        }
    }
}
