import CCrypto
import Foundation

// Randomness for keys, nonces and codes: OpenSSL's CSPRNG (`RAND_bytes`), read directly or through one buffered
// reader (`RandomBytePool`) that both the code generator and the per-thread nonce source use.

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

/// A 4 KiB buffer of CSPRNG output handed out a few bytes at a time: one `RAND_bytes` call serves 512 64-bit values
/// or 256 nonces, instead of a syscall and a DRBG lock each.
///
/// If `RAND_bytes` ever fails, the buffer is refilled from the system generator (`getrandom`), which is also
/// cryptographically secure. Bytes handed out are zeroed in the buffer, so a later memory disclosure cannot reveal
/// past values. Not thread-safe: each instance belongs to one generator or one thread.
final class RandomBytePool {
    private static let size = 4096
    private var bytes = [UInt8](repeating: 0, count: RandomBytePool.size)
    private var offset = RandomBytePool.size

    /// The next `MemoryLayout<T>.size` random bytes as a `T`.
    @inline(__always)
    func next<T: BitwiseCopyable>(_ type: T.Type) -> T {
        let count = MemoryLayout<T>.size
        if offset + count > bytes.count { refill() }
        let value = bytes.withUnsafeMutableBytes { buffer in
            let used = UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<(offset + count)])
            let value = used.loadUnaligned(as: T.self)
            used.initializeMemory(as: UInt8.self, repeating: 0)
            return value
        }
        offset += count
        return value
    }

    private func refill() {
        do {
            try SecureRandom.fill(&bytes)
        } catch {
            var system = SystemRandomNumberGenerator()
            bytes.withUnsafeMutableBytes { buffer in
                for index in stride(from: 0, to: buffer.count, by: 8) {
                    buffer.storeBytes(of: system.next(), toByteOffset: index, as: UInt64.self)
                }
            }
        }
        offset = 0
    }
}

/// A `RandomNumberGenerator` over `RAND_bytes` through a `RandomBytePool`, so drawing millions of values (one-time
/// offer codes) costs one OpenSSL call per 512 values.
///
/// Copies share one pool (a reference), so a copied generator never repeats its original's output. Not
/// `Sendable`: make one per task.
public struct SecureRandomGenerator: RandomNumberGenerator {
    private let pool = RandomBytePool()

    /// A generator with an empty buffer (filled on first use).
    public init() {}

    /// The next 64 random bits.
    public mutating func next() -> UInt64 { pool.next(UInt64.self) }
}

extension UUID {
    /// A random (version 4) UUID from OpenSSL's CSPRNG, through a per-thread `RandomBytePool`.
    ///
    /// Foundation's `UUID()` opens and reads `/dev/urandom` on every call on Linux, and a `RAND_bytes` call per
    /// nonce costs a syscall and a DRBG lock; one 4 KiB refill serves 256 nonces. (A forked child would share
    /// the parent's unused buffer: OfferGate never forks.)
    public static func secureRandom() -> UUID {
        let bytes = ThreadRandomPool.current.next(uuid_t.self)
        return UUID(
            uuid: (
                bytes.0, bytes.1, bytes.2, bytes.3, bytes.4, bytes.5, (bytes.6 & 0x0F) | 0x40, bytes.7,
                (bytes.8 & 0x3F) | 0x80, bytes.9, bytes.10, bytes.11, bytes.12, bytes.13, bytes.14, bytes.15
            ))
    }

    /// A time-ordered (version 7, RFC 9562) UUID: the Unix time of `date` in milliseconds in its first 48 bits, then
    /// 74 random bits from the same per-thread CSPRNG buffer as `secureRandom()`.
    ///
    /// For the ids of rows appended at a high rate (signature nonces, redemption and claim ids), which are the
    /// second column of their table's primary key: random ids insert into a random leaf of that B-tree, so each insert
    /// touches a different page (after a checkpoint, a full-page image in the WAL each), while ids that grow with time
    /// land on the last leaves (docs/perf/b5-sign.md, session 25). 74 random bits per millisecond keep them
    /// unguessable and unique; they reveal only their creation time, which each of these rows carries anyway.
    public static func timeOrdered(at date: Date = Date()) -> UUID {
        let milliseconds = UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded(.down)))
        let random = ThreadRandomPool.current.next(uuid_t.self)
        func byte(_ shift: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: milliseconds >> shift) }
        return UUID(
            uuid: (
                byte(40), byte(32), byte(24), byte(16), byte(8), byte(0), (random.6 & 0x0F) | 0x70, random.7,
                (random.8 & 0x3F) | 0x80, random.9, random.10, random.11, random.12, random.13, random.14, random.15
            ))
    }

    /// The canonical lowercase form (`UUID.uuidString` is uppercase, which Apple rejects). Formatted directly:
    /// `uuidString` goes through `sprintf` on Linux, a measurable share of a signature's cost.
    public var lowercasedString: String {
        String(unsafeUninitializedCapacity: 36) { out in writeLowercase(to: out.baseAddress!) }
    }

    /// Appends the canonical lowercase form's 36 ASCII bytes to `bytes` (no string in between).
    func appendLowercase(to bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: 36))
        bytes.withUnsafeMutableBufferPointer { whole in _ = writeLowercase(to: whole.baseAddress! + start) }
    }

    /// Writes the canonical lowercase form (36 bytes) at `out`; returns 36.
    private func writeLowercase(to out: UnsafeMutablePointer<UInt8>) -> Int {
        withUnsafeBytes(of: uuid) { raw in
            var position = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                out[position] = Hex.digit(raw[index] >> 4)
                out[position + 1] = Hex.digit(raw[index] & 0x0F)
                position += 2
            }
            return position
        }
    }
}

/// The calling thread's `RandomBytePool` for nonces (owned by one thread through a pthread key; never shared).
enum ThreadRandomPool {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<RandomBytePool>.fromOpaque(pointer).release() }
        }
        return key
    }()

    static var current: RandomBytePool {
        if let existing = pthread_getspecific(key) {
            return Unmanaged<RandomBytePool>.fromOpaque(existing).takeUnretainedValue()
        }
        let pool = RandomBytePool()
        pthread_setspecific(key, Unmanaged.passRetained(pool).toOpaque())
        return pool
    }
}
