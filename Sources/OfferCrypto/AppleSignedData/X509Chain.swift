import CCrypto
import Foundation

/// One parsed X.509 certificate (`X509 *`) and the DER it came from.
///
/// Invariant (why `@unchecked Sendable` is sound): `pointer` is created in `parse` and freed only in `deinit`; after
/// `parse` it is only read (`X509_cmp_time`, `X509_get_ext_by_OBJ`, `X509_get0_pubkey`, `X509_cmp`, and as the
/// target or an untrusted certificate of one `X509_verify_cert`, whose internal extension cache OpenSSL 3 fills
/// under its own lock). Nothing mutates it after it is shared.
final class X509Certificate: @unchecked Sendable {
    let pointer: OpaquePointer
    let der: [UInt8]

    private init(taking pointer: OpaquePointer, der: [UInt8]) {
        self.pointer = pointer
        self.der = der
    }

    deinit { X509_free(pointer) }

    /// Parses DER with `d2i_X509`; `nil` if OpenSSL refuses it or if bytes follow the certificate.
    static func parse(der: [UInt8]) -> X509Certificate? {
        guard !der.isEmpty else { return nil }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buf in
            guard let base = buf.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let cert = d2i_X509(nil, &cursor, buf.count) else { return nil }
            guard let cursor, cursor == base + buf.count else {
                X509_free(cert)
                return nil
            }
            return cert
        }
        guard let parsed else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        return X509Certificate(taking: parsed, der: der)
    }

    /// Whether the certificate is inside its validity period at `time`, by exactly the rule `X509_verify_cert`
    /// applies (`X509_cmp_time`: notBefore ≤ time < notAfter; an unreadable field is invalid).
    func isValid(at time: time_t) -> Bool {
        var time = time
        guard let notBefore = X509_get0_notBefore(pointer), let notAfter = X509_get0_notAfter(pointer) else {
            return false
        }
        return X509_cmp_time(notBefore, &time) == -1 && X509_cmp_time(notAfter, &time) == 1
    }

    /// Whether the certificate carries an extension with this OID (critical or not, any value).
    func hasExtension(_ oid: ASN1ObjectIdentifier) -> Bool {
        X509_get_ext_by_OBJ(pointer, oid.pointer, -1) >= 0
    }

    /// The certificate's public key as a P-256 `PublicKey` (through SPKI PEM, so OfferCrypto's one key type and its
    /// P-256 check are reused); `nil` for any other key.
    func p256PublicKey() -> PublicKey? {
        guard let pkey = X509_get0_pubkey(pointer), let bio = BIO_new(BIO_s_mem()) else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PUBKEY(bio, pkey) == 1 else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        var data: UnsafeMutablePointer<CChar>? = nil
        let length = ccrypto_bio_get_mem_data(bio, &data)
        guard let data, length > 0 else { return nil }
        let pem = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
        return try? PublicKey(pem: pem)
    }
}

/// An `ASN1_OBJECT` made once from dotted text.
///
/// Invariant (why `@unchecked Sendable` is sound): created in `init`, freed in `deinit`, only read in between
/// (`X509_get_ext_by_OBJ` takes it as `const`).
final class ASN1ObjectIdentifier: @unchecked Sendable {
    let pointer: OpaquePointer
    let dotted: String

    init(_ dotted: String) throws(CryptoError) {
        guard let object = OBJ_txt2obj(dotted, 1) else {
            throw CryptoError.drainingQueue(.openSSL, "OBJ_txt2obj failed for \(dotted)")
        }
        self.pointer = object
        self.dotted = dotted
    }

    deinit { ASN1_OBJECT_free(pointer) }
}

/// Why a chain did not verify (becomes `invalid_certificate_chain` with this text).
struct ChainFailure: Error {
    let context: String
    var openSSL: [String] = []
}

/// The pinned roots in an `X509_STORE`, and chain verification against them with OpenSSL's RFC 5280 path
/// validation (`X509_verify_cert`), strict mode as Apple's library sets it, at a given time.
///
/// Invariant (why `@unchecked Sendable` is sound): the store is filled in `init` and never changed afterwards; OpenSSL
/// allows one `X509_STORE` to back any number of concurrent `X509_STORE_CTX` (each verification makes its own
/// context, whose parameters, time included, are the context's own copy). Freed only in `deinit`.
final class PinnedRootStore: @unchecked Sendable {
    private let store: OpaquePointer
    /// The pinned roots (also held by the store).
    let roots: [X509Certificate]

    /// A store trusting exactly `roots` (each must be a self-issued CA certificate OpenSSL can parse).
    init(roots: [X509Certificate]) throws(CryptoError) {
        guard let store = X509_STORE_new() else { throw CryptoError.drainingQueue(.openSSL, "X509_STORE_new failed") }
        self.store = store
        self.roots = roots
        for root in roots {
            // Adding the same certificate twice is not an error in OpenSSL 3 (it is ignored).
            guard X509_STORE_add_cert(store, root.pointer) == 1 else {
                throw CryptoError.drainingQueue(.openSSL, "X509_STORE_add_cert failed")
            }
        }
        guard X509_STORE_set_flags(store, UInt(X509_V_FLAG_X509_STRICT)) == 1 else {
            throw CryptoError.drainingQueue(.openSSL, "X509_STORE_set_flags failed")
        }
    }

