import CCrypto
import Foundation
import Synchronization

/// Verifies what Apple signed (transactions, renewal infos, App Store Server Notifications V2, Retention Messaging
/// requests) the way Apple's `SignedDataVerifier` does with online checks off (APPLE_OFFERS.md §7), on OpenSSL's
/// X.509 path validation:
///
/// 1. compact JWS within `limits`; header and payload decode; both JSON objects; claims of the right types and an
///    integer `signedDate` (milliseconds);
/// 2. `alg` is `ES256`; `x5c` is exactly three standard-base64 DER certificates;
/// 3. `X509_verify_cert` (strict, as Apple's library sets it) builds exactly leaf ← `x5c[1]` ← a pinned root at the
///    payload's `signedDate` (so old data signed while its certificates were valid still verifies), and `x5c[2]` is
///    that root, byte for byte;
/// 4. the leaf carries OID 1.2.840.113635.100.6.11.1 and the intermediate 1.2.840.113635.100.6.2.1;
/// 5. the signature is 64 bytes `r‖s` and verifies with the leaf's P-256 key;
/// 6. bundle id, app Apple id and environment per kind against the `AppleSignedDataExpectation`.
///
/// `Xcode` and `LocalTesting` data are not signed by Apple (Apple's libraries skip verification for them): a tenant
/// that allows them gets them after step 1 and 6 only, marked `.unverifiedDevelopmentData`; for any other tenant they
/// are `environment_not_allowed` before any cryptography.
///
/// Verified (leaf, intermediate) pairs are cached (see `VerifiedChainCache` for why that is sound offline); on a hit
/// the certificates' validity at the new `signedDate` and the signature are still checked, and a hit whose
/// validity does not cover the new `signedDate` is verified again in full rather than rejected. The headers of JWS
/// that verified are remembered by their exact bytes (`VerifiedHeaders`), so the same header is not decoded again;
/// that skips parsing only, never a check.
///
/// Thread-safe: one verifier serves every task (the trust store is immutable; the cache sits behind a `Mutex` that
/// never covers an OpenSSL call). The clock is injected and only ages cache entries.
public final class AppleSignedDataVerifier: Sendable {
    /// The extension OID Apple puts on App Store receipt-signing leaf certificates.
    public static let leafOID = "1.2.840.113635.100.6.11.1"
    /// The extension OID of Apple's WWDR intermediate certificates.
    public static let intermediateOID = "1.2.840.113635.100.6.2.1"

    /// What a verified pair established: the three certificates and the leaf's key, parsed once.
    final class VerifiedChain: Sendable {
        let leaf: X509Certificate
        let intermediate: X509Certificate
        let root: X509Certificate
        let key: PublicKey

        init(leaf: X509Certificate, intermediate: X509Certificate, root: X509Certificate, key: PublicKey) {
            self.leaf = leaf
            self.intermediate = intermediate
            self.root = root
            self.key = key
        }

        func isValid(at time: time_t) -> Bool {
            leaf.isValid(at: time) && intermediate.isValid(at: time) && root.isValid(at: time)
        }
    }

    /// The bounds applied to input before parsing.
    public let limits: AppleSignedDataLimits
    /// SHA-256 (uppercase hex) of every pinned root's DER, Apple's first when built in.
    public let pinnedRootSHA256: [String]

    private let store: PinnedRootStore
    private let leafOID: ASN1ObjectIdentifier
    private let intermediateOID: ASN1ObjectIdentifier
    private let clock: @Sendable () -> Date
    private let cache: Mutex<VerifiedChainCache<VerifiedChain>>
    private let headers = Mutex(VerifiedHeaders(capacity: 8))
    private let statistics = Mutex(CacheStatistics())

    /// Cache counters, for tests and `system.stats`.
    public struct CacheStatistics: Sendable, Equatable {
        /// Verifications that found their (leaf, intermediate) pair verified already.
        public var hits = 0
        /// Verifications that ran `X509_verify_cert`.
        public var misses = 0
    }

