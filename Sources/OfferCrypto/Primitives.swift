import ByteCoding
import CCrypto

/// The SHA-256 implementation, fetched from OpenSSL's default provider once.
///
/// OpenSSL 3's one-shot `SHA256()` looks the algorithm up by name on every call (≈0.8 µs for a 111-byte input
/// here, more than the hashing itself); an explicitly fetched `EVP_MD` avoids that.
///
/// Invariant (why `@unchecked Sendable` is sound): the `EVP_MD` is fetched once, never mutated and never freed (it
/// lives for the process); OpenSSL documents fetched algorithm objects as shareable across threads.
final class FetchedSHA256: @unchecked Sendable {
    static let shared = FetchedSHA256()
    let md: OpaquePointer?

    private init() {
        md = EVP_MD_fetch(nil, "SHA256", nil)
        if md == nil { OpenSSLErrorQueue.clear() }
    }

    /// Hashes `input` into `out` (32 bytes). Falls back to the built-in `EVP_sha256()` if fetching failed.
    func digest(_ input: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>) -> Bool {
        var length: UInt32 = 32
        return EVP_Digest(input.baseAddress, input.count, out, &length, md ?? EVP_sha256(), nil) == 1
            && length == 32
    }

    /// Hashes `input` into `out` with a caller-owned, reusable `EVP_MD_CTX` (no allocation).
    func digest(_ input: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>, context: OpaquePointer) -> Bool
    {
        var length: UInt32 = 32
        return EVP_DigestInit_ex(context, md ?? EVP_sha256(), nil) == 1
            && EVP_DigestUpdate(context, input.baseAddress, input.count) == 1
            && EVP_DigestFinal_ex(context, out, &length) == 1 && length == 32
    }
}

/// SHA-256 through libcrypto.
public enum SHA256 {
    /// The 32-byte SHA-256 digest of `bytes`.
    public static func hash(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let done: [UInt8]? = bytes.withContiguousStorageIfAvailable { hash(raw: UnsafeRawBufferPointer($0)) }
        if let done { return done }
        return Array(bytes).withUnsafeBytes { hash(raw: $0) }
    }

    private static func hash(raw: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        let ok = digest.withUnsafeMutableBufferPointer { FetchedSHA256.shared.digest(raw, into: $0.baseAddress!) }
        if !ok {
            // EVP_Digest only fails on allocation failure; the one-shot function is the fallback.
            OpenSSLErrorQueue.clear()
            _ = digest.withUnsafeMutableBufferPointer { out in
                CCrypto.SHA256(raw.baseAddress?.assumingMemoryBound(to: UInt8.self), raw.count, out.baseAddress)
            }
        }
        return digest
    }

    /// The SHA-256 digest of the UTF-8 bytes of `text`.
    public static func hash(_ text: String) -> [UInt8] { hash(Array(text.utf8)) }

    /// The SHA-256 digest of `bytes` as 64 lowercase hex digits.
    public static func hex(_ bytes: some Collection<UInt8>) -> String { Hex.encode(hash(bytes)) }

    /// The SHA-256 digest of the UTF-8 bytes of `text` as 64 lowercase hex digits.
    public static func hex(_ text: String) -> String { Hex.encode(hash(text)) }
}

/// HMAC-SHA256 through libcrypto.
public enum HMACSHA256 {
    /// The 32-byte HMAC-SHA256 of `message` under `key`. Throws rather than ever returning a default value.
    public static func authenticationCode(for message: [UInt8], key: [UInt8]) throws(CryptoError) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        let result = key.withUnsafeBufferPointer { keyBuf in
            message.withUnsafeBufferPointer { msgBuf in
                mac.withUnsafeMutableBufferPointer { out in
                    HMAC(
                        EVP_sha256(), keyBuf.baseAddress, Int32(keyBuf.count), msgBuf.baseAddress, msgBuf.count,
                        out.baseAddress, &length) != nil
                }
            }
        }
        guard result, length == 32 else { throw CryptoError.drainingQueue(.openSSL, "HMAC-SHA256 failed") }
        return mac
    }
}

/// Lowercase hexadecimal (`ByteCoding.Hex`, the one copy every module shares), re-exported under the name
/// OfferCrypto has always offered.
public typealias Hex = ByteCoding.Hex

/// Constant-time comparison (`CRYPTO_memcmp`), for MACs, API key hashes and tokens.
public enum ConstantTime {
    /// `true` when both have the same length and the same bytes. Time depends on the length only.
    public static func equals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.isEmpty { return true }
        return lhs.withUnsafeBytes { a in
            rhs.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0 }
        }
    }
}
