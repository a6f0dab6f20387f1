/// JSON string literals as exact bytes (RFC 8259), shared by the JSON-RPC serializer and the JWS writer.
public enum JSONString {
    /// Appends `string` as a quoted JSON string literal to `out`.
    ///
    /// Escapes `"` and `\`, writes the control characters U+0000-U+001F as `\b \f \n \r \t` or `\u00xx`
    /// (lowercase hex), and copies every other character, non-ASCII included, as its UTF-8 bytes (runs that need
    /// no escaping are copied in bulk), so the output is byte-for-byte predictable.
    @inlinable
    public static func append(_ string: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = string
        s.withUTF8 { bytes in
            var runStart = 0
            for i in 0..<bytes.count {
                let byte = bytes[i]
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
                runStart = i + 1
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
