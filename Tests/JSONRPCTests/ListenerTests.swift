import Foundation
import Testing

@testable import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct ListenerTests {
    @Test func staleSocketFileIsReplacedButLiveOneAndRegularFileAreNot() async throws {
        let path = tempSocketPath()
        // A stale socket file: bound, never listened/closed.
        let stale = try RPCServer(handler: TestHandler())
        try stale.listen(.unix(path: path))
        let live = try RPCServer(handler: TestHandler())
        do {
            try live.listen(.unix(path: path))
            Issue.record("a live socket was taken over")
        } catch {
            #expect(error.code == .invalidAddress)
        }
        // Simulate a crashed server: the file remains but nobody listens.
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        await stale.shutdown(gracePeriod: .milliseconds(100))
        #expect(access(path, F_OK) != 0)
        try SocketAddress.withSockaddr(.unix(path: path)) { sa, len, _ in _ = bind(fd, sa, len) }
        close(fd)
        #expect(access(path, F_OK) == 0)
        let bound = try live.listen(.unix(path: path))
        let client = try await RPCClient.connect(to: bound)
        #expect(try await client.call(method: "echo", params: [1]) == [1])
        client.close()
        await live.shutdown(gracePeriod: .seconds(1))

        let filePath = tempSocketPath()
        #expect(FileManager.default.createFile(atPath: filePath, contents: Data("keep".utf8)))
        defer { unlink(filePath) }
        let server = try RPCServer(handler: TestHandler())
        #expect(throws: JSONRPCError.self) { try server.listen(.unix(path: filePath)) }
        #expect(FileManager.default.contents(atPath: filePath) == Data("keep".utf8))
        await server.shutdown(gracePeriod: .milliseconds(10))
    }

    @Test func tcpEphemeralPortIsReportedAndListenAfterShutdownFails() async throws {
        let server = try RPCServer(handler: TestHandler())
        let bound = try server.listen(.tcp(host: "127.0.0.1", port: 0))
        guard case .tcp(_, let port) = bound else {
            Issue.record("not tcp")
            return
        }
        #expect(port != 0)
        #expect(server.boundAddresses == [bound])
        await server.shutdown(gracePeriod: .milliseconds(10))
        #expect(throws: JSONRPCError.self) { try server.listen(.tcp(host: "127.0.0.1", port: 0)) }
    }

    /// Operators and profiles find the loops by name (`top -H`, `perf`, ops/perf/threads.py): the kernel's name of
    /// each loop thread, not only Foundation's.
    @Test func loopThreadsCarryTheirNamesInTheKernel() async throws {
        let server = try RPCServer(handler: TestHandler())
        let bound = try server.listen(.tcp(host: "127.0.0.1", port: 0))
        let client = try await RPCClient.connect(to: bound)
        #expect(try await client.call(method: "echo", params: [1]) == [1])
        let names = Set(try threadNames())
        #expect(names.contains("rpc-server-loop"), "\(names.sorted())")
        #expect(names.contains("rpc-client-loop"), "\(names.sorted())")
        client.close()
        await server.shutdown(gracePeriod: .milliseconds(10))
    }

    @Test func stdioShutdownFlushesInFlightResponses() async throws {
        var toServer: [Int32] = [0, 0]
        var fromServer: [Int32] = [0, 0]
        #expect(pipe(&toServer) == 0)
        #expect(pipe(&fromServer) == 0)
        let handler = TestHandler()
        let server = try RPCServer(handler: handler)
        let input = toServer[0]
        let output = fromServer[1]
        let served = Task { await server.serveStdio(input: input, output: output) }
        let client = try await RPCClient.attach(readFD: fromServer[0], writeFD: toServer[1])
        #expect(try await client.call(method: "echo", params: [0]) == [0])
        try client.sendRaw("{\"jsonrpc\":\"2.0\",\"method\":\"sleep\",\"params\":{\"ms\":200},\"id\":\"s\"}")
        #expect(await handler.sleeping.wait())
        await server.shutdown(gracePeriod: .seconds(3))
        await served.value
        #expect(try await nextValue(client)["id"] == "s")
        client.close()
        close(input)
        close(output)
    }
}

@Suite struct EpollHeaderTests {
    /// The header module gives `struct epoll_event` its C layout; the old hand-written offsets assumed exactly this.
    @Test func epollEventHasTheCLayout() {
        #if arch(x86_64)
            #expect(Epoll.eventStride == 12)
        #else
            #expect(Epoll.eventStride == 16)
        #endif
        #expect(Epoll.readable == 0x001 && Epoll.writable == 0x004 && Epoll.readHangup == 0x2000)
    }
}