    /// A verifier trusting Apple Root CA - G3 (unless `trustAppleRootCAG3` is false) and `additionalRoots`.
    ///
    /// - Parameters:
    ///   - additionalRoots: DER certificates to trust as roots besides Apple's (`--apple-root-cert FILE`, read with
    ///     `AppleRootCertificateFile.certificates(fromFileContents:)`; tests pass their own CA's root).
    ///   - trustAppleRootCAG3: pin the built-in Apple Root CA - G3. Only tests turn this off.
    ///   - chainCacheCapacity: most (leaf, intermediate) pairs kept verified (Apple: 32). 0 disables the cache.
    ///   - chainCacheLifetime: seconds a verified pair is reused (Apple: 15 minutes); 5 minutes by default.
    ///   - limits: input size bounds.
    ///   - clock: the time that ages cache entries (never the validation time: that is the payload's `signedDate`).
    /// - Throws: `CryptoError` (`keyParseFailed`) if a root does not parse, or none is left to trust.
    public init(
        additionalRoots: [[UInt8]] = [], trustAppleRootCAG3: Bool = true, chainCacheCapacity: Int = 32,
        chainCacheLifetime: TimeInterval = 300, limits: AppleSignedDataLimits = AppleSignedDataLimits(),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws(CryptoError) {
        var ders: [[UInt8]] = trustAppleRootCAG3 ? [AppleRootCertificates.appleRootCAG3] : []
        ders += additionalRoots
        var roots: [X509Certificate] = []
        for der in ders {
            guard let cert = X509Certificate.parse(der: der) else {
                throw CryptoError(.keyParseFailed, "a root certificate is not one DER X.509 certificate")
            }
            if !roots.contains(where: { $0.der == cert.der }) { roots.append(cert) }
        }
        guard !roots.isEmpty else { throw CryptoError(.keyParseFailed, "no root certificate to trust") }
        self.store = try PinnedRootStore(roots: roots)
        self.pinnedRootSHA256 = roots.map { SHA256.hex($0.der).uppercased() }
        self.leafOID = try ASN1ObjectIdentifier(Self.leafOID)
        self.intermediateOID = try ASN1ObjectIdentifier(Self.intermediateOID)
        self.limits = limits
        self.clock = clock
        self.cache = Mutex(VerifiedChainCache(capacity: chainCacheCapacity, lifetime: chainCacheLifetime))
    }

    /// Cache hits and misses so far.
    public var cacheStatistics: CacheStatistics { statistics.withLock { $0 } }

    /// Verifies `compactJWS` as `kind` for a tenant expecting `expectation`, and returns the payload.
    ///
    /// Throws `AppleSignedDataError` with the API reason of the first failed step; never traps on input.
    public func verify(
        _ compactJWS: String, as kind: AppleSignedDataKind, expecting expectation: AppleSignedDataExpectation
    ) throws(AppleSignedDataError) -> VerifiedAppleSignedData {
        let input = try AppleJWSInput(compactJWS, limits: limits) { segment in
            headers.withLock { $0.certificates(for: segment) }
        }
        let claims = try AppleSignedClaims(kind: kind, payload: input.payload)
        guard let signedDate = claims.signedDate, signedDate >= 0 else {
            throw AppleSignedDataError(.malformedJWS, "payload has no non-negative integer signedDate")
        }
        let environment = claims.environment.flatMap(AppleEnvironment.init(rawValue:))
        let authenticity: AppleSignedDataAuthenticity
        if let environment, !environment.isSignedByApple {
            // Apple's libraries skip chain and signature for these: nothing here could be verified.
            guard expectation.allows(environment) else {
                throw AppleSignedDataError(.environmentNotAllowed, "\(environment.rawValue) data is not allowed")
            }
            authenticity = .unverifiedDevelopmentData
        } else {
            try verifySignedByApple(input, signedDate: signedDate)
            authenticity = .verifiedChain
        }
        let accepted = try Self.check(claims, kind: kind, environment: environment, against: expectation)
        return VerifiedAppleSignedData(
            kind: kind, payload: input.payload, environment: accepted,
            signedDateMilliseconds: signedDate, bundleId: claims.bundleId, appAppleId: claims.appAppleId,
            authenticity: authenticity)
    }

    /// Verifies a notification's `signedPayload` and the JWS nested in its `data` (`signedTransactionInfo` as a
    /// transaction, `signedRenewalInfo` as renewal info), each with every step above, for the same tenant. The nested
    /// data must come from the notification's environment (`environment_not_allowed` otherwise); a nested field that is
    /// not a string is `malformed_jws`. Notifications without nested data (`TEST`, `summary`, ...) return `nil` for both.
    public func verifyNotification(
        _ signedPayload: String, expecting expectation: AppleSignedDataExpectation
    ) throws(AppleSignedDataError) -> VerifiedAppleNotification {
        let notification = try verify(signedPayload, as: .notification, expecting: expectation)
        struct Nested: Decodable {
            struct Section: Decodable {
                let signedTransactionInfo: String?
                let signedRenewalInfo: String?
            }
            let data: Section?
        }
        let nested: Nested
        do { nested = try notification.decode(Nested.self) } catch {
            throw AppleSignedDataError(.malformedJWS, "data.signedTransactionInfo / signedRenewalInfo are not strings")
        }
        func inner(_ jws: String?, as kind: AppleSignedDataKind) throws(AppleSignedDataError)
            -> VerifiedAppleSignedData?
        {
            guard let jws else { return nil }
            let verified = try verify(jws, as: kind, expecting: expectation)
            guard verified.environment == notification.environment else {
                throw AppleSignedDataError(
                    .environmentNotAllowed, "nested \(kind.rawValue) is not from the notification's environment")
            }
            return verified
        }
        return VerifiedAppleNotification(
            notification: notification,
            transaction: try inner(nested.data?.signedTransactionInfo, as: .transaction),
            renewalInfo: try inner(nested.data?.signedRenewalInfo, as: .renewalInfo))
    }

    // MARK: Steps

    /// Steps 2-5: algorithm, certificates, chain at `signedDate`, OIDs, signature. A header that passed them is
    /// remembered with its certificates (`VerifiedHeaders`): the next JWS with the same header skips steps 1's and
    /// 2's decoding, never 3-5.
    private func verifySignedByApple(_ input: AppleJWSInput, signedDate: Int64) throws(AppleSignedDataError) {
        let ders: [[UInt8]]
        switch input.header {
        case .remembered(let certificates): ders = certificates
        case .decoded(let header): ders = try certificates(in: header)
        }
        // Milliseconds → whole seconds, rounded down (as Apple's library does).
        let chain = try verifiedChain(ders, at: time_t(signedDate / 1000))
        guard input.signature.count == 64 else {
            throw AppleSignedDataError(
                .invalidSignature, "ES256 signature must be 64 bytes r||s, has \(input.signature.count)")
        }
        let valid: Bool
        do { valid = try chain.key.verify(rawSignature: input.signature, message: input.signingInput) } catch {
            throw AppleSignedDataError(
                .invalidSignature, "signature verification failed", openSSLErrors: error.openSSLErrors)
        }
        guard valid else { throw AppleSignedDataError(.invalidSignature, "signature does not verify") }
        if case .decoded = input.header {
            let entry = VerifiedHeaders.Entry(segment: Array(input.headerSegment), certificates: ders)
            headers.withLock { $0.remember(entry) }
        }
    }

    /// Step 2: `alg` is ES256 and `x5c` three standard-base64 certificates; returns their DER.
    private func certificates(in header: AppleJWSInput.Header) throws(AppleSignedDataError) -> [[UInt8]] {
        guard header.alg?.value == "ES256" else {
            throw AppleSignedDataError(.unsupportedAlgorithm, "alg must be ES256")
        }
        guard let x5c = header.x5c?.value else {
            throw AppleSignedDataError(.invalidCertificateChain, "x5c is missing or not an array")
        }
        guard x5c.count == 3 else {
            throw AppleSignedDataError(
                .invalidCertificateChain, "x5c must hold exactly 3 certificates, has \(x5c.count)")
        }
        var ders: [[UInt8]] = []
        for element in x5c {
            guard let text = element.value,
                let der = StandardBase64.decode(text, maximumLength: limits.maximumCertificateLength)
            else { throw AppleSignedDataError(.invalidCertificateChain, "an x5c entry is not standard base64") }
            ders.append(der)
        }
        return ders
    }

    /// Steps 3-4, through the cache.
    private func verifiedChain(_ ders: [[UInt8]], at time: time_t) throws(AppleSignedDataError) -> VerifiedChain {
        let key = VerifiedChainCache<VerifiedChain>.Key(leaf: ders[0], intermediate: ders[1])
        let now = clock()
        if let cached = cache.withLock({ $0.value(for: key, now: now) }), cached.root.der == ders[2],
            cached.isValid(at: time)
        {
            statistics.withLock { $0.hits += 1 }
            return cached
        }
        statistics.withLock { $0.misses += 1 }
        let chain = try verifyChainInFull(ders, at: time)
        cache.withLock { $0.insert(chain, for: key, now: now) }
        return chain
    }

    private func verifyChainInFull(_ ders: [[UInt8]], at time: time_t) throws(AppleSignedDataError) -> VerifiedChain {
        guard let leaf = X509Certificate.parse(der: ders[0]),
            let intermediate = X509Certificate.parse(der: ders[1])
        else { throw AppleSignedDataError(.invalidCertificateChain, "an x5c entry is not a DER certificate") }
        let root: X509Certificate
        switch store.verify(leaf: leaf, intermediate: intermediate, at: time) {
        case .success(let verifiedRoot): root = verifiedRoot
        case .failure(let failure):
            throw AppleSignedDataError(.invalidCertificateChain, failure.context, openSSLErrors: failure.openSSL)
        }
        guard leaf.hasExtension(leafOID) else {
            throw AppleSignedDataError(.invalidCertificateChain, "leaf lacks Apple's OID \(Self.leafOID)")
        }
        guard intermediate.hasExtension(intermediateOID) else {
            throw AppleSignedDataError(
                .invalidCertificateChain, "intermediate lacks Apple's OID \(Self.intermediateOID)")
        }
        guard root.der == ders[2] else {
            throw AppleSignedDataError(.invalidCertificateChain, "x5c[2] is not the pinned root the chain ends in")
        }
        guard let key = leaf.p256PublicKey() else {
            throw AppleSignedDataError(.invalidSignature, "leaf key is not EC P-256, so it cannot sign ES256")
        }
        return VerifiedChain(leaf: leaf, intermediate: intermediate, root: root, key: key)
    }

    /// Step 6: the claims against the tenant, in Apple's order (app identity, then environment). Returns the
    /// accepted environment.
    static func check(
        _ claims: AppleSignedClaims, kind: AppleSignedDataKind, environment: AppleEnvironment?,
        against expectation: AppleSignedDataExpectation
    ) throws(AppleSignedDataError) -> AppleEnvironment {
        if kind == .transaction || kind == .notification {
            guard claims.bundleId == expectation.bundleId else {
                throw AppleSignedDataError(.wrongBundleId, "bundleId is not the tenant's")
            }
        }
        if (kind == .notification || kind == .retentionMessagingRequest) && environment == .production {
            guard let expected = expectation.appAppleId else {
                throw AppleSignedDataError(
                    .wrongAppAppleId, "Production data needs the tenant's appAppleId, and the tenant has none")
            }
            guard claims.appAppleId == expected else {
                throw AppleSignedDataError(.wrongAppAppleId, "appAppleId is not the tenant's")
            }
        }
        guard let environment else {
            throw AppleSignedDataError(.environmentNotAllowed, "environment is missing or unknown")
        }
        guard expectation.allows(environment) else {
            throw AppleSignedDataError(.environmentNotAllowed, "\(environment.rawValue) data is not allowed")
        }
        return environment
    }

    // MARK: Test support

    /// Entries in the chain cache (expired ones until evicted).
    var cachedChainCount: Int { cache.withLock { $0.count } }

    /// Headers remembered from verified JWS, and how many verifications found theirs there.
    var rememberedHeaders: (count: Int, hits: Int) { headers.withLock { ($0.count, $0.hits) } }
}
