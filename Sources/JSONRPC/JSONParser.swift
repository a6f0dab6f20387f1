// A strict, non-allocating-where-possible RFC 8259 parser over raw bytes.
//
// Decisions (documented in the module README section of API docs):
// - Duplicate object keys are rejected (ambiguous input is a parse error, not "last wins").
// - Escaped lone surrogates (`"\uD800"`) are rejected; so are invalid UTF-8, raw control characters in strings,
//   leading zeros, NaN/Infinity, trailing garbage and nesting deeper than `maxDepth`.
// - Recursion depth is bounded by `maxDepth` (hard cap 1,024), so hostile nesting produces an error, never a
//   stack overflow.

/// Parses JSON text.
public enum JSONParsing {
    /// The default maximum nesting depth of arrays/objects.
    public static let defaultMaxDepth = 64
    /// The largest accepted `maxDepth` (keeps recursion bounded on small thread stacks).
    public static let maxDepthCap = 1_024

    /// `maxDepth` as every parser runs it: at least 1, at most ``maxDepthCap``.
    static func depthLimit(_ maxDepth: Int) -> Int { min(max(maxDepth, 1), maxDepthCap) }

    /// Parses one JSON value from `bytes` (whitespace around it allowed, nothing else).
    /// - Throws: `JSONRPCError` with code `.invalidJSON` or `.nestingTooDeep` and the byte offset.
    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth) throws(JSONRPCError)
        -> JSONValue
    {
        let depth = depthLimit(maxDepth)
        let result: Result<JSONValue, JSONRPCError>? = bytes.withContiguousStorageIfAvailable { buffer in
            parseBuffer(buffer, maxDepth: depth)
        }
        if let result { return try result.get() }
        let copy = Array(bytes)
        return try copy.withUnsafeBufferPointer { parseBuffer($0, maxDepth: depth) }.get()
    }

    /// Parses one JSON value from UTF-8 text.
    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONRPCError) -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

    static func parseBuffer(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int) -> Result<JSONValue, JSONRPCError> {
        var parser = JSONParser(buffer: buffer, maxDepth: maxDepth)
        do {
            let value = try parser.parseDocument()
            return .success(value)
        } catch {
            return .failure(error)
        }
    }
}

struct JSONParser {
    let buffer: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var depth = 0

    init(buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.buffer = buffer
        self.maxDepth = maxDepth
    }

    func fail(_ context: String, at offset: Int? = nil) -> JSONRPCError {
        JSONRPCError(.invalidJSON, context, offset: offset ?? index)
    }

