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

extension JWSClaimValue {
    /// About how many bytes the value takes in JSON (for reserving; escaping may take more).
    var estimatedCount: Int {
        switch self {
        case .string(let text): text.utf8.count + 2
        case .integer: 20
        case .bool: 5
        }
    }
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
        Self.appendMember(name, value, to: &bytes)
    }

    /// `"name":value`, without a separator before it.
    static func appendMember(_ name: String, _ value: JWSClaimValue, to out: inout [UInt8]) {
        appendString(name, to: &out)
        out.append(UInt8(ascii: ":"))
        switch value {
        case .string(let text): appendString(text, to: &out)
        case .integer(let number): appendInteger(number, to: &out)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
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
