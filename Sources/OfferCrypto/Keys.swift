import CCrypto
import Foundation

/// Owns one parsed `EVP_PKEY` and pools of ready contexts: to sign with it (private keys) and to verify with it.
///
/// Invariant (why `@unchecked Sendable` is sound): `pkey` is created before `init` returns, never mutated and freed
/// only in `deinit`; OpenSSL 3 allows one `EVP_PKEY` to be used read-only from many threads (contexts only take
/// references on it). Each pooled `Slot` (an `EVP_PKEY_CTX` initialised for one operation, a reusable `ECDSA_SIG` and
/// a digest context) is used by exactly one thread at a time: popped from its pool under `poolLock`, used without the
/// lock, pushed back under the lock. The lock guards only the arrays, never an OpenSSL call, so signing and
/// verifying scale across cores.
final class PKeyHandle: @unchecked Sendable {
    /// One operation's scratch: a context initialised for signing or verifying ECDSA over SHA-256 digests, a
    /// decoded-signature holder (DER→raw when signing) and a digest context for hashing the message.
    private struct Slot {
        let ctx: OpaquePointer
        let sig: OpaquePointer
        let hash: OpaquePointer
    }

    private enum Operation {
        case sign, verify

        var failure: CryptoError.Code { self == .sign ? .signingFailed : .verificationFailed }
    }

    let pkey: OpaquePointer
    private let forSigning: Bool
    private let poolLock = NSLock()
    private var signPool: [Slot] = []
    /// Verifying contexts, made on first use: initialising one per verification (`EVP_DigestVerifyInit`) looked up
    /// the digest and the signature algorithm in OpenSSL's provider store every time, ~4 % of a Retention Messaging
    /// answer's CPU (docs/perf/b9-retention.md, round 3).
    private var verifyPool: [Slot] = []
    private static let maxPooled = 64

    /// Takes ownership of `pkey`. With `forSigning`, checks that a signing context can be made.
    init(taking pkey: OpaquePointer, forSigning: Bool) throws(CryptoError) {
        self.pkey = pkey
        self.forSigning = forSigning
        if forSigning {
            let slot = try makeSlot(.sign)
            signPool.append(slot)
        }
    }

    deinit {
        for slot in signPool + verifyPool { Self.free(slot) }
        EVP_PKEY_free(pkey)
    }

    private static func free(_ slot: Slot) {
        EVP_PKEY_CTX_free(slot.ctx)
        ECDSA_SIG_free(slot.sig)
        EVP_MD_CTX_free(slot.hash)
    }

