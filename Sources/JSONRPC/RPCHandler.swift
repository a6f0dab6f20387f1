// What the gateway implements: a handler of requests with a per-connection session.

/// Handles JSON-RPC requests. One `Session` is made per connection (e.g. to hold authentication state).
///
/// Requests of one connection run concurrently (pipelining); a notification (`request.id == nil`) is handled but
/// its result is dropped. Return `.failure(RPCError)` for errors; the connection survives any handler outcome.
public protocol RPCHandler: Sendable {
    /// Per-connection state.
    associatedtype Session: Sendable

    /// Called once when a connection opens (on the transport thread: keep it cheap, no blocking).
    func makeSession(_ info: ConnectionInfo) -> Session

    /// Handles one request (or notification), on its own `Task`. When the client disconnects while it runs (the
    /// connection closes, resets, or the server's grace period ends), that task is cancelled: awaited work should
    /// stop (a query gets cancelled) and the handler return soon; its answer is dropped. A half-close (EOF on stdin,
    /// `shutdown(SHUT_WR)` on a socket) is not a disconnect: requests already sent still run and are answered.
    func handle(_ request: RPCRequest, session: Session, context: RPCContext) async -> Result<JSONValue, RPCError>

    /// Answers one request at once, on the transport's own thread, when its answer needs no waiting (one held in
    /// memory, a ping), or takes it to answer later without a task (`.later`: waiting for a shared read); nil sends
    /// it down the asynchronous path (`handle`), which must then give the same answer. Called for every single
    /// request before `handle`: it must never block or suspend, nor do more than a lookup's or a signature's work
    /// (tens of µs), since the connections of that thread wait meanwhile. Saves the request two thread hand-offs
    /// (to the cooperative pool and back) and a task. The default answers nothing at once.
    func answerNow(_ request: RPCRequest, session: Session, context: RPCContext) -> RPCNowAnswer?

    /// Called once after the connection closed and all its in-flight requests finished.
    func sessionEnded(_ session: Session)
}

extension RPCHandler {
    public func sessionEnded(_ session: Session) {}

    public func answerNow(_ request: RPCRequest, session: Session, context: RPCContext) -> RPCNowAnswer? { nil }
}

/// What `RPCHandler.answerNow` did with a request it took.
public enum RPCNowAnswer: Sendable {
    /// Starts the work of a request answered later; calls its reply exactly once, on any thread, without blocking
    /// the caller (the transport's thread) until then.
    public typealias Start = @Sendable (_ reply: @escaping @Sendable (Result<JSONValue, RPCError>) -> Void) -> Void

    /// The answer, given at once.
    case answered(Result<JSONValue, RPCError>)
    /// The answer comes from `start`'s reply (counted in flight meanwhile, like a request on a task). For work that
    /// waits without a task of its own: a batched read, whose finishing thread replies to everyone it served.
    case later(Start)
}

/// Describes a connection, for sessions and logs.
public struct ConnectionInfo: Sendable, Hashable, CustomStringConvertible {
    /// The transport kind.
    public enum Transport: String, Sendable, Hashable {
        case stdio, unix, tcp
        /// One HTTP request (`POST /v1/rpc`): a session lives for that request only.
        case http
    }

    /// Unique per server process.
    public let id: UInt64
    public let transport: Transport
    /// The listen address the connection came through (`nil` for stdio).
    public let listenAddress: ListenAddress?
    /// `host:port` of a TCP peer; `nil` otherwise.
    public let peer: String?

    public init(id: UInt64, transport: Transport, listenAddress: ListenAddress?, peer: String?) {
        self.id = id
        self.transport = transport
        self.listenAddress = listenAddress
        self.peer = peer
    }

    public var description: String {
        "conn#\(id)(\(transport.rawValue)\(peer.map { " " + $0 } ?? ""))"
    }
}

/// Per-request context: who is asking, and a way to send notifications back on the same connection.
public struct RPCContext: Sendable {
    /// The connection the request came on.
    public let connection: ConnectionInfo
    /// The request id (`nil` for notifications).
    public let requestID: RPCID?
    let sendFrame: @Sendable ([UInt8]) -> Void

    /// Creates a context (for tests of handlers): `sendFrame` receives each outgoing frame including its `\n`.
    public init(connection: ConnectionInfo, requestID: RPCID?, sendFrame: @escaping @Sendable ([UInt8]) -> Void) {
        self.connection = connection
        self.requestID = requestID
        self.sendFrame = sendFrame
    }

    /// Sends a notification (`{"jsonrpc":"2.0","method","params"}`) to the peer, e.g. progress of a long call.
    public func notify(method: String, params: JSONValue? = nil) {
        var bytes = JSONSerializer.serialize(RPCRequest(method: method, params: params, id: nil).json)
        bytes.append(0x0A)
        sendFrame(bytes)
    }
}

/// Connection-level events for logs. Never carries payloads.
public enum RPCLogEvent: Sendable, Hashable {
    case listening(ListenAddress)
    case accepted(ConnectionInfo)
    case closed(ConnectionInfo, reason: String)
    /// A connection was refused (e.g. `reason: "connection_limit"`).
    case refused(ListenAddress, reason: String)
    case frameTooLarge(ConnectionInfo)
    case shutdownStarted
    /// Shutdown finished; `forcedConnections` were closed with requests still in flight.
    case shutdownFinished(forcedConnections: Int)
}

/// Receives connection-level log events (called on transport threads: keep it cheap).
public typealias RPCLogHandler = @Sendable (RPCLogEvent) -> Void

/// Server settings.
public struct RPCServerConfiguration: Sendable {
    /// Longest accepted line in bytes (default 1 MiB).
    public var maxFrameBytes: Int = 1 << 20
    /// Requests (or batches) in flight per connection before reading pauses (default 128).
    public var maxInFlightPerConnection: Int = 128
    /// Connections accepted at once over all listeners (default 10,000); more are closed right away.
    public var maxConnections: Int = 10_000
    /// Close connections with no traffic and nothing in flight for this many seconds (`nil`: never).
    public var idleTimeout: Double? = nil
    /// Event loop threads that serve socket connections (default 1). Each accepted connection is given to the loop
    /// with the fewest and stays on it: its reads, frames handled at once and writes never leave that thread. More
    /// than one lets a busy server use more than one core for its connections' IO and at-once answers.
    public var eventLoops: Int = 1
    /// JSON nesting limit for incoming frames (default 64).
    public var maxNestingDepth: Int = JSONParsing.defaultMaxDepth
    /// Permissions of Unix socket files (default 0660).
    public var unixSocketPermissions: UInt32 = 0o660
    /// Connection-level log events.
    public var logger: RPCLogHandler? = nil
    /// How long in-flight requests may take when `RPCServer.run()` is cancelled (default 10 s); an explicit
    /// `shutdown(gracePeriod:)` passes its own.
    public var shutdownGracePeriod: Duration = .seconds(10)

    public init() {}
}
