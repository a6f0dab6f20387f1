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
            #expect(try await Self.answersByID(client, count: expected.count) == expected)
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

    /// `.later`: taken on the transport's thread, answered from another one without a task, each to its own id,
    /// between answers given at once and answers from tasks.
    @Test(arguments: Transport.allCases)
    func answersLaterWithoutATaskInterleavedWithTheOthers(transport: Transport) async throws {
        let handler = TestHandler()
        try await withServer(transport, handler: handler) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            var expected: [String: JSONValue] = [:]
            var lines = ""
            for i in 0..<90 {
                let id = "r\(i)"
                switch i % 3 {
                case 0:
                    lines +=
                        #"{"jsonrpc":"2.0","method":"later","params":{"ms":\#(i % 5),"i":\#(i)},"id":"\#(id)"}"# + "\n"
                    expected[id] = ["later": ["ms": .int(i % 5), "i": .int(i)]]
                case 1:
                    lines += #"{"jsonrpc":"2.0","method":"now","params":{"i":\#(i)},"id":"\#(id)"}"# + "\n"
                    expected[id] = ["now": ["i": .int(i)]]
                default:
                    lines += #"{"jsonrpc":"2.0","method":"sleep","params":{"ms":\#(i % 4)},"id":"\#(id)"}"# + "\n"
                    expected[id] = .int(i % 4)
                }
            }
            // A notification answered later writes nothing.
            lines += #"{"jsonrpc":"2.0","method":"later","params":{"ms":1}}"#
            try client.sendRaw(lines)
            #expect(try await Self.answersByID(client, count: expected.count) == expected)
            #expect(try await client.call(method: "now", params: ["last": true]) == ["now": ["last": true]])
        }
        #expect(handler.laterTaken.load(ordering: .relaxed) == 31)
        #expect(handler.handledLater.load(ordering: .relaxed) == 0)
    }

    /// A request answered later counts as in flight: the session ends only after its answer, even when the client
    /// has gone meanwhile (the answer is dropped, nothing crashes).
    @Test func aClosedConnectionsSessionEndsAfterItsLaterAnswers() async throws {
        let handler = TestHandler()
        try await withServer(.unix, handler: handler) { _, address in
            let client = try await RPCClient.connect(to: address)
            for i in 0..<5 {
                try client.sendRaw(#"{"jsonrpc":"2.0","method":"held","params":{"i":\#(i)},"id":\#(i)}"#)
            }
            #expect(await eventually { handler.held.withLock { $0.count } == 5 })
            client.close()
            // A second connection opened and closed after it: once its session has ended, the server has seen
            // the first one close too (one loop, events in order), and that session must still be waiting.
            let second = try await RPCClient.connect(to: address)
            #expect(try await second.call(method: "now", params: [:]) == ["now": [:]])
            second.close()
            #expect(await eventually { handler.endedSessions.load(ordering: .relaxed) >= 1 })
            #expect(handler.endedSessions.load(ordering: .relaxed) == 1)
            #expect(handler.laterAnswered.load(ordering: .relaxed) == 0)
            handler.releaseHeld()
            #expect(await eventually { handler.endedSessions.load(ordering: .relaxed) == 2 })
            #expect(handler.laterAnswered.load(ordering: .relaxed) == 5)
        }
    }

    /// stdio's reader stops reading at the in-flight cap until half the requests in flight are answered; answers
    /// given later release it like answers from tasks (a pipeline far past the cap completes, every id once).
    @Test func stdioPastTheInFlightCapWithLaterAnswers() async throws {
        let handler = TestHandler()
        var configuration = RPCServerConfiguration()
        configuration.maxInFlightPerConnection = 8
        let pair = try await StdioPair.start(handler: handler, configuration: configuration)
        let (client, served) = (pair.client, pair.served)
        var lines = ""
        for i in 0..<200 {
            lines += #"{"jsonrpc":"2.0","method":"later","params":{"ms":\#(i % 3)},"id":\#(i)}"# + "\n"
        }
        try client.sendRaw(String(lines.dropLast()))
        var ids = Set<Int64>()
        for _ in 0..<200 {
            let response = try await nextValue(client)
            ids.insert(try #require(response["id"]?.int64Value))
        }
        #expect(ids == Set(0..<200))
        client.finishWriting()
        await served.value
        pair.closeServerEnds()
        #expect(handler.laterAnswered.load(ordering: .relaxed) == 200)
    }

    /// The next `count` answers, each by its (string) id: the result, or the whole response for an error. An id
    /// answered twice is an issue.
    static func answersByID(_ client: RPCClient, count: Int) async throws -> [String: JSONValue] {
        var seen: [String: JSONValue] = [:]
        for _ in 0..<count {
            let response = try await nextValue(client)
            let id = try #require(response["id"]?.stringValue)
            #expect(seen[id] == nil, "answered twice: \(id)")
            seen[id] = response["result"] ?? response
        }
        return seen
    }
}