    /// A new ECDSA context over SHA-256 digests for `operation`, with its signature holder and digest context.
    private func makeSlot(_ operation: Operation) throws(CryptoError) -> Slot {
        guard let ctx = EVP_PKEY_CTX_new(pkey, nil) else {
            throw CryptoError.drainingQueue(operation.failure, "EVP_PKEY_CTX_new failed")
        }
        let initialised = operation == .sign ? EVP_PKEY_sign_init(ctx) : EVP_PKEY_verify_init(ctx)
        guard initialised == 1, EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) == 1 else {
            EVP_PKEY_CTX_free(ctx)
            throw CryptoError.drainingQueue(
                operation.failure, operation == .sign ? "EVP_PKEY_sign_init failed" : "EVP_PKEY_verify_init failed")
        }
        guard let sig = ECDSA_SIG_new() else {
            EVP_PKEY_CTX_free(ctx)
            throw CryptoError.drainingQueue(operation.failure, "ECDSA_SIG_new failed")
        }
        guard let hash = EVP_MD_CTX_new() else {
            EVP_PKEY_CTX_free(ctx)
            ECDSA_SIG_free(sig)
            throw CryptoError.drainingQueue(operation.failure, "EVP_MD_CTX_new failed")
        }
        return Slot(ctx: ctx, sig: sig, hash: hash)
    }

    /// Runs `body` on `operation`'s pool under `poolLock` (only the array, never an OpenSSL call).
    private func withPool<R>(_ operation: Operation, _ body: (inout [Slot]) -> R) -> R {
        poolLock.withLock {
            switch operation {
            case .sign: body(&signPool)
            case .verify: body(&verifyPool)
            }
        }
    }

    private func acquire(_ operation: Operation) throws(CryptoError) -> Slot {
        if let pooled = withPool(operation, { $0.popLast() }) { return pooled }
        return try makeSlot(operation)
    }

    private func release(_ slot: Slot, _ operation: Operation) {
        let kept = withPool(operation) { pool in
            guard pool.count < PKeyHandle.maxPooled else { return false }
            pool.append(slot)
            return true
        }
        if !kept { Self.free(slot) }
    }

    /// Calls `body` with the SHA-256 digest of `message` (32 bytes on the stack), made with the pre-fetched algorithm
    /// in `slot`'s reusable digest context; nil if hashing failed.
    private static func withDigest<R>(
        of message: UnsafeRawBufferPointer, in slot: Slot, _ body: (UnsafePointer<UInt8>) -> R?
    ) -> R? {
        var digest: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &digest) { digestBuf in
            let d = digestBuf.baseAddress!.assumingMemoryBound(to: UInt8.self)
            guard FetchedSHA256.shared.digest(message, into: d, context: slot.hash) else { return nil }
            return body(d)
        }
    }

    /// Hashes `message` (`withDigest`) and signs the digest with a pooled context (what `openssl speed`
    /// measures, without allocating or initialising a context per signature). Calls `body` with the slot and the
    /// DER signature (at most 72 bytes, on the stack). A slot whose OpenSSL call failed is freed, not pooled.
    private func withDERSignature<R>(
        _ message: UnsafeRawBufferPointer, _ body: (Slot, UnsafeRawBufferPointer) -> R?
    ) throws(CryptoError) -> R {
        guard forSigning else { throw CryptoError(.signingFailed, "not a private key") }
        let slot = try acquire(.sign)
        var der: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0)  // 80 bytes ≥ 72
        let result: R? = Self.withDigest(of: message, in: slot) { d in
            withUnsafeMutableBytes(of: &der) { derBuf in
                var length = derBuf.count
                let out = derBuf.baseAddress!.assumingMemoryBound(to: UInt8.self)
                guard EVP_PKEY_sign(slot.ctx, out, &length, d, 32) == 1, length <= 72 else { return nil }
                return body(slot, UnsafeRawBufferPointer(rebasing: derBuf[0..<length]))
            }
        }
        guard let result else {
            Self.free(slot)
            throw CryptoError.drainingQueue(.signingFailed, "ECDSA signing failed")
        }
        release(slot, .sign)
        return result
    }

    /// ECDSA-SHA256 over `message`, ASN.1 DER (at most 72 bytes for P-256).
    func signDER(_ message: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] {
        try withDERSignature(message) { _, der in Array(der) }
    }

    /// ECDSA-SHA256 over `message` as raw `r‖s` (32 bytes each, big-endian, zero-padded), as ES256 wants it: the
    /// DER signature goes through `ECDSASignatureEncoding.raw(fromDER:using:)` with the slot's reusable `ECDSA_SIG`.
    func signRaw(_ message: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] {
        try withDERSignature(message) { slot, der in ECDSASignatureEncoding.raw(fromDER: der, using: slot.sig) }
    }

    /// As `signRaw(_:)`, written to the 64 bytes at `out` (no array: a JWS writes it straight into its token).
    func signRaw(_ message: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>) throws(CryptoError) {
        let _: Void = try withDERSignature(message) { slot, der in
            ECDSASignatureEncoding.raw(fromDER: der, using: slot.sig, into: out) ? () : nil
        }
    }

    /// ECDSA-SHA256 verification of a DER signature: the message hashed with the pre-fetched SHA-256 in a pooled
    /// slot's digest context, the digest verified with the slot's verify-initialised context. `false` for a signature
    /// that does not verify or is not DER (a context that saw an undecodable signature is freed, not pooled).
    func verifyDER(_ signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) throws(CryptoError) -> Bool {
        guard let sig = signature.baseAddress, !signature.isEmpty else { return false }
        let slot = try acquire(.verify)
        let outcome: Int32? = Self.withDigest(of: message, in: slot) { d in
            EVP_PKEY_verify(slot.ctx, sig.assumingMemoryBound(to: UInt8.self), signature.count, d, 32)
        }
        guard let outcome else {
            Self.free(slot)
            throw CryptoError.drainingQueue(.verificationFailed, "SHA-256 of the message failed")
        }
        // 0 = bad signature, <0 = undecodable signature: both mean "does not verify"; drop the queued reason.
        OpenSSLErrorQueue.clear()
        if outcome < 0 { Self.free(slot) } else { release(slot, .verify) }
        return outcome == 1
    }

    /// The key's public half as SPKI PEM (`-----BEGIN PUBLIC KEY-----`).
    func publicKeyPEM() throws(CryptoError) -> String {
        try Self.writePEM(context: "PEM_write_bio_PUBKEY") { bio in PEM_write_bio_PUBKEY(bio, pkey) }
    }

    /// The private key as unencrypted PKCS#8 PEM.
    func privateKeyPKCS8PEM() throws(CryptoError) -> String {
        try Self.writePEM(context: "PEM_write_bio_PrivateKey") { bio in
            PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil)
        }
    }

    private static func writePEM(context: String, _ write: (OpaquePointer) -> Int32) throws(CryptoError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.drainingQueue(.openSSL, "BIO_new failed") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw CryptoError.drainingQueue(.openSSL, "\(context) failed") }
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = ccrypto_bio_get_mem_data(bio, &data)
        guard let data, length > 0 else { throw CryptoError.drainingQueue(.openSSL, "empty PEM output") }
        let bytes = UnsafeRawBufferPointer(start: data, count: length)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Reads one PEM block from `pem` with `read` (a libcrypto PEM reader on a memory BIO), requires an EC P-256
    /// key and takes ownership of it: the one parsing path for private and public keys. Frees the key on any
    /// failure; error descriptions never contain the key.
    static func parseP256(
        pem: [UInt8], forSigning: Bool, failure: String, _ read: (OpaquePointer) -> OpaquePointer?
    ) throws(CryptoError) -> PKeyHandle {
        OpenSSLErrorQueue.clear()
        let parsed: OpaquePointer? = pem.withUnsafeBufferPointer { buf in
            guard let bio = BIO_new_mem_buf(buf.baseAddress, Int32(buf.count)) else { return nil }
            defer { BIO_free(bio) }
            return read(bio)
        }
        guard let pkey = parsed else { throw CryptoError.drainingQueue(.keyParseFailed, failure) }
        do throws(CryptoError) {
            try requireP256(pkey)
        } catch {
            EVP_PKEY_free(pkey)
            throw error
        }
        return try PKeyHandle(taking: pkey, forSigning: forSigning)
    }

    /// Fails unless `pkey` is an EC key on P-256. Does not free `pkey`.
    static func requireP256(_ pkey: OpaquePointer) throws(CryptoError) {
        guard EVP_PKEY_is_a(pkey, "EC") == 1 else {
            OpenSSLErrorQueue.clear()
            throw CryptoError(.unsupportedKeyType, "key is not an EC key (App Store Connect keys are EC P-256)")
        }
        var name = [CChar](repeating: 0, count: 64)
        var nameLength = 0
        let ok = name.withUnsafeMutableBufferPointer {
            EVP_PKEY_get_group_name(pkey, $0.baseAddress, $0.count, &nameLength)
        }
        guard ok == 1 else { throw CryptoError.drainingQueue(.unsupportedCurve, "EC key without a named curve") }
        let curve = String(decoding: name.prefix(nameLength).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard curve == "prime256v1" else {
            throw CryptoError(
                .unsupportedCurve, "EC key on curve \(curve); App Store Connect keys are P-256 (prime256v1)")
        }
    }
}

