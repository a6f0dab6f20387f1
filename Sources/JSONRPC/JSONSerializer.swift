// JSONValue -> bytes.
import ByteCoding

/// Serializes `JSONValue`s to compact UTF-8 JSON.
public enum JSONSerializer {
    /// Serialization options.
    public struct Options: Sendable, Hashable {
        /// Emit object members sorted by key (byte order of UTF-8) instead of their stored order.
        public var sortedKeys: Bool
        public init(sortedKeys: Bool = false) { self.sortedKeys = sortedKeys }
    }

    /// The compact JSON bytes of `value` (no trailing newline).
    public static func serialize(_ value: JSONValue, options: Options = Options()) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        append(value, to: &out, options: options)
        return out
    }

    /// Appends the compact JSON bytes of `value` to `out`.
    public static func append(_ value: JSONValue, to out: inout [UInt8], options: Options = Options()) {
        switch value {
        case .null: appendASCII("null", to: &out)
        case .bool(let b): appendASCII(b ? "true" : "false", to: &out)
        case .number(let n):
            switch n.storage {
            case .int(let i): appendInt(i, to: &out)
            case .text(let text): out.append(contentsOf: text.utf8)
            }
        case .string(let s): appendString(s, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                append(element, to: &out, options: options)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            var first = true
            let members =
                options.sortedKeys
                ? object.members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) } : object.members
            for member in members {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                appendString(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                append(member.value, to: &out, options: options)
            }
            out.append(UInt8(ascii: "}"))
        case .encoded(let encoded):
            if options.sortedKeys {
                append(encoded.value, to: &out, options: options)
            } else {
                out.append(contentsOf: encoded.bytes)
            }
        }
    }

    @inline(__always) static func appendASCII(_ text: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// The decimal digits of `value` (`ByteCoding.DecimalInteger`, shared with the JWS writer).
    @inline(__always) static func appendInt(_ value: Int64, to out: inout [UInt8]) {
        DecimalInteger.append(value, to: &out)
    }

    /// Appends a quoted, escaped JSON string (`ByteCoding.JSONString`, the one escaping shared with the JWS writer).
    @inlinable
    public static func appendString(_ string: String, to out: inout [UInt8]) {
        JSONString.append(string, to: &out)
    }
}
