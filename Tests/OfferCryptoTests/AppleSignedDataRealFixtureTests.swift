import Foundation
import Testing

@testable import OfferCrypto

/// Real data signed by Apple's servers (notifications, transactions, renewal infos copied from public projects, with
/// an independent manifest), and near misses made from it. Nothing here was signed by us.
@Suite("Apple signed data: real Apple-signed fixtures")
struct AppleSignedDataRealFixtureTests {
    /// The tenant each real file was made for, from the manifest.
    static func expectation(for entry: RealAppleFixture) -> AppleSignedDataExpectation {
        AppleSignedDataExpectation(
            bundleId: entry.bundleId ?? "com.example.unused", appAppleId: entry.appAppleId,
            allowSandbox: entry.environment == "Sandbox")
    }

    /// A fixed "now" for the cache clock, after every leaf in the corpus expired except the newest generation's.
    static let clock: @Sendable () -> Date = { Date(timeIntervalSince1970: 1_764_547_200) }

    @Test("The built-in Apple Root CA - G3 has the published SHA-256 and equals the copied .cer")
    func builtInRoot() throws {
        let builtIn = AppleRootCertificates.appleRootCAG3
        #expect(SHA256.hex(builtIn).uppercased() == "63343ABFB89A6A03EBB57E9B3F5FA7BE7C4F5C756F3017B3A8C488C3653E9179")
        #expect(AppleRootCertificates.appleRootCAG3SHA256 == SHA256.hex(builtIn).uppercased())
        let url = try #require(
            Bundle.module.url(
                forResource: "AppleRootCA-G3", withExtension: "cer", subdirectory: "Fixtures/AppleSignedData"))
        #expect(Array(try Data(contentsOf: url)) == builtIn)
        let verifier = try AppleSignedDataVerifier()
        #expect(verifier.pinnedRootSHA256 == [AppleRootCertificates.appleRootCAG3SHA256])
    }

    @Test("Every positive file verifies for a tenant with its bundle id, environment and app Apple id")
    func positivesVerify() throws {
        let verifier = try AppleSignedDataVerifier(clock: Self.clock)
        let positives = try RealAppleFixture.manifest().filter { $0.expected == "verify" }
        #expect(positives.count == 22)
        for entry in positives {
            let verified = try verifier.verify(entry.jws, as: entry.dataKind, expecting: Self.expectation(for: entry))
            #expect(verified.environment.rawValue == entry.environment, "\(entry.file)")
            #expect(verified.signedDateMilliseconds == entry.signedDate, "\(entry.file)")
            #expect(verified.authenticity == .verifiedChain, "\(entry.file)")
            if entry.dataKind != .renewalInfo { #expect(verified.bundleId == entry.bundleId, "\(entry.file)") }
        }
        // 05 to 15 share one leaf, 07/16-20/24 another: most chains came from the cache.
        let stats = verifier.cacheStatistics
        #expect(stats.hits + stats.misses == positives.count)
        #expect(stats.misses <= 6 && stats.hits >= 16, "\(stats)")
    }

    @Test("verifyNotification: every notification with its nested transaction and renewal info, all verified")
    func nestedVerify() throws {
        let verifier = try AppleSignedDataVerifier(clock: Self.clock)
        var nested = 0
        for entry in try RealAppleFixture.manifest() where entry.expected == "verify" && entry.kind == "notification" {
            let verified = try verifier.verifyNotification(entry.jws, expecting: Self.expectation(for: entry))
            let data = try #require(verified.notification.jsonObject()["data"] as? [String: Any])
            #expect((data["signedTransactionInfo"] != nil) == (verified.transaction != nil), "\(entry.file)")
            #expect((data["signedRenewalInfo"] != nil) == (verified.renewalInfo != nil), "\(entry.file)")
            for inner in [verified.transaction, verified.renewalInfo].compactMap({ $0 }) {
                #expect(inner.environment == verified.notification.environment, "\(entry.file)")
                #expect(inner.authenticity == .verifiedChain, "\(entry.file)")
                nested += 1
            }
            if let transaction = verified.transaction {
                #expect(transaction.kind == .transaction && transaction.bundleId == entry.bundleId, "\(entry.file)")
            }
        }
        #expect(nested == 22)
    }

    @Test("NEG_* and EDGE_* files are rejected, each with its reason")
    func negativesRejected() throws {
        let verifier = try AppleSignedDataVerifier(clock: Self.clock)
        let manifest = try RealAppleFixture.manifest()
        let reasons: [String: AppleSignedDataError.Reason] = [
            // One payload byte changed: the signature no longer covers it.
            "NEG_01_notification_payload_byte.jws": .invalidSignature,
            // Eight base64url characters cut off: not canonical base64url any more (Apple's library: DecodeError).
            "NEG_02_notification_sig_truncated.jws": .malformedJWS,
            // x5c as [intermediate, leaf, root]: the "leaf" lacks the receipt OID / the chain does not build.
            "NEG_03_notification_x5c_reordered.jws": .invalidCertificateChain,
            // Validly signed by Apple, but the payload is JSON null (Apple's library: "must be a json object").
            "EDGE_01_renewal_null_payload.jws": .malformedJWS,
        ]
        let negatives = manifest.filter { $0.expected == "reject" }
        #expect(Set(negatives.map(\.file)) == Set(reasons.keys))
        for entry in negatives {
            // A near miss is judged for the tenant its original was made for.
            let original = manifest.first { $0.file == entry.derivedFrom } ?? entry
            var expectation = Self.expectation(for: original)
            expectation.allowSandbox = true
            let jws = try entry.jws
            let outcome = Outcome { () throws(AppleSignedDataError) in
                try verifier.verify(jws, as: entry.dataKind, expecting: expectation)
            }
            #expect(outcome == .rejected(try #require(reasons[entry.file])), "\(entry.file): \(outcome)")
        }
    }

    @Test("Real data for another tenant: wrong bundle id, wrong or missing app Apple id, Sandbox not allowed")
    func realDataWrongTenant() throws {
        let verifier = try AppleSignedDataVerifier(clock: Self.clock)
        for entry in try RealAppleFixture.manifest() where entry.expected == "verify" {
            let right = Self.expectation(for: entry)
            func outcome(_ expectation: AppleSignedDataExpectation) throws -> Outcome {
                let jws = try entry.jws
                return Outcome { () throws(AppleSignedDataError) in
                    try verifier.verify(jws, as: entry.dataKind, expecting: expectation)
                }
            }
            if entry.dataKind != .renewalInfo {
                var other = right
                other.bundleId += ".other"
                #expect(try outcome(other) == .rejected(.wrongBundleId), "\(entry.file)")
            }
            if entry.environment == "Sandbox" {
                var productionOnly = right
                productionOnly.allowSandbox = false
                #expect(try outcome(productionOnly) == .rejected(.environmentNotAllowed), "\(entry.file)")
            } else if entry.dataKind == .notification {
                var none = right
                none.appAppleId = nil
                #expect(try outcome(none) == .rejected(.wrongAppAppleId), "\(entry.file)")
                var other = right
                other.appAppleId = (right.appAppleId ?? 0) + 1
                #expect(try outcome(other) == .rejected(.wrongAppAppleId), "\(entry.file)")
            }
        }
    }

    @Test("A verifier needs a root; a notification verified as a transaction is refused (wrong claims)")
    func noRootAndWrongKind() throws {
        #expect(throws: CryptoError.self) { try AppleSignedDataVerifier(trustAppleRootCAG3: false) }
        // Apple's root passed again as an extra root is pinned once.
        let verifier = try AppleSignedDataVerifier(
            additionalRoots: [AppleRootCertificates.appleRootCAG3], clock: Self.clock)
        #expect(verifier.pinnedRootSHA256.count == 1)
        let entry = try #require(try RealAppleFixture.manifest().first { $0.file == "05_notification.jws" })
        #expect(throws: Never.self) {
            try verifier.verify(entry.jws, as: .notification, expecting: Self.expectation(for: entry))
        }
        // As a transaction it has no top-level bundleId.
        let jws = try entry.jws
        let asTransaction = Outcome { () throws(AppleSignedDataError) in
            try verifier.verify(jws, as: .transaction, expecting: Self.expectation(for: entry))
        }
        #expect(asTransaction == .rejected(.wrongBundleId))
    }

    @Test("Real data is refused once Apple's root is replaced by another pinned root")
    func realDataWithOtherRoot() async throws {
        let testCA = try await TestCertificateAuthority.shared()
        let verifier = try AppleSignedDataVerifier(
            additionalRoots: [testCA.root], trustAppleRootCAG3: false, clock: Self.clock)
        for entry in try RealAppleFixture.manifest() where entry.expected == "verify" {
            let jws = try entry.jws
            let outcome = Outcome { () throws(AppleSignedDataError) in
                try verifier.verify(jws, as: entry.dataKind, expecting: Self.expectation(for: entry))
            }
            #expect(outcome == .rejected(.invalidCertificateChain), "\(entry.file)")
        }
    }

    @Test("--apple-root-cert files: DER, PEM, several PEM blocks; junk is refused")
    func rootCertificateFiles() throws {
        let der = AppleRootCertificates.appleRootCAG3
        #expect(try AppleRootCertificateFile.certificates(fromFileContents: der) == [der])
        let body = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        let pem = "-----BEGIN CERTIFICATE-----\n\(body)\n-----END CERTIFICATE-----\n"
        #expect(try AppleRootCertificateFile.certificates(fromFileContents: Array(pem.utf8)) == [der])
        let two = "\n" + pem + "\r\n" + pem
        #expect(try AppleRootCertificateFile.certificates(fromFileContents: Array(two.utf8)) == [der, der])
        for junk in [[], Array("hello".utf8), Array(der.dropLast()), der + [0], Array("-----BEGIN JUNK-----\n".utf8)] {
            #expect(throws: CryptoError.self) { try AppleRootCertificateFile.certificates(fromFileContents: junk) }
        }
        let truncatedPEM = String(pem.prefix(200))
        #expect(throws: CryptoError.self) {
            try AppleRootCertificateFile.certificates(fromFileContents: Array(truncatedPEM.utf8))
        }
        // A file's roots feed the verifier; garbage as a root is refused at construction.
        #expect(throws: CryptoError.self) { try AppleSignedDataVerifier(additionalRoots: [[0x30, 0x00]]) }
    }
}
