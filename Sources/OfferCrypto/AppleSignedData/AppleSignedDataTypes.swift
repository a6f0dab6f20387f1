import Foundation

/// The App Store environment a piece of signed data says it comes from (its `environment` claim).
public enum AppleEnvironment: String, Sendable, Equatable, Hashable, CaseIterable {
    /// Real purchases. Always allowed.
    case production = "Production"
    /// Sandbox testers, TestFlight. Verified exactly like Production; allowed only when the tenant allows Sandbox.
    case sandbox = "Sandbox"
    /// StoreKit testing in Xcode. Not signed by Apple (a local StoreKit test certificate signs it).
    case xcode = "Xcode"
    /// StoreKit local testing. Not signed by Apple either.
    case localTesting = "LocalTesting"

    /// `true` for the environments whose data Apple's servers sign (Production, Sandbox).
    public var isSignedByApple: Bool { self == .production || self == .sandbox }
}

/// What a JWS is, which decides which claims are checked (APPLE_OFFERS.md §7 step 6).
public enum AppleSignedDataKind: String, Sendable, Equatable, Hashable, CaseIterable {
    /// A `JWSTransaction` (`signedTransactionInfo`, StoreKit 2 `jwsRepresentation`): `bundleId` and `environment`.
    case transaction
    /// A `JWSRenewalInfo` (`signedRenewalInfo`): `environment` only (it has no `bundleId`).
    case renewalInfo
    /// An App Store Server Notification V2 `signedPayload`: `data.bundleId`, `data.environment` and, in Production,
    /// `data.appAppleId` (or the same fields of `summary`, `externalPurchaseToken` or `appData`, as Apple's library
    /// reads them).
    case notification
    /// A Retention Messaging API request `signedPayload`: `appAppleId` (in Production) and `environment`.
    case retentionMessagingRequest
}

/// What the tenant expects of Apple's data: its app and the environments it accepts.
public struct AppleSignedDataExpectation: Sendable, Equatable, Hashable {
    /// The tenant's bundle id; transactions and notifications must carry exactly this one.
    public var bundleId: String
    /// The tenant's App Store app id. Production notifications and Retention Messaging requests must carry it; with
    /// `nil` they are rejected (`wrong_app_apple_id`), as Apple's library refuses to verify Production without one.
    public var appAppleId: Int64?
    /// Accept `Sandbox` data (verified exactly like Production).
    public var allowSandbox: Bool
    /// Accept `Xcode` and `LocalTesting` data, which Apple does not sign and which is therefore taken unverified.
    public var allowXcode: Bool

    /// An expectation; by default only Production data is accepted.
    public init(bundleId: String, appAppleId: Int64? = nil, allowSandbox: Bool = false, allowXcode: Bool = false) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.allowSandbox = allowSandbox
        self.allowXcode = allowXcode
    }

    /// Whether data from `environment` may be accepted. Production always; the others per the flags.
    public func allows(_ environment: AppleEnvironment) -> Bool {
        switch environment {
        case .production: true
        case .sandbox: allowSandbox
        case .xcode, .localTesting: allowXcode
        }
    }
}

/// How the authenticity of accepted data was established.
public enum AppleSignedDataAuthenticity: String, Sendable, Equatable, Hashable {
    /// The chain validated to a pinned root at `signedDate` and the ES256 signature verified with the leaf's key.
    case verifiedChain
    /// `Xcode` / `LocalTesting` data accepted because the tenant allows it: neither chain nor signature was checked
    /// (Apple's own libraries skip both for these environments). Proves nothing about who made it.
    case unverifiedDevelopmentData
}