/// An ECDSA P-256 private key (an App Store Connect In-App Purchase `.p8` key), parsed once and shareable.
///
/// Signing is thread-safe without locks: every signature gets its own OpenSSL context.
public struct SigningKey: Sendable {
    let handle: PKeyHandle
    /// The public key, SPKI PEM, for verification by anyone (safe to show and store).
    public let publicKeyPEM: String

    /// Parses a `.p8` PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`) P-256 key.
    ///
    /// Tolerates CRLF line ends, a missing final newline, surrounding whitespace, a key pasted as one line or with
    /// literal `\n` escapes (the body is stripped of whitespace and re-wrapped at 64 columns). Rejects empty input,
    /// encrypted keys, SEC1 `EC PRIVATE KEY` and `RSA PRIVATE KEY` blocks, non-EC keys and curves other than
    /// P-256. Error descriptions never contain the key.
    public init(pkcs8PEM text: String) throws(CryptoError) {
        let normalised = try PEMNormaliser.normalisePKCS8PrivateKey(text)
        let handle = try PKeyHandle.parseP256(
            pem: normalised, forSigning: true, failure: "OpenSSL could not parse the PKCS#8 private key"
        ) { bio in ccrypto_pem_read_private_key(bio) }
        try self.init(handle: handle)
    }

