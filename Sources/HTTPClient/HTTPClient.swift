// An HTTP/1.1 client on libcurl: one easy handle per connection, reused (keep-alive), on its own serial queue.
import CCurl
import Dispatch
import Foundation
import Synchronization
import Threads

/// A response as libcurl received it.
public struct HTTPClientResponse: Sendable {
    public let status: Int
    /// Header fields of the final response, names lowercased.
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    public func header(_ name: String) -> String? {
        headers.first { $0.name == name.lowercased() }?.value
    }

    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// A libcurl failure (`CURLcode` and libcurl's message).
public struct HTTPClientError: Error, CustomStringConvertible, Sendable {
    public let code: Int
    public let message: String
    public var description: String { "libcurl error \(code): \(message)" }
}

/// Where to connect: a base URL (`http://127.0.0.1:8080`), optionally through a Unix socket.
public struct HTTPEndpoint: Sendable, Hashable {
    public let baseURL: String
    public let unixSocketPath: String?

    public init(baseURL: String, unixSocketPath: String? = nil) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.unixSocketPath = unixSocketPath
    }
}

/// One HTTP connection: libcurl keeps it open between requests (keep-alive) and reconnects when the server closed
/// it. Requests on one `HTTPConnection` run one at a time, in order, on its own thread: libcurl's blocking calls
/// never run on Swift's cooperative pool, nor on Dispatch's shared worker threads (a full test run showed that
/// many connections blocked on Dispatch queues can starve the tasks that must answer them).
///
/// `@unchecked Sendable`: the easy handle is used only on `worker`'s thread (and freed in `deinit`, after the
/// worker stopped).
public final class HTTPConnection: @unchecked Sendable {
    public let endpoint: HTTPEndpoint
    private let handle: UnsafeMutableRawPointer
    private let worker = Worker()
    private static let globalInit: Void = { _ = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    public init(_ endpoint: HTTPEndpoint, timeout: Duration = .seconds(30)) throws(HTTPClientError) {
        _ = Self.globalInit
        guard let handle = curl_easy_init() else { throw HTTPClientError(code: -1, message: "curl_easy_init failed") }
        self.handle = handle
        self.endpoint = endpoint
        let millis = Int(timeout / .milliseconds(1))
        _ = og_curl_set_long(handle, CURLOPT_TIMEOUT_MS, millis)
        _ = og_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = og_curl_set_long(handle, CURLOPT_TCP_NODELAY, 1)
        // No proxy from the environment: the tests and the harness talk to a local gateway.
        _ = "*".withCString { og_curl_set_pointer(handle, CURLOPT_NOPROXY, $0) }
        if let path = endpoint.unixSocketPath {
            _ = path.withCString { og_curl_set_pointer(handle, CURLOPT_UNIX_SOCKET_PATH, $0) }
        }
    }

    deinit {
        worker.stop()
        curl_easy_cleanup(handle)
    }

    /// Sends one request and waits for its response (off the cooperative pool).
    public func send(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) async throws -> HTTPClientResponse {
        try await withCheckedThrowingContinuation { continuation in
            worker.submit {
                continuation.resume(with: Result { try self.sendBlocking(method, path, headers: headers, body: body) })
            }
        }
    }

    /// Sends one request from the calling thread (never call it from a Swift task: it blocks).
    public func sendBlocking(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) throws(HTTPClientError) -> HTTPClientResponse {
        let collector = Collector()
        var list: UnsafeMutablePointer<curl_slist>? = nil
        // An empty `Expect:` stops libcurl's `Expect: 100-continue` round trip for larger bodies.
        for line in headers.map({ "\($0.0): \($0.1)" }) + ["Expect:"] {
            list = line.withCString { curl_slist_append(list, $0) }
        }
        defer { curl_slist_free_all(list) }
        let url = endpoint.baseURL + path
        let code: CURLcode = url.withCString { urlPointer in
            method.withCString { methodPointer in
                _ = og_curl_set_pointer(handle, CURLOPT_URL, urlPointer)
                _ = og_curl_set_pointer(handle, CURLOPT_CUSTOMREQUEST, methodPointer)
                _ = og_curl_set_long(handle, CURLOPT_NOBODY, method == "HEAD" ? 1 : 0)
                _ = og_curl_set_pointer(handle, CURLOPT_HTTPHEADER, list)
                let context = Unmanaged.passUnretained(collector).toOpaque()
                _ = og_curl_set_write_callback(handle, writeBody, context)
                _ = og_curl_set_header_callback(handle, writeHeader, context)
                let bytes = body ?? []
                return bytes.withUnsafeBytes { raw in
                    if body != nil {
                        _ = og_curl_set_long(handle, CURLOPT_POSTFIELDSIZE, raw.count)
                        _ = og_curl_set_pointer(
                            handle, CURLOPT_POSTFIELDS, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
                    } else {
                        _ = og_curl_set_pointer(handle, CURLOPT_POSTFIELDS, nil)
                        _ = og_curl_set_long(handle, CURLOPT_HTTPGET, method == "GET" ? 1 : 0)
                        _ = og_curl_set_pointer(handle, CURLOPT_CUSTOMREQUEST, methodPointer)
                    }
                    return withExtendedLifetime(collector) { curl_easy_perform(handle) }
                }
            }
        }
        // Nothing may point at our buffers after this call.
        _ = og_curl_set_pointer(handle, CURLOPT_POSTFIELDS, nil)
        _ = og_curl_set_pointer(handle, CURLOPT_HTTPHEADER, nil)
        guard code == CURLE_OK else {
            throw HTTPClientError(code: Int(code.rawValue), message: String(cString: curl_easy_strerror(code)))
        }
        return HTTPClientResponse(
            status: og_curl_response_code(handle), headers: collector.headers, body: collector.body)
    }
}

/// One thread running submitted jobs in order (a connection's blocking libcurl calls). Stops after `stop()`, once
/// the jobs already submitted ran.
private final class Worker: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var stopped = false
    }

