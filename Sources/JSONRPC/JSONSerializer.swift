// JSONValue -> bytes.

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

    static func appendInt(_ value: Int64, to out: inout [UInt8]) {
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

    static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends a quoted, escaped JSON string.
    public static func appendString(_ string: String, to out: inout [UInt8]) {
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
                    out.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            if runStart < bytes.count {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
