import Foundation
import Testing

@testable import JSONRPC

/// Skipping a value checks what parsing checks (but duplicate keys), and a response's envelope is read without its
/// result being built; the client hands raw results over and still parses the ones a waiter wants built.
@Suite struct JSONSkippingTests {
    /// Skips one document as `JSONParsing.parse` parses one: the bytes it consumed, or the error.
    static func skip(_ bytes: [UInt8], maxDepth: Int = JSONParsing.defaultMaxDepth) -> Result<Int, JSONRPCError> {
        bytes.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(buffer: buffer, maxDepth: maxDepth)
            do throws(JSONRPCError) {
                parser.skipWhitespace()
                try parser.skipValue()
                parser.skipWhitespace()
                guard parser.index == buffer.count else { throw parser.fail("trailing characters") }
                return .success(parser.index)
            } catch {
                return .failure(error)
            }
        }
    }

    static var cases: [[UInt8]] {
        JSONParserTests.valid.map { Array($0.0.utf8) } + JSONParserTests.invalid.map { Array($0.0.utf8) }
            + JSONParserTests.invalidUTF8
    }

    @Test func acceptsExactlyWhatTheParserAcceptsButDuplicateKeys() {
        for bytes in Self.cases {
            let text = String(decoding: bytes, as: UTF8.self)
            let parsed = (try? JSONParsing.parse(bytes)) != nil
            let skipped = (try? Self.skip(bytes).get()) != nil
            if text == "{\"a\":1,\"a\":2}" {
                #expect(!parsed && skipped, "duplicate keys are the one thing skipping leaves to the parser")
            } else {
                #expect(parsed == skipped, "\(text.debugDescription): parse \(parsed), skip \(skipped)")
            }
        }
        let over = Array((String(repeating: "[", count: 65) + String(repeating: "]", count: 65)).utf8)
        #expect(throws: JSONRPCError.self) { try Self.skip(over).get() }
        let atLimit = Array((String(repeating: "{\"k\":", count: 63) + "[]" + String(repeating: "}", count: 63)).utf8)
        #expect((try? Self.skip(atLimit).get()) != nil)
    }

    /// Strings of random bytes, with the bytes the word-at-a-time path must stop at put at every offset: skipping
    /// accepts exactly the strings parsing accepts, and ends where the string ends.
    @Test func wordAtATimeStringsAgreeWithTheParserAtEveryOffset() {
        var random = SystemRandomNumberGenerator()
        let special: [[UInt8]] = [
            [0x22], [0x5C, 0x22], [0x5C, 0x5C], [0x5C, 0x6E], [0x5C, 0x75, 0x30, 0x30, 0x65, 0x39], [0x5C, 0x78],
            [0x01], [0x1F], [0x0A], [0x7F], [0x20], [0x21], [0x23], [0x5B], [0x5D], [0xC3, 0xA9], [0xE2, 0x82, 0xAC],
            [0xF0, 0x9F, 0x98, 0x80], [0xFF], [0xC3], [0x80], [0xED, 0xA0, 0x80],
        ]
        var checked = 0
        for length in 0..<24 {
            for offset in 0...length {
                for insert in special {
                    var content = (0..<length).map { _ in UInt8.random(in: 0x20...0x7E, using: &random) }
                    content.removeAll { $0 == 0x22 || $0 == 0x5C }
                    let at = min(offset, content.count)
                    content.insert(contentsOf: insert, at: at)
                    let document = [0x22] + content + [0x22]
                    let parsed = (try? JSONParsing.parse(document)) != nil
                    let skipped = Self.skip(document)
                    #expect(
                        parsed == ((try? skipped.get()) != nil),
                        "\(document): parse \(parsed), skip \(String(describing: skipped))")
                    checked += 1
                }
            }
        }
        #expect(checked > 6_000)
    }

    @Test func aResponseEnvelopeIsReadWithoutItsResult() throws {
        let result: JSONValue = ["offers": [["copy": "7 days free, then $19.99/year", "n": 1]], "note": "é\"\\"]
        var line = Array(#"{"jsonrpc":"2.0","result":"#.utf8)
        line += JSONSerializer.serialize(result) + Array(#","id":42}"#.utf8)
        let envelope = try #require(ResponseEnvelope.scan(line, maxDepth: 64))
        #expect(envelope.id == 42)
        guard case .result(let range) = envelope.outcome else {
            Issue.record("expected a result, got \(envelope.outcome)")
            return
        }
        #expect(try JSONParsing.parse(line[range]) == result)

        let error = Array(#" {"id":7,"error":{"code":-32050,"message":"Unavailable"},"jsonrpc":"2.0"} "#.utf8)
        let failed = try #require(ResponseEnvelope.scan(error, maxDepth: 64))
        guard case .error(let rpcError) = failed.outcome else {
            Issue.record("expected an error, got \(failed.outcome)")
            return
        }
        #expect(failed.id == 7 && rpcError.code == -32050)

        // The envelope's keys and version are matched on their bytes. Spelled with escapes or spaced out they are
        // still the same, and a member whose key only begins like one of them is another member (kept apart from the
        // envelope, as before).
        for same in [
            #"{"json\u0072pc":"2.0","result":5,"id":3}"#, #"{"jsonrpc":"2\u002e0","res\u0075lt":5,"\u0069d":3}"#,
            #"{ "jsonrpc" : "2.0" , "result" : 5 , "id" : 3 }"#, #"{"jsonrpc":"2.0","result":5,"id":3,"idx":2}"#,
            #"{"resultant":0,"jsonrpcx":"1.0","jsonrpc":"2.0","result":5,"id":3}"#,
        ] {
            let line = Array(same.utf8)
            let envelope = try #require(ResponseEnvelope.scan(line, maxDepth: 64), "\(same)")
            #expect(envelope.id == 3, "\(same)")
            guard case .result(let range) = envelope.outcome else {
                Issue.record("expected a result, got \(envelope.outcome) for \(same)")
                continue
            }
            #expect(try JSONParsing.parse(line[range]) == 5, "\(same)")
        }

        // Anything else is left to the whole-line path, which handles it as it always did.
        for other in [
            #"{"jsonrpc":"2.0x","result":1,"id":1}"#, #"{"jsonrpc":"2.0","result":1,"idx":1}"#, #"{"jsonr"#,
            #"{"jsonrpc":"2."#, #"{"jsonrpc":"2.0","res"#, #"{"jsonrpc":"2.0","result":1,"id"#,
            #"{"jsonrpcx":"2.0","result":1,"id":1}"#, #"{"jsonrpc":"2.0","resultant":1,"id":1}"#,
            #"{"jsonrpc":"2.0","method":"progress","params":{}}"#, #"{"jsonrpc":"2.0","result":1,"id":"a"}"#,
            #"{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"x"},"id":1}"#, #"{"result":1,"id":1}"#,
            #"{"jsonrpc":"2.0","result":1,"id":1,"id":2}"#, #"{"jsonrpc":"2.0","result":1,"id":1} x"#,
            #"[{"jsonrpc":"2.0","result":1,"id":1}]"#, #"{"jsonrpc":"2.0","result":[1,],"id":1}"#,
            #"{"jsonrpc":"1.0","result":1,"id":1}"#, #"{"jsonrpc":"2.0","id":1}"#, #"{}"#,
            #"{"jsonrpc":"2.0","result":1,"id":1.5}"#,
        ] {
            #expect(ResponseEnvelope.scan(Array(other.utf8), maxDepth: 64)?.id == nil, "\(other)")
        }
    }

    /// Not checking unread results: a result laid out as the gateway writes it, or before nothing but the closing
    /// brace once the id is known, is located from the line's end; any other layout is stepped over as before.
    @Test func unreadResultsAreLocatedFromTheLinesEnd() throws {
        let result: JSONValue = ["offers": [["copy": "7 days free, then $19.99/year", "n": 1]], "id": 3, "e": "é"]
        let body = JSONSerializer.serialize(result)
        for (prefix, suffix, id) in [
            (#"{"jsonrpc":"2.0","result":"#, #","id":42}"#, Int64(42)),
            (#"{"jsonrpc":"2.0","result":"#, #","id":-7} "#, -7),
            (#"{"jsonrpc":"2.0","id":9,"result":"#, "}\n", 9),
            (#"{"id":0,"jsonrpc":"2.0","result":"#, " } ", 0),
            (#"{"json\u0072pc":"2\u002e0","result":"#, #","id":11}"#, 11),
            // Other layouts: stepped over (checked) as before.
            (#"{"jsonrpc":"2.0","result":"#, #","id":42 }"#, 42),
            (#"{"result":"#, #","jsonrpc":"2.0","id":5}"#, 5),
        ] {
            let line = Array(prefix.utf8) + body + Array(suffix.utf8)
            let envelope = try #require(ResponseEnvelope.scan(line, maxDepth: 64, checkingResult: false), "\(prefix)")
            #expect(envelope.id == id)
            guard case .result(let range) = envelope.outcome else {
                Issue.record("expected a result, got \(envelope.outcome)")
                continue
            }
            #expect(try JSONParsing.parse(line[range]) == result, "\(prefix)")
        }
        // A result that is not one value is located, not checked: it fails only when parsed.
        let bad = Array(#"{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"x"},"id":1}"#.utf8)
        let located = try #require(ResponseEnvelope.scan(bad, maxDepth: 64, checkingResult: false))
        guard case .result(let range) = located.outcome else {
            Issue.record("expected a result, got \(located.outcome)")
            return
        }
        #expect(throws: JSONRPCError.self) { try JSONParsing.parse(bad[range]) }
        // Not responses, string ids, errors and empty results: as when checking.
        for other in [
            #"{"jsonrpc":"2.0","method":"progress","params":{}}"#, #"{"jsonrpc":"2.0","result":1,"id":"a"}"#,
            #"{"jsonrpc":"2.0","result":,"id":1}"#, #"{"jsonrpc":"2.0","id":1,"result":}"#,
            #"{"jsonrpc":"2.0","result":1,"id":007}"#, #"{"jsonrpc":"1.0","result":1,"id":1}"#,
            #"{"jsonrpc":"2.0","id":"x","result":1}"#,
        ] {
            #expect(
                ResponseEnvelope.scan(Array(other.utf8), maxDepth: 64, checkingResult: false)?.id == nil, "\(other)")
        }
        let error = Array(#"{"jsonrpc":"2.0","error":{"code":-32050,"message":"Unavailable"},"id":7}"#.utf8)
        let failed = try #require(ResponseEnvelope.scan(error, maxDepth: 64, checkingResult: false))
        guard case .error(let rpcError) = failed.outcome else {
            Issue.record("expected an error, got \(failed.outcome)")
            return
        }
        #expect(failed.id == 7 && rpcError.code == -32050)
    }

    @Test func unreadResultsOverARealConnection() async throws {
        try await withServer(.unix) { _, address in
            var configuration = RPCClientConfiguration()
            configuration.checksUnreadResults = false
            let client = try await RPCClient.connect(to: address, configuration: configuration)
            defer { client.close() }
            let params: JSONValue = ["copy": "7 days free, then $19.99/year", "list": [1, 2, ["x": nil]], "id": 12]
            #expect(try await Self.rawCall(client, "echo", params).get().value() == params)
            #expect(try await client.call(method: "echo", params: params) == params)
            let failed = await Self.rawCall(client, "fail", nil)
            if case .failure(let error as RPCError) = failed {
                #expect(error.code == -32050)
            } else {
                Issue.record("expected the error response, got \(failed)")
            }
        }
    }

    /// A result object with only some members built: those members exactly as a full parse gives them, the others
    /// absent but still checked; anything but an object is parsed whole.
    @Test func resultsWithOnlySomeMembersBuilt() throws {
        func raw(_ text: String) -> RPCRawResult { RPCRawResult(frame: Array(text.utf8)) }
        let jws = String(repeating: "eyJhbGciOiJFUzI1NiJ9", count: 30)
        let text = #"{"format":"jws","compactJWS":"\#(jws)","offerId":"o\u00e9","extra":[1,{"deep":[null,true]}]}"#
        let full = try raw(text).value()
        let kept = try raw(text).value(keeping: ["compactJWS", "offerId", "absent"])
        #expect(kept == ["compactJWS": full["compactJWS"]!, "offerId": "oé"])
        #expect(kept["format"] == nil && kept["extra"] == nil)
        #expect(try raw(" { } ").value(keeping: ["a"]) == .object([:]))
        // Not an object: the whole result.
        #expect(try raw(#"["a",1]"#).value(keeping: ["a"]) == ["a", 1])
        #expect(try raw(#""text""#).value(keeping: ["a"]) == "text")
        // What a parse rejects is rejected, in a skipped member too: syntax, escapes, trailing bytes, literals,
        // control characters, a built member repeated.
        for invalid in [
            #"{"a":1,"b":[1,}"#, #"{"a":1,"b":"\x"}"#, #"{"a":1} x"#, #"{"a":1,"a":2}"#, #"{"b":tru}"#,
            #"{"a":1,"b":"\#u{01}"}"#,
        ] {
            #expect(throws: JSONRPCError.self, "\(invalid)") { try raw(invalid).value(keeping: ["a"]) }
        }
        let deep = "{\"a\":1,\"b\":" + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}"
        #expect(throws: JSONRPCError.self) { try raw(deep).value(keeping: ["a"]) }
        var invalidUTF8 = Array(#"{"a":1,"b":"x"#.utf8)
        invalidUTF8 += [0xFF] + Array(#""}"#.utf8)
        #expect(throws: JSONRPCError.self) { try RPCRawResult(frame: invalidUTF8).value(keeping: ["a"]) }
        // A repeated key among the skipped members is left to a parse, as skipping leaves it.
        #expect(try raw(#"{"a":1,"b":2,"b":3}"#).value(keeping: ["a"]) == ["a": 1])
    }

    /// A whole response read as an HTTP client reads a body: the result located, the error parsed, anything else nil.
    @Test func wholeResponsesReadAsAClientOfManyAnswers() throws {
        let body = Array(#"{"jsonrpc":"2.0","result":{"offerId":"o1","copy":"7 days free"},"id":1}"#.utf8)
        guard case .success(let raw) = RPCRawResult.response(body, checkingResult: false) else {
            Issue.record("expected a located result")
            return
        }
        #expect(try raw.value() == ["offerId": "o1", "copy": "7 days free"])
        #expect(try raw.value(keeping: ["offerId"]) == ["offerId": "o1"])
        let error = Array(#"{"jsonrpc":"2.0","error":{"code":-32041,"message":"Code exhausted"},"id":1}"#.utf8)
        guard case .failure(let rpcError) = RPCRawResult.response(error) else {
            Issue.record("expected the error")
            return
        }
        #expect(rpcError.code == -32041 && rpcError.message == "Code exhausted")
        for other in [#"{"status":"ok"}"#, #"[{"jsonrpc":"2.0","result":1,"id":1}]"#, "", "not json"] {
            #expect(RPCRawResult.response(Array(other.utf8)) == nil, "\(other)")
        }
    }

    @Test func rawResultsOverARealConnection() async throws {
        try await withServer(.unix) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            let params: JSONValue = ["copy": "7 days free, then $19.99/year", "list": [1, 2, ["x": nil]], "e": "€"]
            let raw = try await Self.rawCall(client, "echo", params)
            #expect(try raw.get().value() == params)
            #expect(try JSONParsing.parse(raw.get().bytes) == params)
            // An error response is the error, not raw bytes.
            let failed = await Self.rawCall(client, "fail", nil)
            #expect(throws: RPCError.self) { try failed.get() }
            if case .failure(let error as RPCError) = failed { #expect(error.code == -32050) }
            // Calls that want their result built still get it, interleaved with raw ones on the same connection.
            async let built = client.call(method: "echo", params: params)
            async let rawAgain = Self.rawCall(client, "echo", ["n": 1])
            #expect(try await built == params)
            #expect(try await rawAgain.get().value() == ["n": 1])
        }
    }

    static func rawCall(_ client: RPCClient, _ method: String, _ params: JSONValue?) async -> Result<
        RPCRawResult, any Error
    > {
        await withCheckedContinuation { continuation in
            client.sendForRawResult(method: method, params: params, timeout: .seconds(60)) {
                continuation.resume(returning: $0)
            }
        }
    }
}
