// ByteCoding: the byte-level text encodings several adapters share (hex; JSON string escaping), one copy each.
//
// A leaf module: it imports nothing (not even Foundation), does no IO and keeps no state, so any layer may use it.

/// Lowercase hexadecimal.
public enum Hex {
    /// Lowercase hex of `bytes`.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        // Contiguous bytes (every caller's `[UInt8]`) are read through a pointer: iterated generically from another
        // module, each element cost a heap allocation (32 per SHA-256 digest, a third of a redemption's mallocs).
        if let text = bytes.withContiguousStorageIfAvailable(encode(contiguous:)) { return text }
        return Array(bytes).withUnsafeBufferPointer(encode(contiguous:))
    }

    /// Lowercase hex of `bytes`, written straight into the string's own storage.
    static func encode(contiguous bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            var at = 0
            for byte in bytes {
                out[at] = digit(byte >> 4)
                out[at + 1] = digit(byte & 0x0F)
                at += 2
            }
            return at
        }
    }

    /// The lowercase ASCII digit of a nibble (`0...15`).
    @inlinable
    public static func digit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + (nibble - 10)
    }

    /// Bytes of a hex string (either case); `nil` if it is not hex of even length.
    public static func decode(_ text: String) -> [UInt8]? { decode(text.utf8) }

    /// Bytes of hex ASCII digits (either case); `nil` if they are not hex of even length.
    @inlinable
    public static func decode(_ chars: some Collection<UInt8>) -> [UInt8]? {
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var index = chars.startIndex
        while index != chars.endIndex {
            let next = chars.index(after: index)
            guard let high = nibble(chars[index]), let low = nibble(chars[next]) else { return nil }
            out.append(high << 4 | low)
            index = chars.index(after: next)
        }
        return out
    }

    /// The value of one hex digit (either case), `nil` for any other byte.
    @inlinable
    public static func nibble(_ char: UInt8) -> UInt8? {
        switch char {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return char - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return char - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return char - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
