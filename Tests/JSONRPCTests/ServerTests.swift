import Foundation
import Synchronization
import Testing

@testable import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

func errorCode(of value: JSONValue) -> Int64? { value["error"]?["code"]?.int64Value }

@Suite(.serialized) struct ServerTests {
    @Test(arguments: Transport.allCases)
    func callsAndEveryErrorCode(transport: Transport) async throws {
        try await withServer(transport) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            #expect(try await client.call(method: "echo", params: ["a": [1, "x"]]) == ["a": [1, "x"]])

            func expectError(_ method: String, _ params: JSONValue?, code: Int) async {
                do {
                    _ = try await client.call(method: method, params: params)
                    Issue.record("\(method) succeeded")
                } catch let error as RPCError {
                    #expect(error.code == code)
                } catch {
                    Issue.record("unexpected \(error)")
                }
            }
            await expectError("nope", nil, code: -32601)
            await expectError("internal", nil, code: -32603)
            await expectError("fail", nil, code: -32050)
            do {
                _ = try await client.call(
                    method: "typed", params: ["offers": [["price": "1"], ["price": "2"], ["cost": 3]]])
                Issue.record("typed succeeded")
            } catch let error as RPCError {
                #expect(error.code == -32602)
                #expect(error.data?["param"] == "params.offers[2].price")
                #expect(error.reason == "missing_param")
            }

            try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":")
            let parse = try await nextValue(client)
            #expect(errorCode(of: parse) == -32700)
            #expect(parse["id"] == .null)

            try client.sendRaw("{\"jsonrpc\":\"2.0\",\"id\":\"r1\"}")
            let invalid = try await nextValue(client)
            #expect(errorCode(of: invalid) == -32600)
            #expect(invalid["id"] == "r1")