    mutating func skipWhitespace() {
        while index < buffer.count {
            switch buffer[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func parseDocument() throws(JSONRPCError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == buffer.count else { throw fail("trailing characters after the JSON value") }
        return value
    }

    mutating func parseValue() throws(JSONRPCError) -> JSONValue {
        guard index < buffer.count else { throw fail("unexpected end of input") }
        switch buffer[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try parseNumber())
        default:
            throw fail("unexpected byte")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONRPCError) {
        guard skip(literal) else { throw fail("invalid literal") }
    }

    /// Whether the bytes at `offset` are `literal`'s (ASCII; any literal, one character or many).
    @inline(__always) func matches(_ literal: StaticString, at offset: Int) -> Bool {
        literal.withUTF8Buffer { bytes in
            guard offset >= 0, buffer.count - offset >= bytes.count else { return false }
            for i in 0..<bytes.count where buffer[offset + i] != bytes[i] { return false }
            return true
        }
    }

    /// Steps over `literal` (ASCII) when the bytes at `index` are exactly it.
    @inline(__always) mutating func skip(_ literal: StaticString) -> Bool {
        guard matches(literal, at: index) else { return false }
        index += literal.utf8CodeUnitCount
        return true
    }

    mutating func enter() throws(JSONRPCError) {
        depth += 1
        guard depth <= maxDepth else {
            throw JSONRPCError(.nestingTooDeep, "nesting deeper than \(maxDepth)", offset: index)
        }
    }

    mutating func parseArray() throws(JSONRPCError) -> JSONValue {
        try enter()
        index += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < buffer.count, buffer[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        repeat {
            skipWhitespace()
            elements.append(try parseValue())
        } while try continuesAfterElement(close: UInt8(ascii: "]"))
        depth -= 1
        return .array(elements)
    }

    mutating func parseObject() throws(JSONRPCError) -> JSONValue {
        try enter()
        index += 1  // {
        var members: [JSONObject.Member] = []
        var keySet: Set<String>? = nil
        skipWhitespace()
        if index < buffer.count, buffer[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(JSONObject(uncheckedMembers: members))
        }
        // A request has three or four members and most params a few: one allocation, not one per doubling (counted
        // with ops/perf/malloc-sites: 3 of a remembered offers.best answer's 7 allocations, 2 of a ping's 4).
        members.reserveCapacity(4)
        repeat {
            try expectKey()
            let keyOffset = index
            let key = try parseString()
            // Duplicate keys are rejected. Small objects: linear scan; large ones: a set.
            if members.count < 16 {
                for member in members where member.key == key { throw fail("duplicate key", at: keyOffset) }
            } else {
                if keySet == nil { keySet = Set(members.map(\.key)) }
                guard keySet?.insert(key).inserted == true else { throw fail("duplicate key", at: keyOffset) }
            }
            try expectColon()
            let value = try parseValue()
            members.append(JSONObject.Member(key: key, value: value))
        } while try continuesAfterElement(close: UInt8(ascii: "}"))
        depth -= 1
        return .object(JSONObject(uncheckedMembers: members))
    }

    /// Whitespace, then a member's key must begin (the separators of objects, shared with `JSONSkipping.swift`).
    @inline(__always) mutating func expectKey() throws(JSONRPCError) {
        skipWhitespace()
        guard index < buffer.count, buffer[index] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
    }

    /// After a key: whitespace, `:`, whitespace.
    @inline(__always) mutating func expectColon() throws(JSONRPCError) {
        skipWhitespace()
        guard index < buffer.count, buffer[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
        index += 1
        skipWhitespace()
    }

    /// After an element of an array (`close` is `]`) or a member of an object (`}`): whitespace, then `,` (true:
    /// another follows) or `close` (false: the container ended); anything else is an error.
    @inline(__always) mutating func continuesAfterElement(close: UInt8) throws(JSONRPCError) -> Bool {
        skipWhitespace()
        let object = close == UInt8(ascii: "}")
        guard index < buffer.count else { throw fail(object ? "unterminated object" : "unterminated array") }
        let byte = buffer[index]
        index += 1
        if byte == UInt8(ascii: ",") { return true }
        if byte == close { return false }
        throw fail(object ? "expected ',' or '}'" : "expected ',' or ']'", at: index - 1)
    }

    mutating func parseNumber() throws(JSONRPCError) -> JSONNumber {
        let start = index
        var negative = false
        if index < buffer.count, buffer[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard index < buffer.count, isDigit(buffer[index]) else { throw fail("invalid number") }
        var integral = true
        var magnitude: UInt64 = 0
        var digitCount = 0
        if buffer[index] == UInt8(ascii: "0") {
            index += 1
            digitCount = 1
            if index < buffer.count, isDigit(buffer[index]) { throw fail("leading zero in number", at: start) }
        } else {
            while index < buffer.count, isDigit(buffer[index]) {
                if digitCount < 19 { magnitude = magnitude &* 10 &+ UInt64(buffer[index] &- 0x30) }
                digitCount += 1
                index += 1
            }
        }
        if index < buffer.count, buffer[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard index < buffer.count, isDigit(buffer[index]) else { throw fail("digit expected after '.'") }
            while index < buffer.count, isDigit(buffer[index]) { index += 1 }
        }
        if index < buffer.count, buffer[index] == UInt8(ascii: "e") || buffer[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < buffer.count, buffer[index] == UInt8(ascii: "+") || buffer[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < buffer.count, isDigit(buffer[index]) else { throw fail("digit expected in exponent") }
            while index < buffer.count, isDigit(buffer[index]) { index += 1 }
        }
        if integral && digitCount <= 18 {
            let value = Int64(magnitude)
            return JSONNumber(negative ? -value : value)
        }
        let lexeme = String(decoding: UnsafeBufferPointer(rebasing: buffer[start..<index]), as: UTF8.self)
        return JSONNumber(uncheckedLexeme: lexeme)
    }

    @inline(__always) func isDigit(_ byte: UInt8) -> Bool { byte &- 0x30 < 10 }

    /// Parses a string starting at its opening quote.
    mutating func parseString() throws(JSONRPCError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: ASCII without escapes, plain words skipped eight bytes at a time.
        skipPlainASCII()
        while index < buffer.count {
            let byte = buffer[index]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: UnsafeBufferPointer(rebasing: buffer[start..<index]), as: UTF8.self)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") || byte >= 0x80 || byte < 0x20 { break }
            index += 1
        }
        return try parseStringSlow(start: start)
    }

    mutating func parseStringSlow(start: Int) throws(JSONRPCError) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(index - start + 16)
        out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start..<index]))
        while true {
            guard index < buffer.count else { throw fail("unterminated string", at: start - 1) }
            let byte = buffer[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                try parseEscape(into: &out)
            case 0..<0x20:
                throw fail("control character in string")
            case 0..<0x80:
                out.append(byte)
                index += 1
            default:
                let length = try validateUTF8Scalar()
                out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[index..<(index + length)]))
                index += length
            }
        }
    }