    private let state = Mutex(State())
    private let available = DispatchSemaphore(value: 0)

    init() {
        // The thread holds the worker until `stop()` lets it return.
        startThread(named: "http-client") { [self] in
            while true {
                self.available.wait()
                let next = self.state.withLock { s -> (@Sendable () -> Void)?? in
                    if s.jobs.isEmpty { return s.stopped ? .some(nil) : nil }
                    return s.jobs.removeFirst()
                }
                guard let next else { continue }
                guard let job = next else { return }
                job()
            }
        }
    }

    func submit(_ job: @escaping @Sendable () -> Void) {
        state.withLock { $0.jobs.append(job) }
        available.signal()
    }

    func stop() {
        state.withLock { $0.stopped = true }
        available.signal()
    }
}

/// What libcurl hands the callbacks of one transfer (used on the connection's queue only).
private final class Collector {
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
}

private let writeBody: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let collector = Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue()
    let total = size * count
    data.withMemoryRebound(to: UInt8.self, capacity: total) {
        collector.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: total))
    }
    return total
}

private let writeHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let collector = Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue()
    let total = size * count
    let line = data.withMemoryRebound(to: UInt8.self, capacity: total) {
        String(decoding: UnsafeBufferPointer(start: $0, count: total), as: UTF8.self)
    }
    if line.hasPrefix("HTTP/") {
        // A new response (after a 100 Continue, or a redirect): keep only the last one's fields.
        collector.headers = []
    } else if let colon = line.firstIndex(of: ":") {
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t\r\n")
        collector.headers.append((name, value))
    }
    return total
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var s = self
        while let first = s.first, set.contains(first) { s.removeFirst() }
        while let last = s.last, set.contains(last) { s.removeLast() }
        return String(s)
    }
}
