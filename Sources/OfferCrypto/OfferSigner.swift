import Foundation

/// U+2063 INVISIBLE SEPARATOR, the V1 payload field separator, as UTF-8.
let invisibleSeparator: [UInt8] = [0xE2, 0x81, 0xA3]

/// The exact bytes Apple's V1 promotional offer signature covers (APPLE_OFFERS.md §1):
/// `bundleId ⁣ keyId ⁣ productId ⁣ offerId ⁣ lowercase(appAccountToken) ⁣ lowercase(nonce) ⁣ timestampMillis`.
public struct PromotionalOfferV1Payload: Sendable, Equatable {
    /// The app's bundle id, verbatim.
    public var bundleId: String
    /// The App Store Connect key id, verbatim.
    public var keyId: String
    /// The subscription product id, verbatim.
    public var productId: String
    /// The promotional offer id, verbatim.
    public var offerId: String
    /// `appAccountToken` (StoreKit 2) or `applicationUsername` (StoreKit 1); may be empty. Lowercased in `bytes`.
    public var appAccountToken: String
    /// The one-time nonce; written in lowercase canonical form.
    public var nonce: UUID
    /// UNIX time in milliseconds.
    public var timestamp: Int64

    /// A payload from its seven fields.
    public init(
        bundleId: String, keyId: String, productId: String, offerId: String, appAccountToken: String,
        nonce: UUID, timestamp: Int64
    ) {
        self.bundleId = bundleId
        self.keyId = keyId
        self.productId = productId
        self.offerId = offerId
        self.appAccountToken = appAccountToken
        self.nonce = nonce
        self.timestamp = timestamp
    }

    /// The UTF-8 bytes to sign.
    public var bytes: [UInt8] {
        var out = PromotionalOfferV1Payload.prefix(bundleId: bundleId, keyId: keyId)
        PromotionalOfferV1Payload.appendTail(
            to: &out, productId: productId, offerId: offerId,
            appAccountToken: appAccountToken, nonce: nonce, timestamp: timestamp)
        return out
    }

    /// `bundleId ⁣ keyId ⁣`: the part that is the same for every signature of one signer.
    static func prefix(bundleId: String, keyId: String) -> [UInt8] {
        Array(bundleId.utf8) + invisibleSeparator + Array(keyId.utf8) + invisibleSeparator
    }

    static func appendTail(
        to out: inout [UInt8], productId: String, offerId: String, appAccountToken: String,
        nonce: UUID, timestamp: Int64
    ) {
        out.append(contentsOf: productId.utf8)
        out.append(contentsOf: invisibleSeparator)
        out.append(contentsOf: offerId.utf8)
        out.append(contentsOf: invisibleSeparator)
        out.append(contentsOf: appAccountToken.lowercased().utf8)
        out.append(contentsOf: invisibleSeparator)
        nonce.appendLowercase(to: &out)
        out.append(contentsOf: invisibleSeparator)
        JSONObjectWriter.appendInteger(timestamp, to: &out)
    }
}

/// A V1 promotional offer signature and the values the app must pass to StoreKit with it.
public struct V1Signature: Sendable, Equatable {
    /// The key id (`keyID` in StoreKit).
    public let keyId: String
    /// The nonce that was signed (pass this exact UUID to StoreKit).
    public let nonce: UUID
    /// The signed timestamp, UNIX milliseconds.
    public let timestamp: Int64
    /// ECDSA-SHA256 signature, ASN.1 DER, standard base64 with padding (what StoreKit expects).
    public let signature: String

    /// The nonce in the lowercase form that was signed.
    public var nonceString: String { nonce.lowercasedString }
}

/// A JWS audience (`aud`). Apple's known audiences are provided; the signer treats them as data.
public struct JWSAudience: RawRepresentable, Sendable, Hashable {
    /// The `aud` string.
    public let rawValue: String
    /// Creates an audience from its `aud` string.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Promotional offer signature V2 (APPLE_OFFERS.md §2).
    public static let promotionalOffer = JWSAudience(rawValue: "promotional-offer")
    /// Introductory offer eligibility (APPLE_OFFERS.md §3).
    public static let introductoryOfferEligibility = JWSAudience(rawValue: "introductory-offer-eligibility")
}

