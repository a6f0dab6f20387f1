// An HTTP/1.1 client on libcurl: one easy handle per connection, reused (keep-alive); every transfer runs on one
// event-loop thread (CurlLoop).
import CCurl
import Foundation

/// A response as libcurl received it.
public struct HTTPClientResponse: Sendable {
    public let status: Int
    public let body: [UInt8]
    /// The final response's header lines as received (status line excluded), read only when asked for.
    let headerBlock: [UInt8]

    init(status: Int, headerBlock: [UInt8], body: [UInt8]) {
        self.status = status
        self.headerBlock = headerBlock
        self.body = body
    }

    /// Header fields of the final response, names lowercased.
    public var headers: [(name: String, value: String)] {
        String(decoding: headerBlock, as: UTF8.self).split(whereSeparator: \.isNewline).compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
            return (line[..<colon].lowercased(), value)
        }
    }

    public func header(_ name: String) -> String? {
        let name = name.lowercased()
        return headers.first { $0.name == name }?.value
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
/// it. It has a connection cache of its own (a libcurl share of connections), so it is one TCP or Unix socket
/// connection at a time, never one another `HTTPConnection` used. Requests on one `HTTPConnection` run one at a time,
/// in the order they were started (from one thread; from several, in the order they reached the loop). Every
/// connection's transfers run on one thread (``CurlLoop``), never on Swift's cooperative pool nor on Dispatch's shared
/// worker threads (a full test run showed that many connections blocked on Dispatch queues can starve the tasks that
/// must answer them).
///
/// `@unchecked Sendable`: the easy handle and the request queue are used on the loop thread only (and the handle is
/// freed there after the connection's last transfer).
public final class HTTPConnection: @unchecked Sendable {
    public typealias Completion = @Sendable (Result<HTTPClientResponse, HTTPClientError>) -> Void

    public let endpoint: HTTPEndpoint
    private let loop: CurlLoop
    private let handle: UnsafeMutableRawPointer
    /// The connection cache that `handle` alone uses.
    private let share: UnsafeMutableRawPointer
    /// Requests waiting for the one in flight (loop thread).
    private var waiting: [Transfer] = []
    /// The request in flight, which libcurl's callbacks fill in (loop thread).
    private var current: Transfer?
    /// The header list of the last request, kept for the next one with the same fields (loop thread).
    private var headerList: (fields: [(String, String)], list: UnsafeMutablePointer<curl_slist>?)?

    public init(_ endpoint: HTTPEndpoint, timeout: Duration = .seconds(30)) throws(HTTPClientError) {
        loop = try CurlLoop.shared.get()
        guard let share = curl_share_init() else {
            throw HTTPClientError(code: -1, message: "curl_share_init failed")
        }
        guard og_curl_share_set_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_CONNECT.rawValue)) == CURLSHE_OK,
            let handle = curl_easy_init()
        else {
            curl_share_cleanup(share)
            throw HTTPClientError(code: -1, message: "libcurl could not make a connection's handle")
        }
        self.handle = handle
        self.share = share
        self.endpoint = endpoint
        _ = og_curl_set_pointer(handle, CURLOPT_SHARE, share)
        // At least a millisecond: libcurl reads 0 as no limit at all.
        let millis = max(1, Int(timeout / .milliseconds(1)))
        _ = og_curl_set_long(handle, CURLOPT_TIMEOUT_MS, millis)
        _ = og_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = og_curl_set_long(handle, CURLOPT_TCP_NODELAY, 1)
        // No proxy from the environment: the tests and the harness talk to a local gateway.
        _ = "*".withCString { og_curl_set_pointer(handle, CURLOPT_NOPROXY, $0) }
        if let path = endpoint.unixSocketPath {
            _ = path.withCString { og_curl_set_pointer(handle, CURLOPT_UNIX_SOCKET_PATH, $0) }
        }
        // The callbacks find the connection from their context: a transfer in flight holds it (`begin`).
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = og_curl_set_write_callback(handle, writeBody, context)
        _ = og_curl_set_header_callback(handle, writeHeader, context)
    }

    deinit {
        // No transfer holds the connection, so the handle is in no multi handle: free it on the loop's thread all
        // the same, where every other use of it happened.
        let owned = OwnedHandle(handle: handle, share: share, list: headerList?.list)
        loop.execute {
            curl_slist_free_all(owned.list)
            curl_easy_cleanup(owned.handle)
            // Closes the kept-alive connection (the handle, its only user, is gone).
            curl_share_cleanup(owned.share)
        }
    }

    /// Sends one request and waits for its response.
    public func send(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) async throws(HTTPClientError) -> HTTPClientResponse {
        let result = await withCheckedContinuation { continuation in
            start(method, path, headers: headers, body: body) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Sends one request; `done` runs with its response on the client's loop thread, where it must not block. It
    /// may send the next request (which then leaves at once, without a thread switch).
    public func start(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
        _ done: @escaping Completion
    ) {
        let transfer = Transfer(method: method, url: endpoint.baseURL + path, headers: headers, body: body, done: done)
        loop.execute { [self] in
            if current != nil {
                waiting.append(transfer)
            } else if !begin(transfer) {
                transfer.done(.failure(Self.notStarted))
            }
        }
    }

    // MARK: Loop thread

    /// Hands `transfer` to libcurl; false when libcurl would not take it (then nothing of it is in flight).
    private func begin(_ transfer: Transfer) -> Bool {
        transfer.url.withCString { _ = og_curl_set_pointer(handle, CURLOPT_URL, $0) }
        if let body = transfer.body {
            transfer.body = nil
            _ = og_curl_set_long(handle, CURLOPT_NOBODY, 0)
            _ = og_curl_set_long(handle, CURLOPT_POSTFIELDSIZE, body.count)
            // libcurl copies the body now (and sets the method to POST), so nothing of ours must outlive this call.
            body.withUnsafeBytes {
                _ = og_curl_set_pointer(
                    handle, CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
            }
        } else {
            // GET resets the method and any body; HEAD asks for no body back.
            _ = og_curl_set_long(handle, CURLOPT_HTTPGET, 1)
            _ = og_curl_set_long(handle, CURLOPT_NOBODY, transfer.method == "HEAD" ? 1 : 0)
        }
        if transfer.method == "GET" || transfer.method == "HEAD" {
            _ = og_curl_set_pointer(handle, CURLOPT_CUSTOMREQUEST, nil)
        } else {
            _ = transfer.method.withCString { og_curl_set_pointer(handle, CURLOPT_CUSTOMREQUEST, $0) }
        }
        _ = og_curl_set_pointer(handle, CURLOPT_HTTPHEADER, headerList(for: transfer.headers))
        // Adding only schedules the transfer (libcurl runs it when the loop calls it next), so the reference the loop
        // finds the connection by when the transfer ends (`finished`) can be taken once the add succeeded.
        guard loop.add(handle) else { return false }
        current = transfer
        _ = og_curl_set_private(handle, Unmanaged.passRetained(self).toOpaque())
        return true
    }

    /// What a request that libcurl would not take fails with.
    private static let notStarted = HTTPClientError(
        code: Int(CURLE_FAILED_INIT.rawValue), message: "libcurl did not take the request")

    /// libcurl's header list for `fields`: the last request's again when its fields were the same. An empty
    /// `Expect:` stops libcurl's `Expect: 100-continue` round trip for larger bodies.
    private func headerList(for fields: [(String, String)]) -> UnsafeMutablePointer<curl_slist>? {
        if let kept = headerList, kept.fields.elementsEqual(fields, by: { $0 == $1 }) { return kept.list }
        curl_slist_free_all(headerList?.list)
        var list: UnsafeMutablePointer<curl_slist>? = nil
        for line in fields.map({ "\($0.0): \($0.1)" }) + ["Expect:"] {
            list = line.withCString { curl_slist_append(list, $0) }
        }
        headerList = (fields, list)
        return list
    }

    /// The transfer in flight ended with `code` (called by the loop, which removed the handle from the multi handle
    /// and holds the reference `begin` took until this returns). Starts the next waiting request before answering, so
    /// a request the answer's callback starts queues behind those already waiting; answers waiting requests that
    /// libcurl would not take after this one, in order.
    func finished(_ code: CURLcode) {
        guard let transfer = current else { return }
        current = nil
        let result: Result<HTTPClientResponse, HTTPClientError> =
            code == CURLE_OK
            ? .success(
                HTTPClientResponse(
                    status: og_curl_response_code(handle), headerBlock: transfer.headerBlock, body: transfer.received))
            : .failure(HTTPClientError(code: Int(code.rawValue), message: String(cString: curl_easy_strerror(code))))
        var refused: [Transfer] = []
        while !waiting.isEmpty {
            let next = waiting.removeFirst()
            if begin(next) { break }
            refused.append(next)
        }
        transfer.done(result)
        for next in refused { next.done(.failure(Self.notStarted)) }
    }

    /// Where libcurl's callbacks put what arrives for the transfer in flight.
    fileprivate func received(body bytes: UnsafeRawBufferPointer) { current?.received.append(contentsOf: bytes) }

    fileprivate func received(headerLine bytes: UnsafeRawBufferPointer) {
        guard let transfer = current else { return }
        if bytes.starts(with: "HTTP/".utf8) {
            // A new response (after a 100 Continue, or a redirect): keep only the last one's fields.
            transfer.headerBlock.removeAll(keepingCapacity: true)
        } else {
            transfer.headerBlock.append(contentsOf: bytes)
        }
    }
}

/// One request and what has arrived of its response. `@unchecked Sendable`: made on the caller's thread, then used on
/// the loop thread only.
private final class Transfer: @unchecked Sendable {
    let method: String
    let url: String
    let headers: [(String, String)]
    /// Until libcurl copied it.
    var body: [UInt8]?
    let done: HTTPConnection.Completion
    var received: [UInt8] = []
    var headerBlock: [UInt8] = []

    init(
        method: String, url: String, headers: [(String, String)], body: [UInt8]?,
        done: @escaping HTTPConnection.Completion
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.done = done
    }
}

/// A freed connection's libcurl resources, handed to the loop thread.
private struct OwnedHandle: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    let share: UnsafeMutableRawPointer
    let list: UnsafeMutablePointer<curl_slist>?
}

private let writeBody: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let total = size * count
    Unmanaged<HTTPConnection>.fromOpaque(context).takeUnretainedValue()
        .received(body: UnsafeRawBufferPointer(start: data, count: total))
    return total
}

private let writeHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let data, let context else { return 0 }
    let total = size * count
    Unmanaged<HTTPConnection>.fromOpaque(context).takeUnretainedValue()
        .received(headerLine: UnsafeRawBufferPointer(start: data, count: total))
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