            try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":null}")
            let nullID = try await nextValue(client)
            #expect(nullID["id"] == .null)
            #expect(nullID["result"] == .null)
            #expect(nullID.objectValue?.keys.contains("result") == true)
        }
    }

    @Test func batches() async throws {
        try await withServer(.unix) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            try client.sendRaw(
                "[{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1],\"id\":\"b1\"}, 1,"
                    + "{\"jsonrpc\":\"2.0\",\"method\":\"note\"},"
                    + "{\"jsonrpc\":\"2.0\",\"method\":\"nope\",\"id\":\"b2\"}]"
            )
            let batch = try await nextValue(client)
            guard case .array(let responses) = batch else {
                Issue.record("batch answer is not an array: \(batch)")
                return
            }
            #expect(responses.count == 3)
            let byID = Dictionary(responses.map { ($0["id"]?.description ?? "?", $0) }, uniquingKeysWith: { a, _ in a })
            #expect(byID["\"b1\""]?["result"] == [1])
            #expect(byID["\"b2\""].flatMap(errorCode) == -32601)
            #expect(byID["null"].flatMap(errorCode) == -32600)

            // All notifications: no response at all; the next line is the answer to the following request.
            try client.sendRaw("[{\"jsonrpc\":\"2.0\",\"method\":\"note\"},{\"jsonrpc\":\"2.0\",\"method\":\"note\"}]")
            try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[\"after\"],\"id\":\"after\"}")
            #expect(try await nextValue(client)["id"] == "after")

            try client.sendRaw("[]")
            let empty = try await nextValue(client)
            #expect(empty.objectValue != nil)
            #expect(errorCode(of: empty) == -32600)
            #expect(empty["id"] == .null)

            // Notifications are handled (3 single + 3 in batches so far).
            var count: Int64 = 0
            for _ in 0..<100 {
                count = try await client.call(method: "noteCount").int64Value ?? -1
                if count == 3 { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(count == 3)
        }
    }

    @Test(arguments: Transport.allCases)
    func pipelinedResponsesComeOutOfOrder(transport: Transport) async throws {
        try await withServer(transport) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":300},\"id\":\"slow\"}")
            try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":1},\"id\":\"fast\"}")
            #expect(try await nextValue(client)["id"] == "fast")
            #expect(try await nextValue(client)["id"] == "slow")

            // Many calls in flight on one connection, each matched to its own result.
            let results = try await withThrowingTaskGroup(of: (Int, JSONValue).self) { group in
                for i in 0..<200 {
                    group.addTask {
                        let value = try await client.call(
                            method: "sleep", params: ["ms": .int((i * 7) % 23), "value": .int(i)])
                        return (i, value)
                    }
                }
                var all: [(Int, JSONValue)] = []
                for try await result in group { all.append(result) }
                return all
            }
            #expect(results.count == 200)
            for (i, value) in results { #expect(value == .int(i)) }
        }
    }

    @Test(arguments: Transport.allCases)
    func oversizedFrameIsAnsweredAndConnectionRecovers(transport: Transport) async throws {
        try await withServer(transport) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            var big = Array("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[\"".utf8)
            big += [UInt8](repeating: 0x61, count: 2 << 20)
            big += Array("\"],\"id\":\"big\"}\n".utf8)
            try client.sendRaw(bytes: big)
            let tooLarge = try await nextValue(client)
            #expect(errorCode(of: tooLarge) == -32600)
            #expect(tooLarge["error"]?["data"]?["reason"] == "frame_too_large")
            #expect(tooLarge["id"] == .null)
            #expect(try await client.call(method: "echo", params: ["still", "here"]) == ["still", "here"])
        }
    }

    @Test func inFlightCapIsRespected() async throws {
        try await withServer(.unix, configuration: serverConfig { $0.maxInFlightPerConnection = 4 }) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            try await withThrowingTaskGroup(of: JSONValue.self) { group in
                for _ in 0..<40 { group.addTask { try await client.call(method: "concurrency") } }
                for try await value in group { #expect((value.int64Value ?? 99) <= 4) }
            }
            #expect(try await client.call(method: "maxConcurrency") == .int(4))
        }
    }

    @Test func thousandConcurrentConnections() async throws {
        #expect(ProcessLimits.raiseOpenFileLimit(to: 8192) >= 2100)
        let handler = TestHandler()
        try await withServer(.unix, handler: handler) { server, address in
            var clients: [RPCClient] = []
            for _ in 0..<1000 { clients.append(try await RPCClient.connect(to: address)) }
            #expect(await eventually { server.connectionCount == 1000 })
            let all = clients
            let sum = try await withThrowingTaskGroup(of: Int64.self) { group in
                for (i, client) in all.enumerated() {
                    group.addTask { try await client.call(method: "echo", params: [.int(i)])[0]?.int64Value ?? -1 }
                }
                var sum: Int64 = 0
                for try await value in group { sum += value }
                return sum
            }
            #expect(sum == 999 * 1000 / 2)
            for client in clients { client.close() }
            #expect(await eventually { server.connectionCount == 0 })
            #expect(await eventually { handler.endedSessions.load(ordering: .relaxed) == 1000 })
        }
    }

    @Test func idleConnectionsAreClosed() async throws {
        try await withServer(.tcp, configuration: serverConfig { $0.idleTimeout = 0.3 }) { server, address in
            // Timed from before the connect: the server's idle clock starts at its accept, later than this, so the
            // lower bound holds however late a loaded machine lets `connect` return (timed from after it, CI once saw
            // the close already waiting).
            let start = ContinuousClock.now
            let idle = try await RPCClient.connect(to: address)
            // nil = the server closed the connection.
            #expect(try await idle.nextRawLine(timeout: .seconds(30)) == nil)
            #expect(ContinuousClock.now - start >= .milliseconds(250))
            #expect(await eventually { server.connectionCount == 0 })
        }
    }

    @Test func connectionLimitIsEnforced() async throws {
        let refused = Mutex<Int>(0)
        try await withServer(
            .unix,
            configuration: serverConfig {
                $0.maxConnections = 3
                $0.logger = { event in
                    if case .refused(_, let reason) = event, reason == "connection_limit" {
                        refused.withLock { $0 += 1 }
                    }
                }
            }
        ) { server, address in
            var clients: [RPCClient] = []
            for _ in 0..<3 { clients.append(try await RPCClient.connect(to: address)) }
            for client in clients { #expect(try await client.call(method: "echo", params: [1]) == [1]) }
            let extra = try await RPCClient.connect(to: address)
            #expect(try await extra.nextRawLine(timeout: .seconds(30)) == nil)
            #expect(refused.withLock { $0 } == 1)
            #expect(server.connectionCount == 3)
            clients[0].close()
            #expect(await eventually { server.connectionCount == 2 })
            let again = try await RPCClient.connect(to: address)
            #expect(try await again.call(method: "echo", params: [2]) == [2])
            for client in clients { client.close() }
            again.close()
        }
    }

    @Test func gracefulShutdownFinishesInFlightRequests() async throws {
        let path = tempSocketPath()
        let handler = TestHandler()
        let server = try RPCServer(handler: handler)
        try server.listen(.unix(path: path))
        #expect(access(path, F_OK) == 0)
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == 0o660)
        let client = try await RPCClient.connect(to: "unix:" + path)
        async let slow = client.call(method: "sleep", params: ["ms": 300, "value": "finished"])
        #expect(await handler.sleeping.wait())
        let started = ContinuousClock.now
        // The bounds are far apart (a 0.3 s request, a 60 s grace period) because a loaded 2-core machine stalls
        // test processes for seconds: a shutdown that waited out the grace period is still told apart.
        await server.shutdown(gracePeriod: .seconds(60))
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(try await slow == "finished")
        #expect(access(path, F_OK) != 0)
        await #expect(throws: JSONRPCError.self) { _ = try await RPCClient.connect(to: "unix:" + path) }
        await server.run()  // returns immediately after shutdown
    }

    /// With several loops, each accepted connection goes to the loop serving the fewest, and everything it sends
    /// is answered on that loop's thread; shutdown drains the connections of every loop.
    @Test func connectionsAreSpreadOverTheLoopsAndStayOnTheirOwn() async throws {
        let handler = TestHandler()
        let server = try RPCServer(handler: handler, configuration: serverConfig { $0.eventLoops = 3 })
        let address = try server.listen(.unix(path: tempSocketPath()))
        var clients: [RPCClient] = []
        var threads: [JSONValue] = []
        for _ in 0..<6 {
            let client = try await RPCClient.connect(to: address)
            clients.append(client)
            let thread = try await client.call(method: "thread")
            for _ in 0..<3 { #expect(try await client.call(method: "thread") == thread) }
            threads.append(thread)
        }
        // Connected one after another: three loops, two connections each, and the loops are three threads.
        #expect(Set(threads).count == 3)
        #expect(Dictionary(grouping: threads, by: { $0 }).values.map(\.count).sorted() == [2, 2, 2])
        let names = try threadNames()
        #expect(names.filter { $0 == "rpc-server-loop" }.count >= 3, "\(names.sorted())")
        // A closed connection frees its loop's place: the next one goes there.
        clients.removeFirst().close()
        #expect(await eventually { server.connectionCount == 5 })
        let replacement = try await RPCClient.connect(to: address)
        #expect(try await replacement.call(method: "thread") == threads[0])
        clients.append(replacement)
        // Requests in flight on every loop are answered, and every loop's connections closed, before shutdown
        // returns (a loop left undrained would keep its connections open for the whole grace period).
        let answers = clients.enumerated().map { index, client in
            Task { try await client.call(method: "held", params: ["i": .int(index)]) }
        }
        #expect(await eventually { handler.laterTaken.load(ordering: .relaxed) == clients.count })
        let started = ContinuousClock.now
        let shutdown = Task { await server.shutdown(gracePeriod: .seconds(60)) }
        #expect(await eventually { server.isShuttingDown })
        handler.releaseHeld()
        await shutdown.value
        #expect(ContinuousClock.now - started < .seconds(30))
        for (index, answer) in answers.enumerated() { #expect(try await answer.value == ["held": ["i": .int(index)]]) }
        #expect(server.connectionCount == 0)
    }

    @Test func shutdownGracePeriodIsBoundedAndCancelsWhatStillRuns() async throws {
        let handler = TestHandler()
        let server = try RPCServer(handler: handler)
        let address = try server.listen(.tcp(host: "127.0.0.1", port: 0))
        let client = try await RPCClient.connect(to: address)
        let stuck = Task { try await client.call(method: "waitForCancel") }
        #expect(await handler.waiting.wait())
        let started = ContinuousClock.now
        await server.shutdown(gracePeriod: .milliseconds(200))
        // The handler waits for cancellation forever: a shutdown that did not cancel it would not return at all.
        #expect(ContinuousClock.now - started < .seconds(30))
        await #expect(throws: JSONRPCError.self) { _ = try await stuck.value }
        #expect(await handler.cancelled.wait())
        #expect(await handler.sessionEnd.wait())
    }

    @Test func shutdownReturnsWhenTheLastConnectionClosesNotAtTheEndOfTheGracePeriod() async throws {
        let handler = TestHandler()
        let server = try RPCServer(handler: handler)
        let address = try server.listen(.unix(path: tempSocketPath()))
        let client = try await RPCClient.connect(to: address)
        async let answer = client.call(method: "sleep", params: ["ms": 100, "value": "answered"])
        #expect(await handler.sleeping.wait())
        let started = ContinuousClock.now
        await server.shutdown(gracePeriod: .seconds(60))
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(try await answer == "answered")
        #expect(server.connectionCount == 0)
    }

    @Test func cancellingRunShutsTheServerDownGracefully() async throws {
        let handler = TestHandler()
        let server = try RPCServer(
            handler: handler, configuration: serverConfig { $0.shutdownGracePeriod = .seconds(30) })
        let address = try server.listen(.unix(path: tempSocketPath()))
        let client = try await RPCClient.connect(to: address)
        async let answer = client.call(method: "sleep", params: ["ms": 100, "value": "answered"])
        #expect(await handler.sleeping.wait())
        let running = Task { await server.run() }
        running.cancel()
        await running.value
        #expect(try await answer == "answered")
        #expect(server.connectionCount == 0)
        #expect(throws: JSONRPCError.self) { try server.listen(.tcp(host: "127.0.0.1", port: 0)) }
        await server.run()  // returns at once after shutdown
    }

    /// A client that goes away (a Unix socket closed, a TCP connection reset) cancels the Tasks of its requests:
    /// a handler awaiting slow work sees cancellation, and the session ends.
    @Test(arguments: Transport.allCases)
    func aClientThatDisconnectsCancelsItsRequests(transport: Transport) async throws {
        let handler = TestHandler()
        try await withServer(transport, handler: handler) { server, address in
            let request = Array(#"{"jsonrpc":"2.0","method":"waitForCancel","id":"w"}"#.utf8) + [0x0A]
            switch transport {
            case .unix:
                let client = try await RPCClient.connect(to: address)
                try client.sendRaw(bytes: request)
                #expect(await handler.waiting.wait())
                client.close()
            case .tcp:
                // A peer's FIN on TCP looks like a half-close (requests are then answered); a reset is a disconnect.
                let fd = try SocketAddress.connect(address)
                #expect(request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } > 0)
                #expect(await handler.waiting.wait())
                var abort = linger(l_onoff: 1, l_linger: 0)
                #expect(setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size)) == 0)
                close(fd)
            }
            #expect(await handler.cancelled.wait())
            #expect(await handler.sessionEnd.wait())
            #expect(await eventually { server.connectionCount == 0 })
        }
    }

    /// A half-close is not a disconnect: what was sent before it is answered, then the server closes.
    @Test(arguments: Transport.allCases)
    func halfCloseStillAnswersWhatWasSent(transport: Transport) async throws {
        let handler = TestHandler()
        try await withServer(transport, handler: handler) { server, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":100},\"id\":\"a\"}")
            try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[2],\"id\":\"b\"}")
            client.finishWriting()
            let first = try await nextValue(client)
            let second = try await nextValue(client)
            #expect(Set([first["id"], second["id"]]) == Set<JSONValue?>(["a", "b"]))
            #expect(try await client.nextRawLine(timeout: .seconds(30)) == nil)
            #expect(await handler.sessionEnd.wait())
            #expect(!handler.cancelled.isSignalled)
        }
    }

    @Test func serverNotificationsReachTheClient() async throws {
        try await withServer(.tcp) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            let steps = Mutex<[Int64]>([])
            client.onNotification { request in
                if request.method == "progress", let step = request.params?["step"]?.int64Value {
                    steps.withLock { $0.append(step) }
                }
            }
            #expect(try await client.call(method: "progress") == "done")
            #expect(steps.withLock { $0 } == [1, 2, 3])
        }
    }

    @Test func hostileFramesNeverBreakTheConnection() async throws {
        try await withServer(.unix, configuration: serverConfig { $0.maxFrameBytes = 4096 }) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            var rng = SystemRandomNumberGenerator()
            let seeds: [String] = [
                "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1,{\"a\":\"b\"}],\"id\":\"f\"}",
                "[{\"jsonrpc\":\"2.0\",\"method\":\"note\"},{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":\"g\"}]",
                "{\"jsonrpc\":\"2.0\",\"method\":\"typed\",\"params\":{\"offers\":[{\"price\":\"1\"}]},\"id\":\"h\"}",
                String(repeating: "[", count: 500), "\"\\ud800\"", "1e999999", "{\"a\":1,\"a\":2}",
            ]
            var sent = 0
            var chunk: [UInt8] = []
            for i in 0..<10_000 {
                var frame: [UInt8]
                switch i % 4 {
                case 0:  // random bytes
                    frame = (0..<Int.random(in: 1...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng)
                    }
                case 1:  // mutated seed
                    frame = Array(seeds[Int.random(in: 0..<seeds.count, using: &rng)].utf8)
                    for _ in 0..<Int.random(in: 0...4, using: &rng) where !frame.isEmpty {
                        frame[Int.random(in: 0..<frame.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                    }
                case 2:  // truncated seed
                    let seed = Array(seeds[Int.random(in: 0..<seeds.count, using: &rng)].utf8)
                    frame = Array(seed.prefix(Int.random(in: 0...seed.count, using: &rng)))
                default:  // oversized or pure seed
                    frame =
                        i % 400 == 3
                        ? [UInt8](repeating: 0x7B, count: 10_000)
                        : Array(seeds[Int.random(in: 0..<seeds.count, using: &rng)].utf8)
                }
                // Integer ids are reserved for `call`; hostile frames use others (a stray digit id is harmless).
                chunk += frame.filter { $0 != 0x0A }
                chunk.append(0x0A)
                sent += 1
                if chunk.count > 32_768 {
                    try client.sendRaw(bytes: chunk)
                    chunk = []
                }
            }
            try client.sendRaw(bytes: chunk)
            #expect(sent == 10_000)
            #expect(try await client.call(method: "echo", params: ["alive"]) == ["alive"])
            #expect(!client.isClosed)
        }
    }
}

