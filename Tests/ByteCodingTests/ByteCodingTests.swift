import ByteCoding
import Foundation
import Testing

@Suite("Hex")
struct HexTests {
    @Test("encodes lowercase, two digits a byte")
    func encode() {
        #expect(Hex.encode([UInt8]()) == "")
        #expect(Hex.encode([0x00, 0x0f, 0xa0, 0xff]) == "000fa0ff")
        #expect(Hex.encode(Array(0...255)).count == 512)
    }

    @Test("contiguous, sliced and non-contiguous collections encode alike")
    func encodeAnyCollection() {
        let all = [UInt8](0...255)
        let expected = all.map { String(format: "%02x", $0) }.joined()
        #expect(Hex.encode(all) == expected)
        #expect(Hex.encode(UInt8(0)...UInt8(255)) == expected)  // no contiguous storage: the copying path
        #expect(Hex.encode(all.lazy.map { $0 }) == expected)
        #expect(Hex.encode(all[200...]) == String(expected.dropFirst(400)))  // a slice starts at its own index
        #expect(Hex.encode(Data(all)) == expected)
    }

    @Test("decodes either case; rejects odd lengths and non-hex")
    func decode() {
        #expect(Hex.decode("00ffAB") == [0, 255, 171])
        #expect(Hex.decode("") == [])
        #expect(Hex.decode("0") == nil)
        #expect(Hex.decode("zz") == nil)
        #expect(Hex.decode("0g") == nil)
        #expect(Hex.decode(Array("\\xdeadBEEF".utf8).dropFirst(2)) == [0xde, 0xad, 0xbe, 0xef])
    }

    @Test("every byte round-trips")
    func roundTrip() {
        let all = [UInt8](0...255)
        #expect(Hex.decode(Hex.encode(all)) == all)
        #expect(Hex.decode(Hex.encode(all).uppercased()) == all)
    }
}

@Suite("JSON string escaping")
struct JSONStringTests {
    static func escaped(_ text: String) -> String {
        var out: [UInt8] = []
        JSONString.append(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test(
        "escapes quotes, backslashes and control characters; copies everything else",
        arguments: [
            ("", #""""#), ("plain", #""plain""#), ("a\"b", #""a\"b""#), ("a\\b", #""a\\b""#),
            ("\n\r\t", #""\n\r\t""#), ("\u{08}\u{0C}", #""\b\f""#), ("\u{00}", #""\u0000""#),
            ("\u{1F}", #""\u001f""#), ("\u{7F}", "\"\u{7F}\""), ("/", #""/""#), ("é€🎉", "\"é€🎉\""),
            ("\u{2028}", "\"\u{2028}\""), ("x\u{01}y\"z", #""x\u0001y\"z""#),
        ])
    func table(_ text: String, _ json: String) {
        #expect(Self.escaped(text) == json)
    }

    @Test("every escaped string parses back to itself (Foundation's parser as the referee)")
    func roundTrip() throws {
        var samples = (0..<0x80).map { String(UnicodeScalar(UInt8($0))) }
        samples.append(String((0..<0x80).map { Character(UnicodeScalar(UInt8($0))) }))
        samples.append("mixed \"quotes\" \\ and \u{00}\u{1F} and ünïcødé 🎉")
        for sample in samples {
            let json = Self.escaped(sample)
            let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8), options: .fragmentsAllowed)
            #expect(parsed as? String == sample, "\(json)")
        }
    }

    /// The escaping rules applied one byte at a time, as the writer did before it scanned eight at once.
    static func escapedByteByByte(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x22: out += "\\\""
            case 0x5C: out += "\\\\"
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case 0x08: out += "\\b"
            case 0x0C: out += "\\f"
            case 0..<0x20: out += "\\u00" + String(format: "%02x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    @Test("every character that needs escaping is found at every position of a long string, beside any other byte")
    func longStrings() {
        // Each ASCII character and a few multi-byte ones, at each offset of a 24-byte run (three words and every
        // misalignment), between neighbours that need no escaping and neighbours that do.
        let characters = (0..<0x80).map { Character(UnicodeScalar(UInt8($0))) } + ["é", "€", "🎉", "\u{7F}", "\u{80}"]
        for neighbour in ["a", "\u{FF}", "\"", "\u{1F}"] {
            for character in characters {
                for offset in 0..<24 {
                    var text = String(repeating: neighbour, count: 24)
                    let at = text.index(text.startIndex, offsetBy: offset)
                    text.replaceSubrange(at...at, with: String(character))
                    #expect(Self.escaped(text) == Self.escapedByteByByte(text), "\(Array(text.utf8))")
                }
            }
        }
        // Words that need no escaping next to each other, with bytes just above each limit.
        let clean = String(repeating: "\u{20}!#[]~\u{7F}é", count: 40)
        #expect(Self.escaped(clean) == "\"" + clean + "\"")
    }

    @Test(
        "a word is plain ASCII exactly when each of its bytes is ASCII, not a control character, not a quote or backslash"
    )
    func plainASCIIWords() {
        for position in 0..<8 {
            for value in 0...255 {
                for filler: UInt8 in [UInt8(ascii: "a"), 0x20, 0x7F] {
                    var bytes = [UInt8](repeating: filler, count: 8)
                    bytes[position] = UInt8(value)
                    let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                    let plain = value >= 0x20 && value < 0x80 && value != 0x22 && value != 0x5C
                    #expect(JSONString.isPlainASCII(word) == plain, "byte \(value) at \(position) among \(filler)")
                }
            }
        }
    }
}

@Suite("Decimal integers")
struct DecimalIntegerTests {
    @Test(
        "written exactly, as String(_:) writes them",
        arguments: [0, 7, 9, 10, -1, -7, -10, 1_698_148_900_123, Int64.max, Int64.min, Int64.max - 1, Int64.min + 1])
    func digits(_ value: Int64) {
        var out: [UInt8] = Array("x".utf8)
        DecimalInteger.append(value, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "x" + String(value))
    }
}
