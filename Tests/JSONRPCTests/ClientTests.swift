import Foundation
import OfferTestSupport
import Synchronization
import Testing

@testable import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct ClientTests {
    @Test func callTimeoutFiresAndConnectionStaysUsable() async throws {
        try await withServer(.tcp) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            do {
                _ = try await client.call(method: "sleep", params: ["ms": 500], timeout: .milliseconds(50))
                Issue.record("no timeout")
            } catch let error as JSONRPCError {
                #expect(error.code == .timeout)
            }
            // A generous allowance: the deadline is kept on the client loop's own thread, while the server's handler runs
            // on the cooperative pool the whole suite shares (it can be starved for seconds under a parallel run).
            #expect(try await client.call(method: "echo", params: [1], timeout: .seconds(60)) == [1])
        }
    }

    @Test func droppingTheLastReferenceClosesTheConnection() async throws {
        try await withServer(.unix) { server, address in
            var client: RPCClient? = try await RPCClient.connect(to: address)
            #expect(try await client?.call(method: "echo", params: [1]) == [1])
            #expect(server.connectionCount == 1)
            client = nil
            #expect(await eventually { server.connectionCount == 0 })
        }
    }

    @Test func talksToASpawnedProcess() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [
            "-c", "read line; echo '{\"jsonrpc\":\"2.0\",\"result\":{\"got\":true},\"id\":1}'; cat > /dev/null",
        ]
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        let client = try await RPCClient.attach(
            reading: stdout.fileHandleForReading, writing: stdin.fileHandleForWriting)
        #expect(try await client.call(method: "anything") == ["got": true])
        client.finishWriting()
        try stdin.fileHandleForWriting.close()
        #expect(await exitStatus(of: process) == 0)
        #expect(try await client.nextRawLine(timeout: .seconds(30)) == nil)
    }

    @Test func pacedTicksRunOnTheClientLoopUntilTheyStop() async throws {
        try await withServer(.unix) { _, address in
            let client = try await RPCClient.connect(to: address)
            defer { client.close() }
            // Each tick sends one call and asks for the next tick 2 ms later; the sixth returns nil.
            let seen = Mutex<(ticks: [UInt], answers: [UInt], values: [JSONValue])>(([], [], []))
            let answered = LiveCount()
            for _ in 0..<5 { answered.increment() }
            try await client.onLoop(after: 1_000_000) {
                let n = seen.withLock { s -> Int in
                    s.ticks.append(UInt(pthread_self()))
                    return s.ticks.count - 1
                }
                guard n < 5 else { return nil }
                client.send(method: "echo", params: [.int(n)]) { result in
                    seen.withLock { s in
                        s.answers.append(UInt(pthread_self()))
                        s.values.append((try? result.get()) ?? .null)
                    }
                    answered.decrement()
                }
                return 2_000_000
            }
            #expect(await answered.waitForZero(until: .now.advanced(by: .seconds(30))))
            #expect(await eventually { seen.withLock { $0.ticks.count } == 6 })
            // The timer stopped at nil: no more ticks, and the loop let it go (its descriptor closed with it).
            #expect(await Self.timersOnLoop(client) == 0)
            try await Task.sleep(for: .milliseconds(20))
            let final = seen.withLock { $0 }
            #expect(final.ticks.count == 6)
            #expect(final.values == [[0], [1], [2], [3], [4]])
            // Ticks and answers share one thread: the client loop's, where the calls' lines are written.
            #expect(Set(final.ticks + final.answers).count == 1)
        }
    }

    /// How many timers the client's loop holds (read on the loop thread).
    static func timersOnLoop(_ client: RPCClient) async -> Int {
        await withCheckedContinuation { continuation in
            client.loop.execute { continuation.resume(returning: client.loop.timers.count) }
        }
    }

    @Test func connectFailuresAreSystemErrors() async {
        do {
            _ = try await RPCClient.connect(to: "unix:/tmp/definitely-not-here-\(getpid()).sock")
            Issue.record("connected to nothing")
        } catch let error as JSONRPCError {
            #expect(error.code == .system)
            #expect(error.errno == ENOENT)
        } catch {
            Issue.record("unexpected \(error)")
        }
        await #expect(throws: JSONRPCError.self) { _ = try await RPCClient.connect(to: "bogus") }
    }
}
