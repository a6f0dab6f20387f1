// The request and response values the HTTP listener hands to the application, and its settings.
import JSONRPC

/// One complete HTTP request (headers and the whole body), as libmicrohttpd parsed it.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, … as sent.
    public let method: String
    /// The path, percent-decoded by libmicrohttpd, without the query; always valid UTF-8 (others are refused
    /// with `400` before they reach the application).
    public let path: String
    /// Header fields in arrival order; names lowercased.
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
    /// The listen address the request came through.
    public let listenAddress: ListenAddress
    /// When the listener first knew of the request (its request line and header fields had arrived, before its body
    /// and before any queueing in this process): deadlines that must hold for the caller count from here.
    public let receivedAt: ContinuousClock.Instant

    public init(
        method: String, path: String, headers: [(name: String, value: String)], body: [UInt8],
        listenAddress: ListenAddress, receivedAt: ContinuousClock.Instant = .now
    ) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.listenAddress = listenAddress
        self.receivedAt = receivedAt
    }

    /// The first value of a header (`name` lowercase).
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    /// The media type of `Content-Type` without parameters, lowercased (`application/json`).
    public var mediaType: String? {
        guard let value = header("content-type") else { return nil }
        let type = value.split(separator: ";", maxSplits: 1).first ?? ""
        return type.trimmingSpaces.lowercased()
    }
}

/// An HTTP response: status, extra header fields (`Content-Length` and `Date` are added by libmicrohttpd) and body.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON body with `Content-Type: application/json`.
    public static func json(_ status: Int, _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: body)
    }

}

/// A request the listener answers itself, before the application sees it.
struct Refusal: Sendable {
    let status: Int
    /// snake_case, for the body and the log event.
    let reason: String
    let message: String

    init(_ status: Int, reason: String, message: String) {
        self.status = status
        self.reason = reason
        self.message = message
    }

    /// `{"reason","message"}` (fixed ASCII strings of this module: no escaping needed), closing the connection:
    /// the rest of the request may be unread, or unreadable.
    var response: HTTPResponse {
        var response = HTTPResponse.json(status, Array("{\"reason\":\"\(reason)\",\"message\":\"\(message)\"}".utf8))
        response.headers.append(("Connection", "close"))
        return response
    }
}

/// What the application does with a request. Runs on a Swift task (never on libmicrohttpd's threads).
public typealias HTTPRequestHandler = @Sendable (HTTPRequest) async -> HTTPResponse

/// Answers a complete request without a task when it can: takes it (true) and calls `respond` exactly once, at once
/// on the calling thread or later from any thread; or leaves it (false, `respond` never called) to the
/// `HTTPRequestHandler`, which must then give the same answer. Runs on libmicrohttpd's thread, which serves other
/// connections meanwhile: it must never block or suspend, nor do more than a lookup's or a signature's work.
public typealias HTTPImmediateHandler =
    @Sendable (HTTPRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) -> Bool

/// Connection-level events for logs. Never carries payloads or header values.
public enum HTTPLogEvent: Sendable, Hashable {
    case listening(ListenAddress)
    /// A request refused by the listener itself (`reason`: `body_too_large`, `ambiguous_length`, …).
    case refused(status: Int, reason: String)
    /// A connection that did not complete its request within `requestTimeout` was shut down.
    case requestTimedOut
    case shutdownStarted
    /// Shutdown finished; `forcedRequests` were still being handled when the grace period ended.
    case shutdownFinished(forcedRequests: Int)
}

/// Listener settings.
public struct HTTPServerConfiguration: Sendable {
    /// Largest request body in bytes (the JSON-RPC frame limit; default 1 MiB): larger ones get `413`.
    public var maxBodyBytes: Int = 1 << 20
    /// Per-connection memory for the request line and header fields (default 32 KiB); more gets `431`/`413` from
    /// libmicrohttpd.
    public var maxHeaderBytes: Int = 32 << 10
    /// Open connections per listen address (default 10,000); more are closed at once.
    public var maxConnections: Int = 10_000
    /// Close a connection after this many seconds without any traffic (default 15; whole seconds).
    public var idleTimeoutSeconds: Int = 15
    /// A request's header fields and body must have arrived within this time of the connection's previous request
    /// ending (or of its accept); otherwise the connection is shut down (slowloris). Default 20 s.
    public var requestTimeout: Duration = .seconds(20)
    /// libmicrohttpd's epoll threads per listen address (IO, and the immediate handler's at-once answers; handlers
    /// run on Swift tasks). Default 2.
    public var threads: Int = 2
    /// Permissions of Unix socket files (default 0660).
    public var unixSocketPermissions: UInt32 = 0o660
    public var logger: (@Sendable (HTTPLogEvent) -> Void)? = nil

    public init() {}
}

extension StringProtocol {
    var trimmingSpaces: Substring {
        var s = Substring(self)
        while let first = s.first, first == " " || first == "\t" { s.removeFirst() }
        while let last = s.last, last == " " || last == "\t" { s.removeLast() }
        return s
    }
}
