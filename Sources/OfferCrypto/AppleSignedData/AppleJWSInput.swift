import CCrypto
import Foundation

/// Size bounds applied before any parsing, so hostile input costs at most a bounded amount of work.
///
/// Real data for scale: a transaction or renewal info is ~5 KB, a notification with both nested JWS ~19 KB, the
/// header (three certificates) ~4.4 KB, one certificate's base64 ≤ 1.5 KB.
public struct AppleSignedDataLimits: Sendable, Equatable {
    /// Longest compact JWS accepted, in bytes.
    public var maximumJWSLength: Int
    /// Longest base64url header segment accepted, in bytes.
    public var maximumHeaderLength: Int
    /// Longest base64 `x5c` entry accepted, in characters.
    public var maximumCertificateLength: Int

    /// The defaults: 256 KiB per JWS, 16 KiB of header, 8 KiB per certificate.
    public init(
        maximumJWSLength: Int = 256 * 1024, maximumHeaderLength: Int = 16 * 1024,
        maximumCertificateLength: Int = 8 * 1024
    ) {
        self.maximumJWSLength = maximumJWSLength
        self.maximumHeaderLength = maximumHeaderLength
        self.maximumCertificateLength = maximumCertificateLength
    }
}

/// A compact JWS split and decoded, nothing verified: header as a JSON object, payload bytes, signature bytes.
///
/// Kept apart from `CompactJWS` (the signer's view, which insists on a 64-byte signature up front) because here each
/// defect must map to its own API reason: a signature of the wrong length is `invalid_signature`, not
/// `malformed_jws`.
struct AppleJWSInput {
    /// The header members verification reads. A member of another JSON type than expected is kept as `.other`, so
    /// that `"alg": 256` is `unsupported_algorithm` and `"x5c": {}` `invalid_certificate_chain`, as for a missing one.
    struct Header: Decodable {
        enum Member<Value: Decodable>: Decodable {
            case value(Value)
            case other

            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                self = (try? container.decode(Value.self)).map(Member.value) ?? .other
            }

            var value: Value? {
                if case .value(let value) = self { return value }
                return nil
            }
        }

        let alg: Member<String>?
        let x5c: Member<[Member<String>]>?
    }

    /// What the header gave: the header decoded here (it must be a JSON object), or, when this exact header was
    /// remembered (`VerifiedHeaders`) from a JWS that verified, the DER certificates of its `x5c` read then (its JSON
    /// and base64 are not read again).
    enum HeaderContent {
        case decoded(Header)
        case remembered(certificates: [[UInt8]])
    }

    let header: HeaderContent
    let payload: [UInt8]
    let signature: [UInt8]
    /// `b64url(header) "." b64url(payload)`: what the signature covers.
    let signingInput: [UInt8]
    /// The length of the header's base64url segment, the start of `signingInput`.
    let headerLength: Int

    /// The base64url header segment as it came.
    var headerSegment: ArraySlice<UInt8> { signingInput[..<headerLength] }

    /// Splits and decodes `compact`; `remembered` gives the certificates of a header segment remembered, if any.
    init(
        _ compact: String, limits: AppleSignedDataLimits,
        remembered: (ArraySlice<UInt8>) -> [[UInt8]]? = { _ in nil }
    ) throws(AppleSignedDataError) {
        let length = compact.utf8.count
        guard length > 0 else { throw AppleSignedDataError(.malformedJWS, "empty JWS") }
        guard length <= limits.maximumJWSLength else {
            throw AppleSignedDataError(.malformedJWS, "JWS longer than \(limits.maximumJWSLength) bytes")
        }
        let bytes = Array(compact.utf8)
        // The first two dots, and no third one.
        guard let firstDot = bytes.firstIndex(of: UInt8(ascii: ".")),
            let secondDot = bytes[(firstDot + 1)...].firstIndex(of: UInt8(ascii: ".")),
            !bytes[(secondDot + 1)...].contains(UInt8(ascii: "."))
        else { throw AppleSignedDataError(.malformedJWS, "a compact JWS has exactly 3 dot-separated parts") }
        let headerSegment = bytes[..<firstDot]
        guard headerSegment.count <= limits.maximumHeaderLength else {
            throw AppleSignedDataError(.malformedJWS, "header longer than \(limits.maximumHeaderLength) bytes")
        }
        // A remembered segment decoded before to a JSON object; the same bytes cannot decode otherwise now.
        let known = remembered(headerSegment)
        let headerBytes = known == nil ? Base64URL.decode(bytes: headerSegment) : []
        guard let headerBytes,
            let payload = Base64URL.decode(bytes: bytes[(firstDot + 1)..<secondDot]),
            let signature = Base64URL.decode(bytes: bytes[(secondDot + 1)...])
        else { throw AppleSignedDataError(.malformedJWS, "a part is not base64url without padding") }
        if let known {
            header = .remembered(certificates: known)
        } else {
            guard let decoded = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)) else {
                throw AppleSignedDataError(.malformedJWS, "header is not a JSON object")
            }
            header = .decoded(decoded)
        }
        self.payload = payload
        self.signature = signature
        self.signingInput = Array(bytes[..<secondDot])
        self.headerLength = firstDot
    }
}

