import ByteCoding

// Walking over a JSON value without building it: for a response envelope whose `result` the caller may never look
// at (a load generator), so that only the envelope's few members are materialised.

extension JSONParser {
    /// Steps over one value at `index`, checking it as `parseValue` does (the same syntax, escapes, UTF-8 and depth
    /// rules) without building it. The one check it leaves out: duplicate keys, which need the keys themselves;
    /// parsing the skipped bytes later (`JSONParsing.parse`) still rejects them.
    mutating func skipValue() throws(JSONRPCError) {
        guard index < buffer.count else { throw fail("unexpected end of input") }
        switch buffer[index] {
        case UInt8(ascii: "{"): try skipContainer(close: UInt8(ascii: "}"), keyed: true)
        case UInt8(ascii: "["): try skipContainer(close: UInt8(ascii: "]"), keyed: false)
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "t"): try expectLiteral("true")
        case UInt8(ascii: "f"): try expectLiteral("false")
        case UInt8(ascii: "n"): try expectLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): _ = try parseNumber()
        default: throw fail("unexpected byte")
        }
    }

    /// An object (`keyed`: string keys and ':') or an array, from its opening bracket to `close`.
    mutating func skipContainer(close: UInt8, keyed: Bool) throws(JSONRPCError) {
        try enter()
        index += 1  // { or [
        skipWhitespace()
        if index < buffer.count, buffer[index] == close {
            index += 1
            depth -= 1
            return
        }
        repeat {
            if keyed {
                try expectKey()
                try skipString()
                try expectColon()
            } else {
                skipWhitespace()
            }
            try skipValue()
        } while try continuesAfterElement(close: close)
        depth -= 1
    }

    /// A string from its opening quote, escapes and UTF-8 checked as `parseString` checks them.
    mutating func skipString() throws(JSONRPCError) {
        let opening = index
        index += 1
        var scratch: [UInt8] = []
        while true {
            skipPlainASCII()
            guard index < buffer.count else { throw fail("unterminated string", at: opening) }
            let byte = buffer[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return
            case UInt8(ascii: "\\"):
                index += 1
                try parseEscape(into: &scratch)
                scratch.removeAll(keepingCapacity: true)
            case 0..<0x20: throw fail("control character in string")
            case 0..<0x80: index += 1
            default: index += try validateUTF8Scalar()
            }
        }
    }
}

extension JSONParser {
    /// The document when it is one object: the members named in `names` parsed, the others stepped over (checked as
    /// a parse checks them, not built; a repeated key among the named ones throws as a parse does). nil when the
    /// document is not an object.
    mutating func parseObjectKeeping(_ names: Set<String>) throws(JSONRPCError) -> JSONObject? {
        skipWhitespace()
        guard index < buffer.count, buffer[index] == UInt8(ascii: "{") else { return nil }
        try enter()
        index += 1
        var kept: [JSONObject.Member] = []
        skipWhitespace()
        if index < buffer.count, buffer[index] == UInt8(ascii: "}") {
            index += 1
        } else {
            repeat {
                try expectKey()
                let keyOffset = index
                let key = try parseString()
                try expectColon()
                if names.contains(key) {
                    for member in kept where member.key == key { throw fail("duplicate key", at: keyOffset) }
                    kept.append(JSONObject.Member(key: key, value: try parseValue()))
                } else {
                    try skipValue()
                }
            } while try continuesAfterElement(close: UInt8(ascii: "}"))
        }
        depth -= 1
        skipWhitespace()
        guard index == buffer.count else { throw fail("trailing characters after the JSON value") }
        return JSONObject(uncheckedMembers: kept)
    }
}

extension JSONParser {
    /// Steps over whole 8-byte words of string content that need no look: printable ASCII other than `"` and `\`
    /// (`JSONString.isPlainASCII`, exact). A word with any other byte is left to the byte-by-byte loop.
    @inline(__always) mutating func skipPlainASCII() {
        guard let base = buffer.baseAddress else { return }
        while buffer.count - index >= 8,
            JSONString.isPlainASCII(UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
        {
            index += 8
        }
    }
}

extension JSONParser {
    /// Where a `result` starting at `start` ends when it is the line's last member (`idKnown`: `…}` at the end), or
    /// followed only by `,"id":<integer>}` (then that integer). Whitespace is allowed only where a compact writer
    /// puts none: around the closing brace. nil for any other ending (the caller then steps over the value).
    func trailingMembers(after start: Int, idKnown: Bool) -> (resultEnd: Int, id: Int64?)? {
        var end = buffer.count
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }
        while end > start, isSpace(buffer[end - 1]) { end -= 1 }
        guard end > start, buffer[end - 1] == UInt8(ascii: "}") else { return nil }
        end -= 1
        if idKnown {
            var resultEnd = end
            while resultEnd > start, isSpace(buffer[resultEnd - 1]) { resultEnd -= 1 }
            return resultEnd > start ? (resultEnd, nil) : nil
        }
        // Digits, an optional minus, then `,"id":` reading backwards.
        var digitsStart = end
        while digitsStart > start, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(buffer[digitsStart - 1]) {
            digitsStart -= 1
        }
        let digits = end - digitsStart
        guard digits > 0, digits <= 18 else { return nil }
        var negative = false
        var memberStart = digitsStart
        if memberStart > start, buffer[memberStart - 1] == UInt8(ascii: "-") {
            negative = true
            memberStart -= 1
        }
        // No leading zeros: JSON has none, and "-0" or "007" are left to the full scan.
        guard digits == 1 || buffer[digitsStart] != UInt8(ascii: "0") else { return nil }
        let key: StaticString = #","id":"#
        let keyStart = memberStart - key.utf8CodeUnitCount
        guard keyStart > start, matches(key, at: keyStart) else { return nil }
        var value: Int64 = 0
        for i in digitsStart..<end { value = value * 10 + Int64(buffer[i] - UInt8(ascii: "0")) }
        return (keyStart, negative ? -value : value)
    }
}

