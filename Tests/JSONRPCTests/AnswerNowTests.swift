import Foundation
import Synchronization
import Testing

@testable import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// `RPCHandler.answerNow`: what a handler can answer from memory is answered on the transport's thread, between
/// requests that go down the task path, each matched to its own id, and nothing else changes.
@Suite struct AnswerNowTests {
    @Test(arguments: Transport.allCases)
    func answersAtOnceOnTheLoopThreadInterleavedWithTaskAnswers(transport: Transport) async throws {
        let handler = TestHandler()
        try await withServer(transport, handler: handler) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            // One pipeline: answered at once, refused at once (so handled on a task), and slow task answers.
            var expected: [String: JSONValue] = [:]
            var lines = ""
            for i in 0..<120 {
                let id = "r\(i)"
                switch i % 4 {
                case 0:
                    lines += #"{"jsonrpc":"2.0","method":"now","params":{"i":\#(i)},"id":"\#(id)"}"# + "\n"
                    expected[id] = ["now": ["i": .int(i)]]
                case 1:
                    lines += #"{"jsonrpc":"2.0","method":"maybeNow","params":{"now":true},"id":"\#(id)"}"# + "\n"
                    expected[id] = ["now": ["now": true]]
                case 2:
                    lines += #"{"jsonrpc":"2.0","method":"maybeNow","params":{"now":false},"id":"\#(id)"}"# + "\n"
                    expected[id] = ["later": ["now": false]]
                default:
                    lines += #"{"jsonrpc":"2.0","method":"sleep","params":{"ms":\#(i % 7)},"id":"\#(id)"}"# + "\n"
                    expected[id] = .int(i % 7)
                }
            }
            try client.sendRaw(String(lines.dropLast()))
            var seen: [String: JSONValue] = [:]
            for _ in 0..<expected.count {
                let response = try await nextValue(client)
                let id = try #require(response["id"]?.stringValue)
                #expect(seen[id] == nil, "answered twice: \(id)")
                seen[id] = response["result"] ?? response
            }
            #expect(seen == expected)
        }
        let (count, inTasks) = handler.answeredNow.withLock { ($0.count, $0.inTasks) }
        #expect(count == 60)
        #expect(inTasks == 0)
        #expect(handler.handledLater.load(ordering: .relaxed) == 30)
    }

    @Test func largeFramesAndBatchesAreAnsweredOnTheirTask() async throws {
        let handler = TestHandler()
        try await withServer(.unix, handler: handler) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            let padding = String(repeating: "p", count: 5_000)
            let large = try await client.call(method: "maybeNow", params: ["now": true, "pad": .string(padding)])
            #expect(large["later"]?["pad"]?.stringValue?.count == 5_000)
            try client.sendRaw(#"[{"jsonrpc":"2.0","method":"now","id":1},{"jsonrpc":"2.0","method":"now","id":2}]"#)
            let batch = try await nextValue(client)
            #expect(batch.arrayValue?.count == 2)
            #expect(batch.arrayValue?.allSatisfy { $0["result"]?["later"] != nil } == true)
        }
        #expect(handler.answeredNow.withLock { $0.count } == 0)
        #expect(handler.handledLater.load(ordering: .relaxed) == 3)
    }

    @Test func aNotificationAnsweredAtOnceWritesNothing() async throws {
        let handler = TestHandler()
        try await withServer(.tcp, handler: handler) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            try client.sendRaw(#"{"jsonrpc":"2.0","method":"now","params":{"n":1}}"#)
            try client.sendRaw(#"{"jsonrpc":"2.0","method":"now","params":{"n":2},"id":"after"}"#)
            let first = try await nextValue(client)
            #expect(first["id"] == "after")
            #expect(first["result"] == ["now": ["n": 2]])
        }
        #expect(handler.answeredNow.withLock { $0.count } == 2)
    }

    @Test func stdioWritesAnswersGivenAtOnce() async throws {
        let handler = TestHandler()
        let pair = try await StdioPair.start(handler: handler)
        let (client, served) = (pair.client, pair.served)
        #expect(try await client.call(method: "now", params: ["x": 1]) == ["now": ["x": 1]])
        #expect(try await client.call(method: "maybeNow", params: ["now": false]) == ["later": ["now": false]])
        client.finishWriting()
        await served.value
        pair.closeServerEnds()
        #expect(handler.answeredNow.withLock { ($0.count, $0.inTasks) } == (1, 0))
        #expect(handler.handledLater.load(ordering: .relaxed) == 1)
    }
}
