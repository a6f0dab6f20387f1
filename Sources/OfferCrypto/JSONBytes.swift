import ByteCoding

/// A JSON value for the exact-bytes JWS writer: only what Apple's tokens need.
public enum JWSClaimValue: Sendable, Equatable {
    /// A JSON string (escaped per RFC 8259; non-ASCII written as UTF-8).
    case string(String)
    /// A JSON integer.
    case integer(Int64)
    /// A JSON boolean.
    case bool(Bool)
}

/// Writes a flat JSON object with members in the given order, as exact bytes.
///
/// Escapes `"` and `\`, writes control characters as `\b \f \n \r \t` or `\u00XX`, and writes every other
/// character (including non-ASCII) as its UTF-8 bytes, so the output is byte-for-byte predictable.
struct JSONObjectWriter {
    private(set) var bytes: [UInt8]
    private var first = true

    init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    mutating func member(_ name: String, _ value: JWSClaimValue) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        Self.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        switch value {
        case .string(let text): Self.appendString(text, to: &bytes)
        case .integer(let number): Self.appendInteger(number, to: &bytes)
        case .bool(let flag): bytes.append(contentsOf: (flag ? "true" : "false").utf8)
        }
    }

    mutating func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// Decimal digits of `number` without an intermediate `String` (`ByteCoding.DecimalInteger`, shared with the
    /// JSON-RPC serializer).
    static func appendInteger(_ number: Int64, to out: inout [UInt8]) {
        DecimalInteger.append(number, to: &out)
    }

    /// A quoted JSON string (`ByteCoding.JSONString`, the one escaping shared with the JSON-RPC serializer).
    static func appendString(_ text: String, to out: inout [UInt8]) {
        JSONString.append(text, to: &out)
    }
}