/// Signed data that passed verification: the exact payload bytes and what was checked.
public struct VerifiedAppleSignedData: Sendable, Equatable {
    /// What kind of data was verified.
    public let kind: AppleSignedDataKind
    /// The payload exactly as signed (UTF-8 JSON, a JSON object). Decode it with `JSONDecoder` or `jsonObject()`.
    public let payload: [UInt8]
    /// The environment the payload names (for notifications: the one of `data`/`summary`/...).
    public let environment: AppleEnvironment
    /// The payload's `signedDate`, milliseconds since the epoch; the certificates were checked at this time.
    public let signedDateMilliseconds: Int64
    /// The bundle id the payload carries (`nil` for renewal info and Retention Messaging requests, which have none).
    public let bundleId: String?
    /// The app Apple id the payload carries, if any.
    public let appAppleId: Int64?
    /// Whether Apple's chain and signature were verified, or development data was taken as it is.
    public let authenticity: AppleSignedDataAuthenticity

    /// `signedDateMilliseconds` as a `Date`.
    public var signedDate: Date { Date(timeIntervalSince1970: Double(signedDateMilliseconds) / 1000) }

    /// The payload parsed with Foundation's `JSONSerialization` (always a JSON object for verified data).
    public func jsonObject() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else {
            throw AppleSignedDataError(.malformedJWS, "payload is not a JSON object")
        }
        return object
    }

    /// The payload decoded into `type` with `decoder`.
    public func decode<T: Decodable>(_ type: T.Type, using decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: Data(payload))
    }
}

/// A verified App Store Server Notification with its verified nested transaction and renewal info.
public struct VerifiedAppleNotification: Sendable, Equatable {
    /// The notification itself (`kind == .notification`).
    public let notification: VerifiedAppleSignedData
    /// `data.signedTransactionInfo`, verified as a transaction, when present.
    public let transaction: VerifiedAppleSignedData?
    /// `data.signedRenewalInfo`, verified as renewal info, when present.
    public let renewalInfo: VerifiedAppleSignedData?
}

/// Why Apple signed data was rejected: the API's `-32060` `data.reason` (API.md §7/§8) plus a redacted context.
///
/// `description` never contains the input (which is untrusted and may be huge); OpenSSL's error queue and the X.509
/// verification error are kept in `openSSLErrors` and shown by `debugDescription` for the server log.
public struct AppleSignedDataError: Error, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The API's reason codes (the raw values are the wire strings).
    public enum Reason: String, Sendable, Equatable, Hashable, CaseIterable {
        /// Not a compact JWS within bounds: part count, base64url, header or payload not a JSON object, a claim of the
        /// wrong type, no integer `signedDate`, an oversized part.
        case malformedJWS = "malformed_jws"
        /// `alg` is not `ES256` (`none`, `HS256`, `RS256`, missing, not a string).
        case unsupportedAlgorithm = "unsupported_algorithm"
        /// `x5c` is not exactly three standard-base64 DER certificates, or they do not chain leaf → intermediate → a
        /// pinned root at `signedDate`, or the leaf or intermediate lacks Apple's extension OID.
        case invalidCertificateChain = "invalid_certificate_chain"
        /// The signature is not 64 bytes `r‖s` (a DER signature is refused) or does not verify with the leaf's key.
        case invalidSignature = "invalid_signature"
        /// The payload's bundle id is not the tenant's.
        case wrongBundleId = "wrong_bundle_id"
        /// The payload's app Apple id is not the tenant's (or the tenant has none and the data is Production).
        case wrongAppAppleId = "wrong_app_apple_id"
        /// The payload's environment is unknown or not allowed for the tenant.
        case environmentNotAllowed = "environment_not_allowed"
    }

    /// The API reason.
    public let reason: Reason
    /// What failed, for humans; never echoes input values.
    public let context: String
    /// OpenSSL's error queue and X.509 verification error text, if any (never key material or input).
    public let openSSLErrors: [String]

    /// Creates an error.
    public init(_ reason: Reason, _ context: String, openSSLErrors: [String] = []) {
        self.reason = reason
        self.context = context
        self.openSSLErrors = openSSLErrors
    }

    /// Redacted: reason and context.
    public var description: String { "AppleSignedDataError.\(reason.rawValue): \(context)" }

    /// Reason, context and the OpenSSL details.
    public var debugDescription: String {
        openSSLErrors.isEmpty ? description : "\(description) [openssl: \(openSSLErrors.joined(separator: "; "))]"
    }
}
