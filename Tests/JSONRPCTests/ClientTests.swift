import Foundation
import OfferTestSupport
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
