import Foundation
import Testing

@testable import JSONRPC

@Suite struct LineFramerTests {
    func drain(_ framer: inout LineFramer) -> [LineFramer.Event] {
        var events: [LineFramer.Event] = []
        while let event = framer.next() { events.append(event) }
        return events
    }

    @Test func splitsLinesAcrossChunksAndSkipsEmptyOnes() {
        var framer = LineFramer(limit: 100)
        framer.append(Array("ab".utf8))
        #expect(drain(&framer) == [])
        framer.append(Array("c\r\n\n\r\nde\nf".utf8))
        #expect(drain(&framer) == [.frame(Array("abc".utf8)), .frame(Array("de".utf8))])
        framer.append(Array("g\n".utf8))
        #expect(drain(&framer) == [.frame(Array("fg".utf8))])
        #expect(framer.bufferedCount == 0)
    }

    @Test func oversizedLineIsDiscardedWithoutBufferingAndStreamRecovers() {
        var framer = LineFramer(limit: 10)
        framer.append(Array("ok\n0123456789ABC".utf8))
        #expect(drain(&framer) == [.frame(Array("ok".utf8)), .tooLarge])
        for _ in 0..<1000 {
            framer.append([UInt8](repeating: 0x41, count: 1000))
            #expect(framer.bufferedCount == 0)
        }
        #expect(drain(&framer) == [])
        framer.append(Array("tail\nnext\n".utf8))
        #expect(drain(&framer) == [.frame(Array("next".utf8))])
    }

    @Test func lineOverLimitArrivingWholeIsRejectedAndExactLimitAccepted() {
        var framer = LineFramer(limit: 4)
        framer.append(Array("12345\n1234\n".utf8))
        #expect(drain(&framer) == [.tooLarge, .frame(Array("1234".utf8))])
    }
}

@Suite struct ProtocolTests {
    func classify(_ text: String) -> RPCInbound { RPCInbound.classify(Array(text.utf8)) }

    func rejectCode(_ inbound: RPCInbound) -> Int? {
        if case .reject(let response) = inbound, case .failure(let error) = response.result { return error.code }
        return nil
    }

    @Test func validRequestShapes() {
        #expect(
            classify("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":1}")
                == .single(.request(RPCRequest(method: "m", params: nil, id: .int(1)))))
        #expect(
            classify("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[1],\"id\":\"x\"}")
                == .single(.request(RPCRequest(method: "m", params: [1], id: .string("x")))))
        #expect(
            classify("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":null}")
                == .single(.request(RPCRequest(method: "m", params: nil, id: .null))))
        #expect(
            classify("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{}}")
                == .single(.request(RPCRequest(method: "m", params: .object(JSONObject()), id: nil))))
    }

    static let invalidRequests: [(String, RPCID?)] = [
        ("{\"method\":\"m\",\"id\":1}", .int(1)),
        ("{\"jsonrpc\":\"1.0\",\"method\":\"m\",\"id\":2}", .int(2)),
        ("{\"jsonrpc\":2.0,\"method\":\"m\",\"id\":3}", .int(3)),
        ("{\"jsonrpc\":\"2.0\",\"method\":1,\"id\":4}", .int(4)),
        ("{\"jsonrpc\":\"2.0\",\"id\":5}", .int(5)),
        ("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":3,\"id\":6}", .int(6)),
        ("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":\"s\",\"id\":\"seven\"}", .string("seven")),
        ("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":{}}", nil),
        ("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":[1]}", nil),
        ("1", nil),
        ("\"str\"", nil),
        ("null", nil),
    ]

    @Test(arguments: invalidRequests)
    func invalidRequestsAnswerWithTheReadableID(text: String, id: RPCID?) {
        guard case .single(.invalid(let invalid)) = classify(text) else {
            Issue.record("not classified as invalid")
            return
        }
        #expect(invalid.error.code == -32600)
        #expect(invalid.id == id)
    }

    @Test func parseErrorsEmptyBatchAndBatchEntries() {
        #expect(rejectCode(classify("{\"jsonrpc\":")) == -32700)
        #expect(rejectCode(classify(String(repeating: "[", count: 10_000))) == -32700)
        #expect(rejectCode(classify("[]")) == -32600)
        guard case .batch(let entries) = classify("[1, {\"jsonrpc\":\"2.0\",\"method\":\"m\"}, {}]") else {
            Issue.record("not a batch")
            return
        }
        #expect(entries.count == 3)
        if case .invalid(let e) = entries[0] { #expect(e.error.code == -32600) } else { Issue.record("entry 0") }
        #expect(entries[1] == .request(RPCRequest(method: "m", params: nil, id: nil)))
        if case .invalid = entries[2] {} else { Issue.record("entry 2") }
    }

    @Test func responsesAndErrorsRoundTrip() throws {
        let error = RPCError(code: -32050, message: "Unavailable", reason: "database_down", retryable: true)
        #expect(
            error.json == [
                "code": -32050, "message": "Unavailable",
                "data": ["reason": "database_down", "retryable": true],
            ])
        let response = RPCResponse(id: .string("a"), result: .failure(error))
        #expect(RPCResponse(json: response.json) == response)
        let ok = RPCResponse(id: .int(3), result: .success(["x": 1]))
        #expect(RPCResponse(json: try JSONParsing.parse(JSONSerializer.serialize(ok.json))) == ok)
        for r in [ok, response, RPCResponse(id: .null, result: .success(.null))] {
            var direct: [UInt8] = []
            r.append(to: &direct)
            #expect(direct == JSONSerializer.serialize(r.json))
        }
        #expect(RPCError.frameTooLarge(limit: 10).reason == "frame_too_large")
        #expect(RPCError.methodNotFound("x").code == -32601)
        #expect(RPCError.internalError().code == -32603)
        #expect(RPCError.parseError().code == -32700)
    }

    static let addresses: [(String, ListenAddress?)] = [
        ("unix:/tmp/x.sock", .unix(path: "/tmp/x.sock")),
        ("tcp:127.0.0.1:7411", .tcp(host: "127.0.0.1", port: 7411)),
        ("tcp:localhost:0", .tcp(host: "127.0.0.1", port: 0)),
        ("tcp:7411", .tcp(host: "127.0.0.1", port: 7411)),
        ("tcp::7411", .tcp(host: "127.0.0.1", port: 7411)),
        ("tcp:[::1]:80", .tcp(host: "::1", port: 80)),
        ("tcp:0.0.0.0:80", .tcp(host: "0.0.0.0", port: 80)),
        ("unix:", nil),
        ("tcp:127.0.0.1:70000", nil),
        ("tcp:127.0.0.1:x", nil),
        ("tcp:example.com:80", nil),
        ("http://x", nil),
        ("unix:/" + String(repeating: "a", count: 200), nil),
    ]

    @Test(arguments: addresses)
    func listenAddressParsing(text: String, expected: ListenAddress?) {
        #expect((try? ListenAddress(parsing: text)) == expected)
        if let expected { #expect((try? ListenAddress(parsing: expected.description)) == expected) }
    }
}
