import Foundation
import HTTPClient
import HTTPServer
import JSONRPC
import OfferTestSupport
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

    @Test("handlers run side by side: 20 requests are all with their handlers at once (suspended, not queued)")
    func concurrentHandlers() async throws {
        let gate = Gate(expected: 20)
        let server = HTTPServer { request in
            // Each handler waits until all 20 have arrived: a listener that ran them one at a time never gets there.
            let all = await gate.arriveAndWait(deadline: .now + .seconds(60))
            return .json(all ? 200 : 503, Array(request.path.utf8))
        }
        guard case .tcp(let host, let port) = try server.listen(.tcp(host: "127.0.0.1", port: 0)) else { return }
        let connections = try (0..<20).map { _ in
            try HTTPConnection(HTTPEndpoint(baseURL: "http://\(host):\(port)"), timeout: .seconds(120))
        }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for (i, connection) in connections.enumerated() {
                group.addTask { try await connection.send("GET", "/r\(i)").status }
            }
            for try await status in group { #expect(status == 200) }
        }
        await server.shutdown(gracePeriod: .seconds(1))
    }

    /// Counts arrivals; `arriveAndWait` returns true once `expected` have arrived (false at the deadline).
    final class Gate: Sendable {
        let arrived = Atomic<Int>(0)
        let expected: Int
        init(expected: Int) { self.expected = expected }

        func arriveAndWait(deadline: ContinuousClock.Instant) async -> Bool {
            arrived.add(1, ordering: .relaxed)
            while ContinuousClock.now < deadline {
                if arrived.load(ordering: .relaxed) >= expected { return true }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return false
        }
    }

    @Test("shutdown: the request in progress is answered, then no new connection is accepted")
    func gracefulShutdown() async throws {
        let handler = Slow(delay: .milliseconds(800))
        let (server, base) = try Self.start(handler)
        let connection = try HTTPConnection(HTTPEndpoint(baseURL: base), timeout: .seconds(120))
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

    @Test("the immediate handler: at once without a task, later from any thread, or declined to the task handler")
    func immediateHandler() async throws {
        let tasks = Atomic<Int>(0)
        let withoutTask = Atomic<Int>(0)
        let server = HTTPServer(
            immediate: { request, respond in
                if withUnsafeCurrentTask(body: { $0 == nil }) { withoutTask.add(1, ordering: .relaxed) }
                let body = Array(#"{"path":"\#(request.path)","bytes":\#(request.body.count)}"#.utf8)
                switch request.path {
                case "/now":
                    respond(.json(200, body))
                case "/later", "/slow":
                    let delay = request.path == "/slow" ? 800 : 20
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(delay)) {
                        respond(.json(201, body))
                    }
                default:
                    return false
                }
                return true
            },
            handler: { request in
                tasks.add(1, ordering: .relaxed)
                return .json(202, Array(#"{"path":"\#(request.path)"}"#.utf8))
            })
        guard case .tcp(let host, let port) = try server.listen(.tcp(host: "127.0.0.1", port: 0)) else { return }
        let base = "http://\(host):\(port)"
        let connection = try HTTPConnection(HTTPEndpoint(baseURL: base), timeout: .seconds(60))
        // One kept-alive connection through every path, twice: each answer on its own request.
        for _ in 0..<2 {
            let now = try await connection.send("POST", "/now", body: Array("abc".utf8))
            #expect(now.status == 200 && now.text == #"{"path":"/now","bytes":3}"#)
            let later = try await connection.send("POST", "/later", body: Array("abcd".utf8))
            #expect(later.status == 201 && later.text == #"{"path":"/later","bytes":4}"#)
            let declined = try await connection.send("GET", "/task")
            #expect(declined.status == 202 && declined.text == #"{"path":"/task"}"#)
        }
        #expect(tasks.load(ordering: .relaxed) == 2, "only the declined requests reach the task handler")
        #expect(withoutTask.load(ordering: .relaxed) == 6, "the immediate handler runs on libmicrohttpd's thread")
        // Later answers side by side on 20 connections (each suspended, none holding the others up).
        let connections = try (0..<20).map { _ in try HTTPConnection(HTTPEndpoint(baseURL: base), timeout: .seconds(60))
        }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for connection in connections { group.addTask { try await connection.send("GET", "/later").status } }
            for try await status in group { #expect(status == 201) }
        }
        // Shutdown waits for a later answer still pending.
        async let slow = connection.send("GET", "/slow")
        #expect(await Self.eventually { withoutTask.load(ordering: .relaxed) == 27 })
        await server.shutdown(gracePeriod: .seconds(10))
        let answer = try await slow
        #expect(answer.status == 201 && answer.text == #"{"path":"/slow","bytes":0}"#)
    }

    @Test("a request whose header never completes is cut at the request timeout; keep-alive is not")
    func requestTimeout() async throws {
        let handler = Slow(delay: .zero)
        let (server, base) = try Self.start(handler) { $0.requestTimeout = .milliseconds(600) }
        defer { Task { await server.shutdown(gracePeriod: .seconds(1)) } }
        guard let port = URLComponents(string: base)?.port else { return }
        // Blocking socket calls, so on a thread of their own (never on the cooperative pool).
        let (read, waited) = await onOwnThread { Self.sendPartialHeaderAndWaitForClose(port: port) }
        // EOF, or a reset when the server's deadline fired before it had read the partial header (it then closes
        // with unread bytes, which the kernel answers with RST): both are the server cutting the connection, unlike
        // our own receive timeout (EAGAIN, after 60 s).
        #expect(
            read == 0 || read == -Int(ECONNRESET),
            "closed by the server (EOF or reset), not given up on by our own receive timeout (\(read), \(waited))")
        #expect(handler.calls.load(ordering: .relaxed) == 0)
        // A kept-alive client that sends whole requests is unaffected, even across the timeout.
        let connection = try HTTPConnection(HTTPEndpoint(baseURL: base))
        for _ in 0..<3 {
            #expect(try await connection.send("GET", "/ok").status == 200)
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    struct NotTCP: Error {}

    /// Sends half a header, then waits (≤ 60 s) for the server to close: returns `recv`'s result (0 at EOF, minus
    /// errno on a failure) and the wait. Blocking: call on a dedicated thread.
    static func sendPartialHeaderAndWaitForClose(port: Int) -> (Int, Duration) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
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
        guard connected == 0 else { return (Int.min, .zero) }
        let partial = Array("GET /slow HTTP/1.1\r\nHost: x\r\nX-Partial: ".utf8)
        _ = partial.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var timeout = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 64)
        let started = ContinuousClock.now
        let read = recv(fd, &buffer, buffer.count, 0)
        return (read < 0 ? -Int(errno) : read, ContinuousClock.now - started)
    }

    static func eventually(_ condition: @Sendable () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}