    private init(handle: PKeyHandle) throws(CryptoError) {
        self.handle = handle
        self.publicKeyPEM = try handle.publicKeyPEM()
    }

    /// A fresh random P-256 key, for tests and development (production keys come from App Store Connect).
    public static func generate() throws(CryptoError) -> SigningKey {
        guard let pkey = ccrypto_ec_p256_generate() else {
            throw CryptoError.drainingQueue(.openSSL, "P-256 key generation failed")
        }
        return try SigningKey(handle: PKeyHandle(taking: pkey, forSigning: true))
    }

    /// The private key as unencrypted PKCS#8 PEM, e.g. to seal it. Secret: never log or return it over the API.
    public func exportPKCS8PEM() throws(CryptoError) -> String { try handle.privateKeyPKCS8PEM() }

    /// The matching public key.
    public var publicKey: PublicKey { PublicKey(handle: handle) }

    /// ECDSA-SHA256 over `message`, ASN.1 DER encoded.
    public func signatureDER(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let result: Result<[UInt8], CryptoError> = message.withUnsafeBytes { buf in
            Result { () throws(CryptoError) in try handle.signDER(buf) }
        }
        return try result.get()
    }

    /// ECDSA-SHA256 over `message` as JWS ES256 wants it: raw `r‖s`, 32 bytes each, big-endian.
    public func signatureRaw(for message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let result: Result<[UInt8], CryptoError> = message.withUnsafeBytes { buf in
            Result { () throws(CryptoError) in try handle.signRaw(buf) }
        }
        return try result.get()
    }

    /// As `signatureRaw(for:)`, over the bytes at `message`, written to the 64 bytes at `out`.
    func signatureRaw(for message: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>) throws(CryptoError) {
        try handle.signRaw(message, into: out)
    }
}

/// An ECDSA P-256 public key, for verifying signatures (ours, Apple's test vectors, other implementations').
public struct PublicKey: Sendable {
    let handle: PKeyHandle

    init(handle: PKeyHandle) { self.handle = handle }

    /// Parses an SPKI PEM (`-----BEGIN PUBLIC KEY-----`) P-256 public key.
    public init(pem: String) throws(CryptoError) {
        handle = try PKeyHandle.parseP256(
            pem: Array(pem.utf8), forSigning: false, failure: "OpenSSL could not parse the public key PEM"
        ) { bio in PEM_read_bio_PUBKEY(bio, nil, nil, nil) }
    }

    /// The key as SPKI PEM.
    public var pem: String {
        get throws(CryptoError) { try handle.publicKeyPEM() }
    }

    /// `true` if `derSignature` is a valid ECDSA-SHA256 signature of `message` under this key.
    public func verify(derSignature: [UInt8], message: [UInt8]) throws(CryptoError) -> Bool {
        let result: Result<Bool, CryptoError> = derSignature.withUnsafeBytes { sig in
            message.withUnsafeBytes { msg in
                Result { () throws(CryptoError) in try handle.verifyDER(sig, message: msg) }
            }
        }
        return try result.get()
    }

