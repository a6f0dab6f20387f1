import Foundation
import HTTPClient
import HTTPServer
import JSONRPC
import Synchronization
import Testing

/// The client (every connection's transfers on one libcurl loop thread) against the real listener: a connection's
/// requests in order, completions that send the next request, methods and bodies, failures, connections freed.
@Suite("HTTP client")
struct HTTPClientTests {
    /// A listener answering each request with what it received: method, path and body.
    static func startEcho() throws -> (HTTPServer, String) {
        let server = HTTPServer { request in
            .json(
                200,
                JSONSerializer.serialize([
                    "method": .string(request.method), "path": .string(request.path),
                    "body": .string(String(decoding: request.body, as: UTF8.self)),
                ]))
        }
        guard case .tcp(let host, let port) = try server.listen(.tcp(host: "127.0.0.1", port: 0)) else {
            throw HTTPServerTests.NotTCP()
        }
        return (server, "http://\(host):\(port)")
    }

    /// What the echo answered: (method, path, body).
    static func echoed(_ response: HTTPClientResponse) throws -> (String?, String?, String?) {
        let value = try JSONParsing.parse(response.body)
        return (value["method"]?.stringValue, value["path"]?.stringValue, value["body"]?.stringValue)
    }

    @Test("requests started together on one connection are answered in order, each with its own body")
    func oneConnectionInOrder() async throws {
        let (server, base) = try Self.startEcho()
        let connection = try HTTPConnection(HTTPEndpoint(baseURL: base), timeout: .seconds(60))
        let answers = Mutex<[(Int, Result<HTTPClientResponse, HTTPClientError>)]>([])
        let count = 50
        await withCheckedContinuation { (all: CheckedContinuation<Void, Never>) in
            for i in 0..<count {
                connection.start("POST", "/r\(i)", body: Array("body \(i)".utf8)) { result in
                    let done = answers.withLock { list in
                        list.append((i, result))
                        return list.count == count
                    }
                    if done { all.resume() }
                }
            }
        }
        let received = answers.withLock { $0 }
        #expect(received.map(\.0) == Array(0..<count), "answered in the order they were started")
        for (i, result) in received {
            let response = try result.get()
            #expect(response.status == 200)
            #expect(response.header("Content-Type") == "application/json")
            let (method, path, body) = try Self.echoed(response)
            #expect(method == "POST" && path == "/r\(i)" && body == "body \(i)")
        }
        await server.shutdown(gracePeriod: .seconds(1))
    }

    @Test("completions that send the next request (closed loops on the client's thread) run to the end")
    func chainedCompletions() async throws {
        let (server, base) = try Self.startEcho()
        let connections = try (0..<8).map { _ in
            try HTTPConnection(HTTPEndpoint(baseURL: base), timeout: .seconds(60))
        }
        let perConnection = 100
        let answered = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            let remaining = Atomic<Int>(connections.count)
            @Sendable func send(_ connection: HTTPConnection, _ k: Int, _ n: Int) {
                guard n < perConnection else {
                    if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { finished.resume() }
                    return
                }
                connection.start("GET", "/c\(k)/\(n)") { result in
                    let path = (try? result.get()).flatMap { try? Self.echoed($0).1 }
                    if path == "/c\(k)/\(n)" {
                        answered.add(1, ordering: .relaxed)
                    } else {
                        failed.add(1, ordering: .relaxed)
                    }
                    send(connection, k, n + 1)
                }
            }
            for (k, connection) in connections.enumerated() { send(connection, k, 0) }
        }
        #expect(answered.load(ordering: .relaxed) == connections.count * perConnection)
        #expect(failed.load(ordering: .relaxed) == 0)
        await server.shutdown(gracePeriod: .seconds(1))
    }

    @Test("methods and bodies: GET, HEAD and DELETE send none after a POST sent one; PUT sends its own")
    func methodsAndBodies() async throws {
        let (server, base) = try Self.startEcho()
        let connection = try HTTPConnection(HTTPEndpoint(baseURL: base), timeout: .seconds(60))
        let post = try await connection.send("POST", "/a", headers: [("X-Test", "1")], body: Array("first".utf8))
        #expect(try Self.echoed(post) == ("POST", "/a", "first"))
        // The POST's body must not leak into the requests without one that follow on the same handle.
        let get = try await connection.send("GET", "/b")
        #expect(try Self.echoed(get) == ("GET", "/b", ""))
        let delete = try await connection.send("DELETE", "/c")
        #expect(try Self.echoed(delete) == ("DELETE", "/c", ""))
        let head = try await connection.send("HEAD", "/d")
        #expect(head.status == 200 && head.body.isEmpty)
        let put = try await connection.send("PUT", "/e", body: Array("second".utf8))
        #expect(try Self.echoed(put) == ("PUT", "/e", "second"))
        let empty = try await connection.send("POST", "/f", body: [])
        #expect(try Self.echoed(empty) == ("POST", "/f", ""))
        await server.shutdown(gracePeriod: .seconds(1))
    }

    @Test("a connection that cannot be made fails with libcurl's error, and so does the request queued behind it")
    func refused() async throws {
        // A Unix socket path nobody can have bound (its directory does not exist): no port another process could take.
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("og-\(UUID().uuidString)/none.sock")
        let connection = try HTTPConnection(
            HTTPEndpoint(baseURL: "http://localhost", unixSocketPath: missing.path), timeout: .seconds(10))
        let results = Mutex<[Result<HTTPClientResponse, HTTPClientError>]>([])
        await withCheckedContinuation { (both: CheckedContinuation<Void, Never>) in
            for path in ["/one", "/two"] {
                connection.start("GET", path) { result in
                    if results.withLock({ list in
                        list.append(result)
                        return list.count == 2
                    }) {
                        both.resume()
                    }
                }
            }
        }
        for result in results.withLock({ $0 }) {
            guard case .failure(let error) = result else {
                Issue.record("a request without a server was answered")
                continue
            }
            #expect(error.code == 7, "CURLE_COULDNT_CONNECT: \(error)")
        }
    }

    @Test("connections dropped after their requests are freed; the client goes on serving the others")
    func droppedConnections() async throws {
        let (server, base) = try Self.startEcho()
        for round in 0..<5 {
            var connections = try (0..<20).map { _ in
                try HTTPConnection(HTTPEndpoint(baseURL: base), timeout: .seconds(60))
            }
            try await withThrowingTaskGroup(of: Int.self) { group in
                for (i, connection) in connections.enumerated() {
                    group.addTask { try await connection.send("GET", "/\(round)/\(i)").status }
                }
                for try await status in group { #expect(status == 200) }
            }
            connections.removeAll()
        }
        let last = try HTTPConnection(HTTPEndpoint(baseURL: base), timeout: .seconds(60))
        #expect(try await last.send("GET", "/last").status == 200)
        await server.shutdown(gracePeriod: .seconds(1))
    }
}
