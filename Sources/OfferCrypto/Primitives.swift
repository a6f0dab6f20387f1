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

/// Lowercase hexadecimal.
public enum Hex {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Lowercase hex of `bytes`.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Bytes of a hex string (either case); `nil` if it is not hex of even length.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = nibble(chars[index]), let low = nibble(chars[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ char: UInt8) -> UInt8? {
        switch char {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return char - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return char - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return char - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

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

/// Cryptographically secure random bytes from OpenSSL's CSPRNG (`RAND_bytes`).
public enum SecureRandom {
    /// `count` random bytes.
    public static func bytes(count: Int) throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        try fill(&out)
        return out
    }

    /// Overwrites `buffer` with random bytes.
    public static func fill(_ buffer: inout [UInt8]) throws(CryptoError) {
        if buffer.isEmpty { return }
        let ok = buffer.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        if ok != 1 { throw CryptoError.drainingQueue(.randomFailed, "RAND_bytes failed") }
    }
}

/// A `RandomNumberGenerator` over `RAND_bytes` that refills a 4 KiB buffer, so drawing millions of values (one-time
/// offer codes) costs one OpenSSL call per 512 values.
///
/// Copies share one buffer (a reference), so a copied generator never repeats its original's output. Not
/// `Sendable`: make one per task. If `RAND_bytes` ever fails, the buffer is refilled from the system generator
/// (`getrandom`), which is also cryptographically secure.
public struct SecureRandomGenerator: RandomNumberGenerator {
    private final class Buffer {
        var words = [UInt64](repeating: 0, count: 512)
        var index = 512

        func refill() {
            let ok = words.withUnsafeMutableBytes {
                RAND_bytes($0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32($0.count))
            }
            if ok != 1 {
                OpenSSLErrorQueue.clear()
                var system = SystemRandomNumberGenerator()
                for i in words.indices { words[i] = system.next() }
            }
            index = 0
        }
    }

    private let buffer = Buffer()

    /// A generator with an empty buffer (filled on first use).
    public init() {}

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        if buffer.index == buffer.words.count { buffer.refill() }
        let value = buffer.words[buffer.index]
        buffer.words[buffer.index] = 0
        buffer.index += 1
        return value
    }
}