    deinit { X509_STORE_free(store) }

    /// Verifies leaf ← intermediate ← pinned root at `time` (seconds since the epoch) and returns the pinned root the
    /// chain ends in. The chain OpenSSL builds must be exactly these three certificates: a leaf issued by a root
    /// directly, or an intermediate that OpenSSL does not use, fails.
    func verify(leaf: X509Certificate, intermediate: X509Certificate, at time: time_t) -> Result<
        X509Certificate, ChainFailure
    > {
        OpenSSLErrorQueue.clear()
        guard let untrusted = ccrypto_sk_x509_new_null() else {
            return .failure(ChainFailure(context: "sk_X509_new_null failed", openSSL: OpenSSLErrorQueue.drain()))
        }
        defer { ccrypto_sk_x509_free(untrusted) }  // frees the stack only; the certificates stay ours
        guard ccrypto_sk_x509_push(untrusted, intermediate.pointer) > 0, let ctx = X509_STORE_CTX_new() else {
            return .failure(ChainFailure(context: "cannot set up verification", openSSL: OpenSSLErrorQueue.drain()))
        }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, store, leaf.pointer, untrusted) == 1, let param = X509_STORE_CTX_get0_param(ctx)
        else {
            return .failure(ChainFailure(context: "X509_STORE_CTX_init failed", openSSL: OpenSSLErrorQueue.drain()))
        }
        X509_VERIFY_PARAM_set_time(param, time)
        let verified = X509_verify_cert(ctx)
        guard verified == 1 else {
            let code = X509_STORE_CTX_get_error(ctx)
            let depth = X509_STORE_CTX_get_error_depth(ctx)
            let text = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
            return .failure(
                ChainFailure(
                    context: "certificate chain does not verify at signedDate: \(text) (depth \(depth))",
                    openSSL: OpenSSLErrorQueue.drain()))
        }
        guard let chain = X509_STORE_CTX_get0_chain(ctx), ccrypto_sk_x509_num(chain) == 3,
            let built0 = ccrypto_sk_x509_value(chain, 0), let built1 = ccrypto_sk_x509_value(chain, 1),
            let built2 = ccrypto_sk_x509_value(chain, 2)
        else {
            return .failure(ChainFailure(context: "verified chain is not leaf, intermediate, root"))
        }
        guard X509_cmp(built0, leaf.pointer) == 0, X509_cmp(built1, intermediate.pointer) == 0,
            let root = roots.first(where: { X509_cmp(built2, $0.pointer) == 0 })
        else {
            return .failure(ChainFailure(context: "verified chain is not leaf, intermediate, pinned root"))
        }
        return .success(root)
    }
}

/// Certificates from an `--apple-root-cert` file: DER (one certificate) or PEM (one or more `CERTIFICATE` blocks),
/// parsed by OpenSSL.
public enum AppleRootCertificateFile {
    /// The DER of every certificate in `contents`. Throws `malformedPEM` / `keyParseFailed` (the module's error
    /// codes for unreadable PEM and unparseable DER) when nothing usable is found or trailing data is not a
    /// certificate.
    public static func certificates(fromFileContents contents: [UInt8]) throws(CryptoError) -> [[UInt8]] {
        let firstNonSpace = contents.first { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D) }
        guard firstNonSpace == UInt8(ascii: "-") else {
            guard let cert = X509Certificate.parse(der: contents) else {
                throw CryptoError(.keyParseFailed, "root certificate file is neither PEM nor one DER certificate")
            }
            return [cert.der]
        }
        OpenSSLErrorQueue.clear()
        var found: [[UInt8]] = []
        let ok: Bool = contents.withUnsafeBufferPointer { buf in
            guard let bio = BIO_new_mem_buf(buf.baseAddress, Int32(clamping: buf.count)) else { return false }
            defer { BIO_free(bio) }
            while let cert = ccrypto_pem_read_x509(bio) {
                defer { X509_free(cert) }
                let length = i2d_X509(cert, nil)
                guard length > 0 else { return false }
                var der = [UInt8](repeating: 0, count: Int(length))
                let written = der.withUnsafeMutableBufferPointer { out -> Int32 in
                    var cursor: UnsafeMutablePointer<UInt8>? = out.baseAddress
                    return i2d_X509(cert, &cursor)
                }
                guard written == length else { return false }
                found.append(der)
            }
            // The loop ends at end of input (PEM_R_NO_START_LINE) or at a block that is not a certificate.
            let last = ERR_peek_last_error()
            let endOfInput = ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE
            OpenSSLErrorQueue.clear()
            return endOfInput || last == 0
        }
        guard ok, !found.isEmpty else {
            throw CryptoError(.malformedPEM, "root certificate PEM holds no readable CERTIFICATE block")
        }
        return found
    }
}
