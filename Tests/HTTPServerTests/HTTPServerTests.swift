import Foundation
import HTTPClient
import HTTPServer
import JSONRPC
import Synchronization
import Testing

/// The listener alone (no gateway): a handler that takes its time, keep-alive, shutdown, the request deadline.
@Suite("HTTP server")
struct HTTPServerTests {
    /// A handler answering `{"path": …}` after `delay`, counting calls.
    final class Slow: Sendable {
        let calls = Atomic<Int>(0)
        let delay: Duration
        init(delay: Duration) { self.delay = delay }

        func handle(_ request: HTTPRequest) async -> HTTPResponse {
            calls.add(1, ordering: .relaxed)
            try? await Task.sleep(for: delay)
            return .json(200, Array(#"{"path":"\#(request.path)","bytes":\#(request.body.count)}"#.utf8))
        }
    }

    static func start(_ handler: Slow, configure: (inout HTTPServerConfiguration) -> Void = { _ in }) throws
        -> (HTTPServer, String)
    {
        var configuration = HTTPServerConfiguration()
        configure(&configuration)
        let server = HTTPServer(configuration: configuration) { await handler.handle($0) }
        guard case .tcp(let host, let port) = try server.listen(.tcp(host: "127.0.0.1", port: 0)) else {
            throw NotTCP()
        }
        return (server, "http://\(host):\(port)")
    }

    @Test("slow handlers do not hold up other connections: 20 requests of 300 ms each finish together")
    func concurrentSlowHandlers() async throws {
        let handler = Slow(delay: .milliseconds(300))
        let (server, base) = try Self.start(handler)
        let connections = try (0..<20).map { _ in try HTTPConnection(HTTPEndpoint(baseURL: base)) }
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Int.self) { group in
            for (i, connection) in connections.enumerated() {
                group.addTask { try await connection.send("GET", "/r\(i)").status }
            }
            for try await status in group { #expect(status == 200) }
        }
        // 20 × 300 ms one after another would be 6 s; suspended connections overlap (generous bound: busy machine).
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(handler.calls.load(ordering: .relaxed) == 20)
        await server.shutdown(gracePeriod: .seconds(1))
    }

    @Test("shutdown: the request in progress is answered, then no new connection is accepted")
    func gracefulShutdown() async throws {
        let handler = Slow(delay: .milliseconds(800))
        let (server, base) = try Self.start(handler)
        let connection = try HTTPConnection(HTTPEndpoint(baseURL: base))
        async let answer = connection.send("POST", "/inflight", body: Array("12345".utf8))
        // Shut down once the request is with the handler.
        #expect(await Self.eventually { handler.calls.load(ordering: .relaxed) == 1 })
        await server.shutdown(gracePeriod: .seconds(5))
        let response = try await answer
        #expect(response.status == 200)
        #expect(response.text == #"{"path":"/inflight","bytes":5}"#)
        let late = try HTTPConnection(HTTPEndpoint(baseURL: base), timeout: .seconds(2))
        await #expect(throws: HTTPClientError.self) { try await late.send("GET", "/late") }
    }

    @Test("a request whose header never completes is cut at the request timeout; keep-alive is not")
    func requestTimeout() async throws {
        let handler = Slow(delay: .zero)
        let (server, base) = try Self.start(handler) { $0.requestTimeout = .milliseconds(600) }
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        guard let port = URLComponents(string: base)?.port else { return }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)
        let partial = Array("GET /slow HTTP/1.1\r\nHost: x\r\nX-Partial: ".utf8)
        _ = partial.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // The server closes it: read returns 0 (EOF) once the deadline passed.
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 64)
        let started = ContinuousClock.now
        let read = recv(fd, &buffer, buffer.count, 0)
        #expect(read == 0, "closed by the server")
        #expect(ContinuousClock.now - started < .seconds(4))
        #expect(handler.calls.load(ordering: .relaxed) == 0)
        // A kept-alive client that sends whole requests is unaffected, even across the timeout.
        let connection = try HTTPConnection(HTTPEndpoint(baseURL: base))
        for _ in 0..<3 {
            #expect(try await connection.send("GET", "/ok").status == 200)
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    struct NotTCP: Error {}

    static func eventually(_ condition: @Sendable () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}
