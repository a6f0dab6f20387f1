// ByteCoding: the byte-level text encodings several adapters share (hex; JSON string escaping), one copy each.
//
// A leaf module: it imports nothing (not even Foundation), does no IO and keeps no state, so any layer may use it.

/// Lowercase hexadecimal.
public enum Hex {
    /// The sixteen lowercase digits, as ASCII bytes.
    public static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Lowercase hex of `bytes`.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        append(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the lowercase hex digits of `bytes` (two per byte) to `out`.
    @inlinable
    public static func append(_ bytes: some Collection<UInt8>, to out: inout [UInt8]) {
        for byte in bytes {
            out.append(digit(byte >> 4))
            out.append(digit(byte & 0x0F))
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