/// A JSON-RPC response line read as far as matching it needs: its integer `id`, its `error` (parsed: it is small),
/// and where its `result` lies (checked as JSON, not built). `nil` for anything else (a request, a batch, a string
/// id, an invalid envelope): the caller then parses the whole line as before.
struct ResponseEnvelope {
    let id: Int64
    /// The `result` value's bytes in the scanned line, or the error (exactly one of the two).
    let outcome: Outcome

    enum Outcome {
        case result(Range<Int>)
        case error(RPCError)
    }

    /// `checkingResult` false: see ``JSONParser/scanResponse(checkingResult:)``.
    static func scan(_ frame: [UInt8], maxDepth: Int, checkingResult: Bool = true) -> ResponseEnvelope? {
        frame.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer: buffer, maxDepth: JSONParsing.depthLimit(maxDepth))
            return try? parser.scanResponse(checkingResult: checkingResult)
        }
    }
}

extension JSONParser {
    /// The envelope of a response object (see `ResponseEnvelope`); nil when the line is not one whose members are
    /// exactly what `RPCResponse(json:)` accepts with an integer id. Throws on invalid JSON.
    ///
    /// `checkingResult` false: a `result` that is the line's last member, or that is followed by nothing but a last
    /// `"id"` member with an integer, is located from the line's end instead of stepped over, so its bytes are not
    /// checked here (parsing them later still checks them).
    mutating func scanResponse(checkingResult: Bool = true) throws(JSONRPCError) -> ResponseEnvelope? {
        skipWhitespace()
        guard index < buffer.count, buffer[index] == UInt8(ascii: "{") else { return nil }
        try enter()
        index += 1
        var version: JSONValue?
        var id: JSONValue?
        var result: Range<Int>?
        var error: JSONValue?
        var others: [String] = []
        skipWhitespace()
        if index < buffer.count, buffer[index] == UInt8(ascii: "}") { return nil }
        repeat {
            try expectKey()
            // The envelope's own keys and version, as a compact writer spells them, are matched on their bytes; any
            // other spelling (an escape, another key) is read as a string.
            let key: String
            if skip(#""jsonrpc""#) {
                key = "jsonrpc"
            } else if skip(#""result""#) {
                key = "result"
            } else if skip(#""id""#) {
                key = "id"
            } else {
                key = try parseString()
            }
            try expectColon()
            // A repeated member makes the line invalid JSON for the strict parser: leave it to that path.
            switch key {
            case "jsonrpc":
                guard version == nil else { return nil }
                version = skip(#""2.0""#) ? .string("2.0") : try parseValue()
            case "id":
                guard id == nil else { return nil }
                id = try parseValue()
            case "error":
                guard error == nil else { return nil }
                error = try parseValue()
            case "result":
                guard result == nil else { return nil }
                let start = index
                if !checkingResult, version == .string("2.0"), error == nil, others.isEmpty,
                    let tail = trailingMembers(after: start, idKnown: id != nil)
                {
                    guard let intID = tail.id ?? id?.int64Value else { return nil }
                    return ResponseEnvelope(id: intID, outcome: .result(start..<tail.resultEnd))
                }
                try skipValue()
                result = start..<index
            default:
                guard !others.contains(key) else { return nil }
                others.append(key)
                _ = try parseValue()  // rare, and strictly checked as the whole-line parse would
            }
        } while try continuesAfterElement(close: UInt8(ascii: "}"))
        depth -= 1
        skipWhitespace()
        guard index == buffer.count, version == .string("2.0"), !others.contains("method"),
            case .number(let number)? = id, let intID = number.int64
        else { return nil }
        switch (result, error) {
        case (let range?, nil): return ResponseEnvelope(id: intID, outcome: .result(range))
        case (nil, let raw?):
            guard let rpcError = RPCError(json: raw) else { return nil }
            return ResponseEnvelope(id: intID, outcome: .error(rpcError))
        default: return nil
        }
    }
}
