import CCrypto

/// The one error type of OfferCrypto.
///
/// `description` says what failed and never contains key material, plaintexts or tokens. OpenSSL's error queue
/// (library, reason; never data) is kept in `openSSLErrors` and shown by `debugDescription`.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, as a stable code other modules can switch over.
    public enum Code: String, Sendable, Equatable, CaseIterable {
        /// The input is empty.
        case emptyKey
        /// The text is not a PEM block we accept (missing or unknown header/footer, bad base64 body).
        case malformedPEM
        /// The PEM is an encrypted private key; App Store Connect keys are never encrypted.
        case encryptedKey
        /// A key format we do not accept (SEC1 `EC PRIVATE KEY`, `RSA PRIVATE KEY`, ...).
        case unsupportedKeyFormat
        /// The key parsed but is not an EC key (e.g. RSA).
        case unsupportedKeyType
        /// The EC key is on another curve than P-256 (e.g. P-384).
        case unsupportedCurve
        /// OpenSSL could not parse the key.
        case keyParseFailed
        /// An OpenSSL signing call failed.
        case signingFailed
        /// An OpenSSL verification call failed (not: a signature that does not verify).
        case verificationFailed
        /// Caller-supplied JWS claims collide with the standard ones (`iss`, `iat`, `bid`, `nonce`, `aud`) or repeat.
        case invalidClaims
        /// A compact JWS is malformed (part count, base64url, signature length).
        case malformedJWS
        /// A master key has the wrong length or encoding.
        case invalidMasterKey
        /// A master key file exists with permissions wider than 0600, is not a regular file or is unreadable.
        case masterKeyFile
        /// A sealed blob is malformed (too short, unknown version).
        case malformedSealedKey
        /// No master key in the keyring matches the blob's master key id.
        case unknownMasterKey
        /// Authentication failed: wrong tenant, wrong key id, wrong master key or tampered bytes.
        case sealedKeyRejected
        /// An OpenSSL cipher call failed.
        case cipherFailed
        /// The CSPRNG failed.
        case randomFailed
        /// Any other OpenSSL failure.
        case openSSL
    }

    /// What went wrong.
    public let code: Code
    /// A short human-readable context (never secrets).
    public let context: String
    /// OpenSSL's error queue at the time of failure, oldest first (`ERR_error_string_n` lines).
    public let openSSLErrors: [String]

    /// Creates an error; `openSSLErrors` defaults to empty (use `CryptoError.openSSL(_:_:)` to drain the queue).
    public init(_ code: Code, _ context: String, openSSLErrors: [String] = []) {
        self.code = code
        self.context = context
        self.openSSLErrors = openSSLErrors
    }

    /// Creates an error carrying OpenSSL's current error queue (drained, so the next call starts clean).
    static func drainingQueue(_ code: Code, _ context: String) -> CryptoError {
        CryptoError(code, context, openSSLErrors: OpenSSLErrorQueue.drain())
    }

    /// Redacted: code and context only.
    public var description: String { "CryptoError.\(code.rawValue): \(context)" }

    /// Code, context and OpenSSL's error queue (which never holds key material).
    public var debugDescription: String {
        openSSLErrors.isEmpty ? description : "\(description) [openssl: \(openSSLErrors.joined(separator: "; "))]"
    }
}

/// OpenSSL's per-thread error queue. Every failing call path drains it into the error it throws, so text never
/// leaks from one operation into another on the same thread.
enum OpenSSLErrorQueue {
    /// Removes and returns every queued error as text, oldest first.
    static func drain() -> [String] {
        var lines: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            let line = buffer.withUnsafeMutableBufferPointer { buf -> String in
                ERR_error_string_n(code, buf.baseAddress, buf.count)
                return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            lines.append(line)
        }
        return lines
    }

    /// Discards stale errors left by an earlier (handled) failure on this thread.
    static func clear() { ERR_clear_error() }
}