@Suite struct StdioTests {
    @Test func servesOverAPipePairAndFinishesInFlightAtEOF() async throws {
        let handler = TestHandler()
        let pair = try await StdioPair.start(handler: handler, configuration: serverConfig { $0.maxFrameBytes = 1024 })
        let (client, served) = (pair.client, pair.served)
        #expect(try await client.call(method: "echo", params: ["x": true]) == ["x": true])

        let steps = Mutex<Int>(0)
        client.onNotification { _ in steps.withLock { $0 += 1 } }
        #expect(try await client.call(method: "progress") == "done")
        #expect(steps.withLock { $0 } == 3)

        try client.sendRaw(String(repeating: "x", count: 5000))
        let tooLarge = try await nextValue(client)
        #expect(tooLarge["error"]?["data"]?["reason"] == "frame_too_large")

        try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":200},\"id\":\"last\"}")
        client.finishWriting()
        #expect(try await nextValue(client)["id"] == "last")
        await served.value
        #expect(await eventually { handler.endedSessions.load(ordering: .relaxed) == 1 })
        #expect(!handler.cancelled.isSignalled)
        pair.closeServerEnds()
        #expect(try await client.nextRawLine(timeout: .seconds(30)) == nil)
    }

    @Test func shutdownStopsReadingStdioThenCancelsWhatOutlivesTheGracePeriod() async throws {
        let handler = TestHandler()
        let pair = try await StdioPair.start(handler: handler)
        let (server, client, served) = (pair.server, pair.client, pair.served)
        try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":\"waitForCancel\",\"id\":\"w\"}")
        #expect(await handler.waiting.wait())
        let started = ContinuousClock.now
        await server.shutdown(gracePeriod: .milliseconds(100))
        await served.value
        // The handler waits for cancellation forever: that shutdown returned at all shows it was cancelled. The
        // bound only catches a shutdown that waited for something else; it is loose because a loaded 2-core
        // machine stalls test processes for seconds.
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(await handler.cancelled.wait())
        #expect(await handler.sessionEnd.wait())
        client.close()
        pair.closeServerEnds()
    }
}
