import Foundation
import Testing

@testable import JSONRPC

/// What `JSONObjectWriter` writes is what `JSONSerializer` writes for the same value, byte for byte.
@Suite struct JSONWriterTests {
    static let awkward = [
        "", "plain", "quote \" backslash \\ slash /", "tab\tnewline\ncontrol\u{1}\u{1F}", "é€😀", "\u{7F}",
    ]

    @Test func writesWhatTheSerializerWritesForTheSameValue() throws {
        for text in Self.awkward {
            let written = EncodedJSON { o in
                o.string("s", text)
                o.int("i", -9_223_372_036_854_775_807)
                o.int("zero", 0)
                o.bool("t", true)
                o.bool("f", false)
                o.null("n")
                o.object("empty") { _ in }
                o.array("none") { _ in }
                o.array("list") { a in
                    a.string(text)
                    a.object { inner in
                        inner.string("k", text)
                        inner.array("deeper") { d in d.object { _ in } }
                    }
                    a.string("last")
                }
                o.value("any", ["x": [1, nil, "y"], "z": .number(JSONNumber(uncheckedLexeme: "1.5e3"))])
                o.object("nested") { n in n.object("again") { a in a.string("s", text) } }
            }
            let expected: JSONValue = [
                "s": .string(text), "i": .number(JSONNumber(-9_223_372_036_854_775_807)), "zero": 0, "t": true,
                "f": false, "n": nil, "empty": .object(JSONObject()), "none": [],
                "list": [.string(text), ["k": .string(text), "deeper": [.object(JSONObject())]], "last"],
                "any": ["x": [1, nil, "y"], "z": .number(JSONNumber(uncheckedLexeme: "1.5e3"))],
                "nested": ["again": ["s": .string(text)]],
            ]
            #expect(written.bytes == JSONSerializer.serialize(expected), "\(text.debugDescription)")
            #expect(try JSONParsing.parse(written.bytes) == expected)
        }
        #expect(EncodedJSON { _ in }.bytes == Array("{}".utf8))
    }
}
