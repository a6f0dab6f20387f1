/// JSON string literals as exact bytes (RFC 8259), shared by the JSON-RPC serializer and the JWS writer.
public enum JSONString {
    /// Appends `string` as a quoted JSON string literal to `out`.
    ///
    /// Escapes `"` and `\`, writes the control characters U+0000-U+001F as `\b \f \n \r \t` or `\u00xx`
    /// (lowercase hex), and copies every other character, non-ASCII included, as its UTF-8 bytes (runs that need
    /// no escaping are copied in bulk), so the output is byte-for-byte predictable. Runs are found eight bytes at a
    /// time (`mayNeedEscaping`): most strings written are ids, prices and JWS (hundreds of bytes), none escaped.
    @inlinable
    public static func append(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = string
        s.withUTF8 { bytes in
            var runStart = 0
            var i = 0
            while i < bytes.count {
                if i + 8 <= bytes.count,
                    !mayNeedEscaping(UnsafeRawPointer(bytes.baseAddress! + i).loadUnaligned(as: UInt64.self))
                {
                    i += 8
                    continue
                }
                let byte = bytes[i]
                i += 1
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                let index = i - 1
                if runStart < index {
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                }
                runStart = index + 1
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case 0x22: out.append(0x22)
                case 0x5C: out.append(0x5C)
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                case 0x08: out.append(UInt8(ascii: "b"))
                case 0x0C: out.append(UInt8(ascii: "f"))
                default:
                    out.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30, Hex.digit(byte >> 4), Hex.digit(byte & 0xF)])
                }
            }
            if runStart < bytes.count {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// False when none of the eight bytes of `word` is below 0x20, `"` or `\` (then none needs escaping); true when
    /// one may. Exact for the word as a whole (the classic "has a byte less than n" and "has a zero byte" tests:
    /// a byte's borrow can mark the byte above it, never a word with no such byte).
    @inlinable
    static func mayNeedEscaping(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func hasZeroByte(_ x: UInt64) -> Bool { (x &- ones) & ~x & highs != 0 }
        let control = (word &- ones &* 0x20) & ~word & highs != 0
        return control || hasZeroByte(word ^ (ones &* 0x22)) || hasZeroByte(word ^ (ones &* 0x5C))
    }

    /// True when all eight bytes of `word` stand for themselves inside a JSON string literal: ASCII, none below 0x20,
    /// none `"` or `\`. A parser skips such words whole (a JWS in a request is thousands of them).
    @inlinable
    public static func isPlainASCII(_ word: UInt64) -> Bool {
        word & 0x8080_8080_8080_8080 == 0 && !mayNeedEscaping(word)
    }
}

/// Decimal integers as ASCII digits, written without an intermediate `String` (JSON numbers, the V1 payload's
/// timestamp).
public enum DecimalInteger {
    /// Appends the decimal digits of `value` (with a leading `-` when negative) to `out`.
    @inlinable
    public static func append(_ value: Int64, to out: inout [UInt8]) {
        if value >= 0 && value < 10 {
            out.append(UInt8(truncatingIfNeeded: value) + 0x30)
            return
        }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch, enough for 20 digits
        withUnsafeMutableBytes(of: &digits) { scratch in
            var position = scratch.count
            while magnitude > 0 {
                position -= 1
                scratch[position] = UInt8(truncatingIfNeeded: magnitude % 10) + 0x30
                magnitude /= 10
            }
            if value < 0 { out.append(UInt8(ascii: "-")) }
            out.append(contentsOf: scratch[position...])
        }
    }
}
