import Foundation
import Testing

@testable import JSONRPC

@Suite struct JSONParserTests {
    static let valid: [(String, JSONValue)] = [
        ("null", .null),
        ("true", .bool(true)),
        (" false ", .bool(false)),
        ("0", .int(0)),
        ("-0", .int(0)),
        ("123", .int(123)),
        ("-9223372036854775808", .number(JSONNumber(Int64.min))),
        ("9223372036854775807", .number(JSONNumber(Int64.max))),
        ("\"\"", .string("")),
        ("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", .string("a\"b\\c/d\u{8}\u{c}\n\r\t")),
        ("\"\\u00e9\\u20AC\"", .string("é€")),
        ("\"\\ud83d\\ude00\"", .string("😀")),
        ("\"héllo 😀\"", .string("héllo 😀")),
        ("[]", .array([])),
        ("[1, [2, [3]]]", [1, [2, [3]]]),
        ("{}", .object(JSONObject())),
        ("{\"a\":1,\"b\":[true,null]}", ["a": 1, "b": [true, nil]]),
        ("\t\r\n [ 1 , 2 ] \n", [1, 2]),
    ]

    @Test(arguments: valid)
    func parsesValid(text: String, expected: JSONValue) throws {
        #expect(try JSONParsing.parse(text) == expected)
    }

    static let invalid: [(String, String)] = [
        ("", "empty"),
        (" ", "whitespace only"),
        ("01", "leading zero"),
        ("-01", "negative leading zero"),
        ("1.", "dot without digits"),
        (".5", "leading dot"),
        ("1e", "exponent without digits"),
        ("+1", "plus sign"),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        ("nul", "truncated literal"),
        ("True", "capitalised literal"),
        ("[1,]", "trailing comma in array"),
        ("{\"a\":1,}", "trailing comma in object"),
        ("{a:1}", "unquoted key"),
        ("{\"a\" 1}", "missing colon"),
        ("[1 2]", "missing comma"),
        ("'a'", "single quotes"),
        ("\"abc", "unterminated string"),
        ("\"a\u{1}b\"", "raw control char"),
        ("\"a\nb\"", "raw newline in string"),
        ("\"\\x41\"", "invalid escape"),
        ("\"\\u12\"", "short unicode escape"),
        ("\"\\ud800\"", "lone high surrogate"),
        ("\"\\udc00\"", "lone low surrogate"),
        ("\"\\ud800\\u0041\"", "high surrogate followed by non-low"),
        ("1 2", "two values"),
        ("{} x", "trailing garbage"),
        ("[", "unterminated array"),
        ("{\"a\":1,\"a\":2}", "duplicate key"),
    ]

    @Test(arguments: invalid)
    func rejectsInvalid(text: String, why: String) {
        #expect(throws: JSONRPCError.self, "\(why)") { try JSONParsing.parse(text) }
    }

    static let invalidUTF8: [[UInt8]] = [
        [0x22, 0xFF, 0x22],  // invalid byte
        [0x22, 0xC0, 0xAF, 0x22],  // overlong '/'
        [0x22, 0xE0, 0x80, 0xAF, 0x22],  // overlong 3-byte
        [0x22, 0xED, 0xA0, 0x80, 0x22],  // UTF-8 encoded surrogate U+D800
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // > U+10FFFF
        [0x22, 0xC3, 0x22],  // truncated sequence
        [0x22, 0x80, 0x22],  // lone continuation byte
        [0x22, 0xE2, 0x82, 0x22],  // truncated 3-byte
    ]

    @Test(arguments: invalidUTF8)
    func rejectsInvalidUTF8(bytes: [UInt8]) {
        #expect(throws: JSONRPCError.self) { try JSONParsing.parse(bytes) }
    }