    /// `true` if `rawSignature` (`r‖s`, 64 bytes) is a valid ECDSA-SHA256 signature of `message`.
    public func verify(rawSignature: [UInt8], message: [UInt8]) throws(CryptoError) -> Bool {
        guard rawSignature.count == 64 else { return false }
        return try verify(derSignature: ECDSASignatureEncoding.rawToDER(rawSignature), message: message)
    }

    /// `true` if the compact JWS is `header.payload.signature` with an ES256 signature by this key over
    /// `header.payload`. Throws `malformedJWS` if it is not a well-formed compact JWS with a 64-byte signature.
    /// Checks only the signature; inspect `CompactJWS` for header and claims.
    public func verifyJWS(compact: String) throws(CryptoError) -> Bool {
        let jws = try CompactJWS(compact: compact)
        return try verify(rawSignature: jws.signature, message: jws.signingInput)
    }
}

/// Conversions between ASN.1 DER ECDSA signatures and JWS's raw `r‖s`.
enum ECDSASignatureEncoding {
    /// Raw `r‖s` (32 bytes each, big-endian, zero-padded) of a DER signature. Decodes into a fresh `ECDSA_SIG`;
    /// signing uses `raw(fromDER:using:)` with a reusable one.
    static func derToRaw(_ der: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let sig = ECDSA_SIG_new() else {
            throw CryptoError.drainingQueue(.signingFailed, "ECDSA_SIG_new failed")
        }
        defer { ECDSA_SIG_free(sig) }
        let converted = der.withUnsafeBytes { raw(fromDER: $0, using: sig) }
        guard let converted else {
            throw CryptoError.drainingQueue(.signingFailed, "DER to raw ECDSA signature conversion failed")
        }
        return converted
    }

    /// The one DER→raw conversion: decodes `der` with `d2i_ECDSA_SIG` into `sig` (reused, not freed) and writes
    /// each component with `BN_bn2binpad(…, 32)` (leading zero bytes occur in ~1 % of signatures). `nil` if
    /// `der` is not a DER ECDSA signature of P-256 size.
    static func raw(fromDER der: UnsafeRawBufferPointer, using sig: OpaquePointer) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 64)
        let ok = out.withUnsafeMutableBufferPointer { raw(fromDER: der, using: sig, into: $0.baseAddress!) }
        return ok ? out : nil
    }

    /// As `raw(fromDER:using:)`, written to the 64 bytes at `out`; false if `der` is not such a signature.
    static func raw(
        fromDER der: UnsafeRawBufferPointer, using sig: OpaquePointer, into out: UnsafeMutablePointer<UInt8>
    )
        -> Bool
    {
        var cursor: UnsafePointer<UInt8>? = der.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var target: OpaquePointer? = sig
        guard d2i_ECDSA_SIG(&target, &cursor, der.count) != nil, let r = ECDSA_SIG_get0_r(sig),
            let s = ECDSA_SIG_get0_s(sig)
        else { return false }
        return BN_bn2binpad(r, out, 32) == 32 && BN_bn2binpad(s, out + 32, 32) == 32
    }

    static func rawToDER(_ raw: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard raw.count == 64, let sig = ECDSA_SIG_new() else {
            throw CryptoError.drainingQueue(.verificationFailed, "raw ECDSA signature must be 64 bytes")
        }
        defer { ECDSA_SIG_free(sig) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(sig, r, s) == 1 else {
            if let r { BN_free(r) }
            if let s { BN_free(s) }
            throw CryptoError.drainingQueue(.verificationFailed, "ECDSA_SIG_set0 failed")
        }
        let length = i2d_ECDSA_SIG(sig, nil)
        guard length > 0 else { throw CryptoError.drainingQueue(.verificationFailed, "i2d_ECDSA_SIG failed") }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buf -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buf.baseAddress
            return i2d_ECDSA_SIG(sig, &cursor)
        }
        guard written == length else { throw CryptoError.drainingQueue(.verificationFailed, "i2d_ECDSA_SIG failed") }
        return der
    }
}

