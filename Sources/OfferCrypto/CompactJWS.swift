/// The parts of a compact JWS (`b64url(header).b64url(payload).b64url(signature)`), decoded but not verified.
public struct CompactJWS: Sendable, Equatable {
    /// The header JSON bytes.
    public let header: [UInt8]
    /// The payload (claims) JSON bytes.
    public let payload: [UInt8]
    /// The signature bytes (64 for ES256).
    public let signature: [UInt8]
    /// The ASCII bytes that were signed: `b64url(header) "." b64url(payload)`.
    public let signingInput: [UInt8]

    /// Splits and base64url-decodes a compact JWS; requires three parts and a 64-byte signature.
    public init(compact: String) throws(CryptoError) {
        let parts = compact.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw CryptoError(.malformedJWS, "expected 3 dot-separated parts, got \(parts.count)")
        }
        guard let header = Base64URL.decode(bytes: parts[0]), let payload = Base64URL.decode(bytes: parts[1]),
            let signature = Base64URL.decode(bytes: parts[2])
        else { throw CryptoError(.malformedJWS, "a part is not base64url without padding") }
        guard signature.count == 64 else {
            throw CryptoError(.malformedJWS, "ES256 signature must be 64 bytes, got \(signature.count)")
        }
        self.header = header
        self.payload = payload
        self.signature = signature
        self.signingInput = Array(parts[0]) + [UInt8(ascii: ".")] + Array(parts[1])
    }
}