/// The claims verification looks at, read from the payload per kind with strict types (a string where a number
/// belongs, or a payload that is not a JSON object, is `malformed_jws`).
struct AppleSignedClaims: Equatable {
    var signedDate: Int64?
    var environment: String?
    var bundleId: String?
    var appAppleId: Int64?

    private struct Flat: Decodable {
        let signedDate: Int64?
        let environment: String?
        let bundleId: String?
        let appAppleId: Int64?
    }

    private struct AppData: Decodable {
        let environment: String?
        let bundleId: String?
        let appAppleId: Int64?
    }

    private struct ExternalPurchaseToken: Decodable {
        let externalPurchaseId: String?
        let bundleId: String?
        let appAppleId: Int64?
    }

    private struct Notification: Decodable {
        let signedDate: Int64?
        let data: AppData?
        let summary: AppData?
        let externalPurchaseToken: ExternalPurchaseToken?
        let appData: AppData?
    }

    private struct Renewal: Decodable {
        let signedDate: Int64?
        let environment: String?
    }

    private struct Realtime: Decodable {
        let signedDate: Int64?
        let environment: String?
        let appAppleId: Int64?
    }

    init(kind: AppleSignedDataKind, payload: [UInt8]) throws(AppleSignedDataError) {
        let data = Data(payload)
        let decoder = JSONDecoder()
        do {
            switch kind {
            case .transaction:
                let flat = try decoder.decode(Flat.self, from: data)
                self.init(signedDate: flat.signedDate, environment: flat.environment, bundleId: flat.bundleId)
            case .renewalInfo:
                let renewal = try decoder.decode(Renewal.self, from: data)
                self.init(signedDate: renewal.signedDate, environment: renewal.environment)
            case .retentionMessagingRequest:
                let request = try decoder.decode(Realtime.self, from: data)
                self.init(
                    signedDate: request.signedDate, environment: request.environment, appAppleId: request.appAppleId)
            case .notification:
                // The first section present wins, in the order Apple's library reads them.
                let note = try decoder.decode(Notification.self, from: data)
                self.init(signedDate: note.signedDate)
                if let app = note.data ?? note.summary {
                    (environment, bundleId, appAppleId) = (app.environment, app.bundleId, app.appAppleId)
                } else if let token = note.externalPurchaseToken {
                    // Apple's library: a token whose id starts with "SANDBOX" is Sandbox, any other Production.
                    let sandbox = token.externalPurchaseId?.hasPrefix("SANDBOX") ?? false
                    environment = sandbox ? AppleEnvironment.sandbox.rawValue : AppleEnvironment.production.rawValue
                    (bundleId, appAppleId) = (token.bundleId, token.appAppleId)
                } else if let app = note.appData {
                    (environment, bundleId, appAppleId) = (app.environment, app.bundleId, app.appAppleId)
                }
            }
        } catch {
            throw AppleSignedDataError(.malformedJWS, "payload is not a JSON object with the expected claim types")
        }
    }

    private init(signedDate: Int64?, environment: String? = nil, bundleId: String? = nil, appAppleId: Int64? = nil) {
        self.signedDate = signedDate
        self.environment = environment
        self.bundleId = bundleId
        self.appAppleId = appAppleId
    }
}

/// Standard base64 (RFC 4648 §4) as `x5c` uses it, strictly: alphabet `A-Z a-z 0-9 + /`, `=` padding to a multiple
/// of 4, no whitespace (what Apple's library accepts with `b64decode(validate=True)`).
enum StandardBase64 {
    static func decode(_ text: String, maximumLength: Int) -> [UInt8]? {
        var text = text
        return text.withUTF8 { chars -> [UInt8]? in
            guard !chars.isEmpty, chars.count <= maximumLength, chars.count % 4 == 0, let base = chars.baseAddress
            else { return nil }
            var padding = 0
            for char in chars {
                switch char {
                case UInt8(ascii: "="):
                    padding += 1
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                    if padding > 0 { return nil }  // data after padding
                default:
                    return nil
                }
            }
            guard padding <= 2 else { return nil }
            // Validated above, so OpenSSL's block decoder sees only canonical groups; it writes 3 bytes per group,
            // counting padding as zero bytes, which are dropped.
            var out = [UInt8](repeating: 0, count: chars.count / 4 * 3)
            let written = out.withUnsafeMutableBufferPointer { buf in
                EVP_DecodeBlock(buf.baseAddress, base, Int32(chars.count))
            }
            guard written == out.count else { return nil }
            out.removeLast(padding)
            return out
        }
    }
}