    /// Validates one multi-byte UTF-8 scalar at `index` (strict: no overlongs, no surrogates, ≤ U+10FFFF).
    func validateUTF8Scalar() throws(JSONRPCError) -> Int {
        let b0 = buffer[index]
        let length: Int
        var lower: UInt8 = 0x80
        var upper: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            upper = 0x9F
        case 0xF0:
            length = 4
            lower = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            upper = 0x8F
        default: throw fail("invalid UTF-8")
        }
        guard buffer.count - index >= length else { throw fail("truncated UTF-8") }
        let b1 = buffer[index + 1]
        guard b1 >= lower && b1 <= upper else { throw fail("invalid UTF-8") }
        for offset in 2..<max(length, 2) where buffer[index + offset] & 0xC0 != 0x80 {
            throw fail("invalid UTF-8")
        }
        return length
    }

    mutating func parseEscape(into out: inout [UInt8]) throws(JSONRPCError) {
        guard index < buffer.count else { throw fail("unterminated escape") }
        let byte = buffer[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""): out.append(0x22)
        case UInt8(ascii: "\\"): out.append(0x5C)
        case UInt8(ascii: "/"): out.append(0x2F)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4()
            if scalar >= 0xD800 && scalar <= 0xDBFF {
                guard buffer.count - index >= 6, buffer[index] == UInt8(ascii: "\\"),
                    buffer[index + 1] == UInt8(ascii: "u")
                else { throw fail("lone high surrogate escape") }
                index += 2
                let low = try parseHex4()
                guard low >= 0xDC00 && low <= 0xDFFF else { throw fail("invalid low surrogate escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                throw fail("lone low surrogate escape")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid unicode escape") }
            UTF8.encode(unicode) { out.append($0) }
        default:
            throw fail("invalid escape", at: index - 1)
        }
    }

    mutating func parseHex4() throws(JSONRPCError) -> UInt32 {
        guard buffer.count - index >= 4 else { throw fail("truncated unicode escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = buffer[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - 0x30
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - 0x61 + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - 0x41 + 10
            default: throw fail("invalid hex digit in unicode escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }
}
