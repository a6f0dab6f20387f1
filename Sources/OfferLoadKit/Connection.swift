import Foundation
import JSONRPC

/// The outcome of one request, as the load engine needs it.
public enum CallOutcome: Sendable, Equatable {
    /// A result arrived.
    case success
    /// A `codes.redeem` result arrived: its `redemptionId`, `campaignId` and `replayed` flag (kept for the
    /// invariant check).
    case redeemed(redemptionId: String, campaignId: String, replayed: Bool)
    /// An `offers.sign` result arrived: the signature's nonce (lowercase UUID; kept for the ledger check).
    case signed(nonce: String)
    /// A JSON-RPC error response with this code (e.g. -32041, code exhausted).
    case rpcError(code: Int)
    /// The request got no response (connection lost, timeout); the text is for humans.
    case transportError(String)

    /// Whether the outcome counts as an error in the figures.
    public var isError: Bool {
        switch self {
        case .success, .redeemed, .signed: false
        case .rpcError, .transportError: true
        }
    }

    /// The key under which an error is counted: the JSON-RPC code as text ("-32041"), or "transport".
    public var errorKey: String? {
        switch self {
        case .success, .redeemed, .signed: nil
        case .rpcError(let code): String(code)
        case .transportError: "transport"
        }
    }
}

/// One request to send: a JSON-RPC method and its params object (sent as built, in member order).
public struct LoadRequest: Sendable, Equatable {
    public let method: String
    /// The params object, e.g. `["code": "SPRING", "customerId": "c-1"]`.
    public let params: JSONObject
    /// The params as they go on the wire, encoded once when the request is made (nil for none: `system.ping`
    /// sends no params member), so a request asked again (``Scenario/requests(_:)`` keeps a scenario's repeating
    /// requests) costs the harness no encoding.
    public let wireParams: JSONValue?

    public init(method: String, params: JSONObject) {
        self.method = method
        self.params = params
        self.wireParams = params.isEmpty ? nil : .encoded(EncodedJSON(.object(params)))
    }
}

/// One connection to a gateway, able to pipeline: `call` may be invoked concurrently (up to the pipeline depth)
/// and each call returns when its own response arrives. Authentication happens in the connector.
public protocol LoadConnection: Sendable {
    /// Sends `request` and returns its outcome once the matching response arrived (or the connection failed).
    func call(_ request: LoadRequest) async -> CallOutcome
    /// Closes the connection after the run (in-flight calls have finished by then).
    func close() async
}

extension LoadConnection {
    public func close() async {}
}

/// A connection that can also hand an outcome to a callback instead of suspending a task: the closed loop then
/// runs on the connection's own (event loop) thread, each answer sending the next request, with no task switch
/// per call (``LoadRunner`` uses it when no retry window is set).
public protocol CallbackLoadConnection: LoadConnection {
    /// Sends `request`; `done` runs exactly once with its outcome, on any thread (possibly at once on the caller's).
    func start(_ request: LoadRequest, _ done: @escaping @Sendable (CallOutcome) -> Void)
}

extension CallbackLoadConnection {
    /// A call is a start whose outcome the caller awaits. A connection whose calls need more defines its own
    /// (`RPCLoadConnection`'s call has a timeout).
    public func call(_ request: LoadRequest) async -> CallOutcome {
        await withCheckedContinuation { continuation in start(request) { continuation.resume(returning: $0) } }
    }
}

/// A callback connection whose answers are handled on an event-loop thread that can also run a timer: the open loop
/// then sends from that thread, paced by the timer, instead of from a thread of its own (``LoadRunner``).
/// `RPCLoadConnection`'s are all on the one JSON-RPC client loop of the process.
public protocol PacedLoadConnection: CallbackLoadConnection {
    /// Runs `tick` on the thread that handles this connection's answers `nanoseconds` from now, then again each time
    /// after the delay it returns, until it returns nil. Throws when no such timer can run.
    func pace(after nanoseconds: UInt64, _ tick: @escaping @Sendable () -> UInt64?) async throws
}

/// Opens connections to gateway addresses (`unix:/path` or `tcp:host:port`), authenticated as the scenario needs.
public protocol LoadConnector: Sendable {
    func connect(address: String) async throws -> any LoadConnection
}

/// The time source of the load engine: a monotonic clock in nanoseconds and a way to wait for a moment.
/// Injected so the scheduler can be tested with a virtual clock.
public protocol LoadClock: Sendable {
    /// Monotonic time in nanoseconds (any origin).
    func now() -> UInt64
    /// Returns at or after `deadline` (immediately if it has passed). Throws `CancellationError` when cancelled.
    func sleep(until deadline: UInt64) async throws
}

/// The real clock: `DispatchTime` uptime nanoseconds and `Task.sleep`.
public struct SystemLoadClock: LoadClock {
    public init() {}
    public func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
    public func sleep(until deadline: UInt64) async throws {
        let current = now()
        guard deadline > current else { return }
        try await Task.sleep(nanoseconds: deadline - current)
    }
}