/// Normalises pasted `.p8` text into a canonical PEM before OpenSSL sees it.
enum PEMNormaliser {
    static let header = "-----BEGIN PRIVATE KEY-----"
    static let footer = "-----END PRIVATE KEY-----"

    /// Canonical PEM bytes (header, body wrapped at 64 columns, footer, final newline) or a precise error.
    static func normalisePKCS8PrivateKey(_ text: String) throws(CryptoError) -> [UInt8] {
        let bytes = Array(text.utf8)
        // Whitespace: space, tab, CR, LF, and a leading UTF-8 BOM from some editors.
        var start = 0
        var end = bytes.count
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        let trimmed = Array(bytes[start..<end])
        guard !trimmed.isEmpty else { throw CryptoError(.emptyKey, "private key text is empty") }

        if contains(trimmed, "-----BEGIN ENCRYPTED PRIVATE KEY-----") || contains(trimmed, "Proc-Type: 4,ENCRYPTED") {
            throw CryptoError(.encryptedKey, "private key is encrypted; App Store Connect .p8 keys are not")
        }
        if contains(trimmed, "-----BEGIN EC PRIVATE KEY-----") {
            throw CryptoError(
                .unsupportedKeyFormat,
                "SEC1 'EC PRIVATE KEY' is not accepted; use the PKCS#8 .p8 file from App Store Connect")
        }
        if contains(trimmed, "-----BEGIN RSA PRIVATE KEY-----") {
            throw CryptoError(.unsupportedKeyFormat, "RSA keys are not accepted; App Store Connect keys are EC P-256")
        }
        let headerBytes = Array(header.utf8)
        let footerBytes = Array(footer.utf8)
        guard trimmed.starts(with: headerBytes) else {
            throw CryptoError(.malformedPEM, "text does not start with '\(header)'")
        }
        guard trimmed.count >= headerBytes.count + footerBytes.count,
            Array(trimmed.suffix(footerBytes.count)) == footerBytes
        else { throw CryptoError(.malformedPEM, "text does not end with '\(footer)'") }

        // Body: drop whitespace and literal "\n" / "\r" escapes (keys pasted through JSON or env files).
        let rawBody = trimmed[headerBytes.count..<(trimmed.count - footerBytes.count)]
        var body: [UInt8] = []
        body.reserveCapacity(rawBody.count)
        var index = rawBody.startIndex
        while index < rawBody.endIndex {
            let char = rawBody[index]
            if isSpace(char) {
                index += 1
                continue
            }
            if char == UInt8(ascii: "\\"), index + 1 < rawBody.endIndex,
                rawBody[index + 1] == UInt8(ascii: "n") || rawBody[index + 1] == UInt8(ascii: "r")
            {
                index += 2
                continue
            }
            guard isBase64(char) else {
                throw CryptoError(.malformedPEM, "key body contains a character that is not base64")
            }
            body.append(char)
            index += 1
        }
        guard !body.isEmpty else { throw CryptoError(.emptyKey, "private key body is empty") }
        guard body.count % 4 == 0 else { throw CryptoError(.malformedPEM, "key body length is not a multiple of 4") }

        var out = headerBytes
        out.append(UInt8(ascii: "\n"))
        var offset = 0
        while offset < body.count {
            let next = min(offset + 64, body.count)
            out.append(contentsOf: body[offset..<next])
            out.append(UInt8(ascii: "\n"))
            offset = next
        }
        out.append(contentsOf: footerBytes)
        out.append(UInt8(ascii: "\n"))
        return out
    }

    private static func isSpace(_ char: UInt8) -> Bool {
        char == 0x20 || char == 0x09 || char == 0x0A || char == 0x0D || char == 0x0B || char == 0x0C
    }

    private static func isBase64(_ char: UInt8) -> Bool {
        switch char {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="):
            return true
        default:
            return false
        }
    }

    private static func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let pattern = Array(needle.utf8)
        guard pattern.count <= haystack.count else { return false }
        for offset in 0...(haystack.count - pattern.count) where haystack[offset] == pattern[0] {
            if haystack[offset..<(offset + pattern.count)].elementsEqual(pattern) { return true }
        }
        return false
    }
}