    @Test func deepNestingIsAnErrorNotACrash() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        do {
            _ = try JSONParsing.parse(deep)
            Issue.record("10,000-deep input was accepted")
        } catch {
            #expect(error.code == .nestingTooDeep)
        }
        let deepObjects = String(repeating: "{\"a\":", count: 10_000) + "1" + String(repeating: "}", count: 10_000)
        #expect(throws: JSONRPCError.self) { try JSONParsing.parse(deepObjects) }
        // Exactly at the limit is fine; one more is not.
        let atLimit = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect((try? JSONParsing.parse(atLimit)) != nil)
        let over = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONRPCError.self) { try JSONParsing.parse(over) }
    }

    @Test func hugeNumbersKeepTheirDigits() throws {
        let value = try JSONParsing.parse("[12345678901234567890, -99999999999999999999.5, 1e400, 0.1]")
        guard case .array(let numbers) = value, numbers.count == 4,
            case .number(let big) = numbers[0], case .number(let negative) = numbers[1],
            case .number(let exp) = numbers[2], case .number(let tenth) = numbers[3]
        else {
            Issue.record("unexpected shape \(value)")
            return
        }
        #expect(big.decimalString == "12345678901234567890")
        #expect(big.int64 == nil)
        #expect(negative.decimalString == "-99999999999999999999.5")
        #expect(exp.double == nil)
        #expect(tenth.double == 0.1)
        #expect(
            String(decoding: JSONSerializer.serialize(value), as: UTF8.self)
                == "[12345678901234567890,-99999999999999999999.5,1e400,0.1]")
        #expect(JSONNumber(lexeme: "1.5e3")?.int64 == 1500)
        #expect(JSONNumber(lexeme: "01") == nil)
        #expect(JSONNumber(lexeme: "12") == JSONNumber(12))
    }

    @Test("every character is read right at every offset of a long string (the fast path skips eight plain bytes)")
    func charactersAtEveryOffset() throws {
        let specials: [(json: String, value: String)] = [
            ("\\\"", "\""), ("\\\\", "\\"), ("\\n", "\n"), ("\\u00e9", "é"), ("é", "é"), ("🎉", "🎉"), ("~", "~"),
            ("\u{7F}", "\u{7F}"),
        ]
        for length in [7, 8, 9, 16, 23, 24, 25] {
            for (json, value) in specials {
                for offset in 0...length {
                    let plain = String(repeating: "x", count: length)
                    let at = plain.index(plain.startIndex, offsetBy: offset)
                    let text = "\"" + plain[..<at] + json + plain[at...] + "\""
                    let expected = String(plain[..<at]) + value + String(plain[at...])
                    #expect(try JSONParsing.parse(text) == .string(expected), "\(text)")
                }
            }
            // A control character, raw, at any offset is an error; so is a string without its closing quote.
            for offset in 0...length {
                let plain = String(repeating: "x", count: length)
                let at = plain.index(plain.startIndex, offsetBy: offset)
                #expect(throws: JSONRPCError.self) {
                    try JSONParsing.parse("\"" + plain[..<at] + "\u{01}" + plain[at...] + "\"")
                }
            }
            #expect(throws: JSONRPCError.self) { try JSONParsing.parse("\"" + String(repeating: "x", count: length)) }
            // Bytes that are not UTF-8 at any offset are errors too, not skipped with the plain words around them.
            for bad: [UInt8] in [[0xFF], [0x80], [0xC3]] {
                for offset in 0...length {
                    var bytes = [UInt8](repeating: UInt8(ascii: "x"), count: length)
                    bytes.insert(contentsOf: bad, at: offset)
                    #expect(throws: JSONRPCError.self, "\(bad) at \(offset) of \(length)") {
                        try JSONParsing.parse([0x22] + bytes + [0x22])
                    }
                }
            }
        }
    }

    @Test func hugeStringsRoundTrip() throws {
        let big = String(repeating: "ab\"c\\é😀\n", count: 200_000)
        let bytes = JSONSerializer.serialize(.string(big))
        #expect(try JSONParsing.parse(bytes) == .string(big))
    }

    @Test func serializerEscapesAndSortsKeys() throws {
        let value: JSONValue = ["z": "a\"\u{1}\n", "a": [1, true, nil], "m": ["y": 1, "b": 2]]
        #expect(
            String(decoding: JSONSerializer.serialize(value), as: UTF8.self)
                == "{\"z\":\"a\\\"\\u0001\\n\",\"a\":[1,true,null],\"m\":{\"y\":1,\"b\":2}}")
        #expect(
            String(decoding: JSONSerializer.serialize(value, options: .init(sortedKeys: true)), as: UTF8.self)
                == "{\"a\":[1,true,null],\"m\":{\"b\":2,\"y\":1},\"z\":\"a\\\"\\u0001\\n\"}")
        #expect(try JSONParsing.parse(JSONSerializer.serialize(value)) == value)
        #expect(JSONValue.int(Int(Int64.min)).description == "-9223372036854775808")
    }

    @Test func objectsKeepOrderAndLookUp() throws {
        let value = try JSONParsing.parse("{\"b\":1,\"a\":2,\"c\":3}")
        #expect(value.objectValue?.keys == ["b", "a", "c"])
        #expect(value["a"] == .int(2))
        #expect(value["missing"] == nil)
        let many = "{" + (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + ",\"k7\":0}"
        #expect(throws: JSONRPCError.self) { try JSONParsing.parse(many) }
    }
}