/// Signs Apple offer payloads with one App Store Connect key: V1 promotional offer signatures and ES256 JWS.
///
/// A `Sendable` value: the key is parsed once and every signature uses its own OpenSSL context, so one signer can
/// be shared by any number of concurrent tasks. Time and nonces come from the injected `clock` and `nonces`
/// (now and a fresh random v4 UUID from `UUID.secureRandom()` by default); each call may also pass them explicitly.
public struct OfferSigner: Sendable {
    /// The signing key.
    public let key: SigningKey
    /// App Store Connect key id (`kid`, and the V1 payload's key id).
    public let keyId: String
    /// App Store Connect issuer id (`iss`).
    public let issuerId: String
    /// The app's bundle id (`bid`, and the V1 payload's bundle id).
    public let bundleId: String
    private let clock: @Sendable () -> Date
    private let nonces: @Sendable () -> UUID
    private let v1Prefix: [UInt8]
    private let encodedHeader: [UInt8]
    /// The claims' bytes that are the same for every signature: `{"iss":"<issuer>","iat":` and
    /// `,"bid":"<bundle>","nonce":"`.
    private let claimsStart: [UInt8]
    private let claimsBundle: [UInt8]

    /// A signer for one key of one app.
    public init(
        key: SigningKey, keyId: String, issuerId: String, bundleId: String,
        clock: @escaping @Sendable () -> Date = { Date() },
        nonces: @escaping @Sendable () -> UUID = { UUID.secureRandom() }
    ) {
        self.key = key
        self.keyId = keyId
        self.issuerId = issuerId
        self.bundleId = bundleId
        self.clock = clock
        self.nonces = nonces
        self.v1Prefix = PromotionalOfferV1Payload.prefix(bundleId: bundleId, keyId: keyId)
        self.encodedHeader = Array(Base64URL.encode(OfferSigner.headerJSON(keyId: keyId)).utf8)
        var start = Array(#"{"iss":"#.utf8)
        JSONObjectWriter.appendString(issuerId, to: &start)
        start.append(contentsOf: #","iat":"#.utf8)
        self.claimsStart = start
        var bundle = Array(#","bid":"#.utf8)
        JSONObjectWriter.appendString(bundleId, to: &bundle)
        bundle.append(contentsOf: #","nonce":""#.utf8)
        self.claimsBundle = bundle
    }

    /// The exact JWS header bytes: `{"alg":"ES256","kid":"<keyId>","typ":"JWT"}`.
    public static func headerJSON(keyId: String) -> [UInt8] {
        var writer = JSONObjectWriter(capacity: 64)
        writer.member("alg", .string("ES256"))
        writer.member("kid", .string(keyId))
        writer.member("typ", .string("JWT"))
        return writer.finish()
    }

    // MARK: V1

    /// The V1 payload this signer would sign for these inputs.
    public func v1Payload(
        productId: String, offerId: String, appAccountToken: String, nonce: UUID,
        timestamp: Int64
    ) -> PromotionalOfferV1Payload {
        PromotionalOfferV1Payload(
            bundleId: bundleId, keyId: keyId, productId: productId, offerId: offerId,
            appAccountToken: appAccountToken, nonce: nonce, timestamp: timestamp)
    }

    /// A V1 promotional offer signature (APPLE_OFFERS.md §1).
    ///
    /// - Parameters:
    ///   - appAccountToken: `appAccountToken` / `applicationUsername` (lowercased when signed); may be empty.
    ///   - nonce: defaults to the injected nonce source.
    ///   - timestamp: UNIX milliseconds; defaults to the injected clock.
    public func signV1(
        productId: String, offerId: String, appAccountToken: String = "", nonce: UUID? = nil,
        timestamp: Int64? = nil
    ) throws(CryptoError) -> V1Signature {
        let nonce = nonce ?? nonces()
        let timestamp = timestamp ?? OfferSigner.milliseconds(clock())
        var payload = v1Prefix
        payload.reserveCapacity(v1Prefix.count + productId.utf8.count + offerId.utf8.count + 96)
        PromotionalOfferV1Payload.appendTail(
            to: &payload, productId: productId, offerId: offerId,
            appAccountToken: appAccountToken, nonce: nonce, timestamp: timestamp)
        let der = try key.signatureDER(for: payload)
        return V1Signature(keyId: keyId, nonce: nonce, timestamp: timestamp, signature: Data(der).base64EncodedString())
    }

    // MARK: JWS

    /// The exact claims bytes for a JWS: `iss, iat, bid, nonce, aud`, then `extraClaims` in order.
    public func claimsJSON(
        audience: JWSAudience, extraClaims: [(String, JWSClaimValue)], nonce: UUID,
        issuedAt: Int64
    ) throws(CryptoError) -> [UInt8] {
        // A handful of claims: linear checks beat hashing here (this runs once per signature).
        for (index, (name, _)) in extraClaims.enumerated() {
            let reserved = name == "iss" || name == "iat" || name == "bid" || name == "nonce" || name == "aud"
            guard !reserved, !extraClaims[..<index].contains(where: { $0.0 == name }) else {
                throw CryptoError(.invalidClaims, "claim '\(name)' is reserved or repeated")
            }
        }
        // The members every token has (`iss` and `bid` written once, in `init`), then the extra claims, into one
        // buffer reserved for all of them (escaping aside).
        var bytes: [UInt8] = []
        bytes.reserveCapacity(
            claimsStart.count + claimsBundle.count + audience.rawValue.utf8.count + 96
                + extraClaims.reduce(0) { $0 + $1.0.utf8.count + $1.1.estimatedCount + 4 })
        bytes.append(contentsOf: claimsStart)
        JSONObjectWriter.appendInteger(issuedAt, to: &bytes)
        bytes.append(contentsOf: claimsBundle)
        nonce.appendLowercase(to: &bytes)
        bytes.append(contentsOf: #"","aud":"#.utf8)
        JSONObjectWriter.appendString(audience.rawValue, to: &bytes)
        for (name, value) in extraClaims {
            bytes.append(UInt8(ascii: ","))
            JSONObjectWriter.appendMember(name, value, to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// A compact ES256 JWS for any audience: header `{"alg":"ES256","kid":…,"typ":"JWT"}`, claims `iss`, `iat`
    /// (integer seconds), `bid`, `nonce` (lowercase), `aud`, then `extraClaims` in order. No `exp`.
    public func signJWS(
        audience: JWSAudience, extraClaims: [(String, JWSClaimValue)], nonce: UUID? = nil,
        issuedAt: Date? = nil
    ) throws(CryptoError) -> String {
        let nonce = nonce ?? nonces()
        let iat = Int64((issuedAt ?? clock()).timeIntervalSince1970.rounded(.down))
        let claims = try claimsJSON(audience: audience, extraClaims: extraClaims, nonce: nonce, issuedAt: iat)
        // The token is written straight into the string's storage: header, claims, then the signature of the two.
        let length = encodedHeader.count + 1 + Base64URL.encodedCount(claims.count) + 1 + Base64URL.encodedCount(64)
        var failure: CryptoError?
        let token = String(unsafeUninitializedCapacity: length) { out in
            do throws(CryptoError) {
                return try writeToken(claims: claims, to: out.baseAddress!)
            } catch {
                failure = error
                return 0
            }
        }
        if let failure { throw failure }
        return token
    }

    /// Writes `b64url(header) "." b64url(claims) "." b64url(signature)` at `out` and returns its length.
    private func writeToken(claims: [UInt8], to out: UnsafeMutablePointer<UInt8>) throws(CryptoError) -> Int {
        var at = encodedHeader.withUnsafeBufferPointer { header in
            out.initialize(from: header.baseAddress!, count: header.count)
            return header.count
        }
        out[at] = UInt8(ascii: ".")
        at += 1
        at += claims.withUnsafeBufferPointer { Base64URL.write($0, to: out + at) }
        let signed = UnsafeRawBufferPointer(start: out, count: at)
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { raw throws(CryptoError) in
            try key.signatureRaw(for: signed, into: raw.baseAddress!)
            out[at] = UInt8(ascii: ".")
            return at + 1 + Base64URL.write(UnsafeBufferPointer(raw), to: out + at + 1)
        }
    }

    /// Promotional offer signature V2 (`aud` `promotional-offer`): claims `productId`, `offerIdentifier` and
    /// `transactionId` only when given.
    public func promotionalOfferJWS(
        productId: String, offerId: String, transactionId: String? = nil,
        nonce: UUID? = nil, issuedAt: Date? = nil
    ) throws(CryptoError) -> String {
        // Two literals, not one grown by an append (each is one allocation).
        let claims: [(String, JWSClaimValue)] =
            if let transactionId {
                [
                    ("productId", .string(productId)), ("offerIdentifier", .string(offerId)),
                    ("transactionId", .string(transactionId)),
                ]
            } else {
                [("productId", .string(productId)), ("offerIdentifier", .string(offerId))]
            }
        return try signJWS(audience: .promotionalOffer, extraClaims: claims, nonce: nonce, issuedAt: issuedAt)
    }

    /// Introductory offer eligibility (`aud` `introductory-offer-eligibility`): claims `productId`,
    /// `allowIntroductoryOffer` (boolean) and `transactionId` (required; an `appTransactionId` works).
    public func introductoryOfferEligibilityJWS(
        productId: String, allowIntroductoryOffer: Bool, transactionId: String,
        nonce: UUID? = nil, issuedAt: Date? = nil
    ) throws(CryptoError)
        -> String
    {
        try signJWS(
            audience: .introductoryOfferEligibility,
            extraClaims: [
                ("productId", .string(productId)), ("allowIntroductoryOffer", .bool(allowIntroductoryOffer)),
                ("transactionId", .string(transactionId)),
            ],
            nonce: nonce, issuedAt: issuedAt)
    }

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }
}
