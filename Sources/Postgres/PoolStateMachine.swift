/// The pool's bookkeeping as a pure state machine: events in, actions out. No I/O, no clocks; `PostgresPool`
/// performs the actions. Waiters are served first come, first served; idle connections are reused most recently
/// used first (warm caches; surplus connections stay idle).
struct PoolStateMachine: Sendable {
    typealias ConnectionID = Int
    typealias WaiterID = Int

    enum ConnectionState: Sendable, Equatable {
        case connecting
        case idle
        case leased
    }

    /// What the pool must do.
    enum Action: Sendable, Equatable {
        /// Hand connection to the waiter (it is now leased).
        case lease(ConnectionID, to: WaiterID)
        /// Open a new connection with this id; report `connectionOpened` or `connectionFailed`.
        case openConnection(ConnectionID)
        /// The same, after a pause that grows with `failures`, the connection attempts that failed in a row (the
        /// server is down or no host accepts writes yet): the pool does not hammer it with connection attempts.
        case openConnectionAfterBackoff(ConnectionID, failures: Int)
        /// Close and forget this connection.
        case closeConnection(ConnectionID)
        /// Fail the waiter with this error.
        case failWaiter(WaiterID, PostgresError)
    }

    /// Counts for `PostgresPool.stats()`.
    struct Stats: Sendable, Equatable {
        var open: Int
        var idle: Int
        var inUse: Int
        var connecting: Int
        var waiters: Int
        var maxConnections: Int
    }

    let maxConnections: Int
    private(set) var connections: [ConnectionID: ConnectionState] = [:]
    private(set) var idle: [ConnectionID] = []
    private(set) var waiters: [WaiterID] = []
    private(set) var isClosed = false
    private var nextConnectionID = 1
    /// Connection attempts that failed since the last one that succeeded.
    private(set) var consecutiveConnectFailures = 0

    init(maxConnections: Int) {
        self.maxConnections = max(1, maxConnections)
    }

    var connectingCount: Int { connections.values.lazy.filter { $0 == .connecting }.count }

    var stats: Stats {
        let connecting = connectingCount
        return Stats(
            open: connections.count - connecting, idle: idle.count,
            inUse: connections.count - connecting - idle.count, connecting: connecting, waiters: waiters.count,
            maxConnections: maxConnections)
    }

    static let closedError = PostgresError(kind: .poolClosed, message: "the connection pool is closed")

    /// A task wants a connection.
    mutating func acquire(_ waiter: WaiterID) -> [Action] {
        if isClosed { return [.failWaiter(waiter, Self.closedError)] }
        if let id = idle.popLast() {
            connections[id] = .leased
            return [.lease(id, to: waiter)]
        }
        waiters.append(waiter)
        return openIfUncovered()
    }

    /// A connection opened by `.openConnection` is ready.
    mutating func connectionOpened(_ id: ConnectionID) -> [Action] {
        guard connections[id] == .connecting else { return [] }
        consecutiveConnectFailures = 0
        if isClosed {
            connections[id] = nil
            return [.closeConnection(id)]
        }
        if !waiters.isEmpty {
            connections[id] = .leased
            return [.lease(id, to: waiters.removeFirst())]
        }
        connections[id] = .idle
        idle.append(id)
        return []
    }

    /// Opening a connection failed: every waiter not covered by another pending connect gets the error at once
    /// (the server is unreachable for all of them; callers see an outage quickly instead of timing out, and retry),
    /// and the next connection attempt waits a backoff (`openConnectionAfterBackoff`).
    mutating func connectionFailed(_ id: ConnectionID, error: PostgresError) -> [Action] {
        guard connections[id] == .connecting else { return [] }
        connections[id] = nil
        if isClosed { return [] }
        consecutiveConnectFailures += 1
        var actions: [Action] = []
        while waiters.count > connectingCount {
            actions.append(.failWaiter(waiters.removeFirst(), error))
        }
        return actions
    }

    /// A leased connection comes back; `reusable` is false when it broke or could not be reset.
    mutating func release(_ id: ConnectionID, reusable: Bool) -> [Action] {
        guard connections[id] == .leased else { return [] }
        if !reusable || isClosed {
            connections[id] = nil
            return [.closeConnection(id)] + openIfUncovered()
        }
        if !waiters.isEmpty {
            return [.lease(id, to: waiters.removeFirst())]
        }
        connections[id] = .idle
        idle.append(id)
        return []
    }

    /// The waiter's acquire timeout expired.
    mutating func waiterTimedOut(_ waiter: WaiterID, error: PostgresError) -> [Action] {
        guard let index = waiters.firstIndex(of: waiter) else { return [] }
        waiters.remove(at: index)
        return [.failWaiter(waiter, error)]
    }

    /// The waiting task was cancelled.
    mutating func waiterCancelled(_ waiter: WaiterID) -> [Action] {
        waiterTimedOut(
            waiter, error: PostgresError(kind: .cancelled, message: "waiting for a connection was cancelled"))
    }

    /// Shut down: close idle connections, fail all waiters; leased ones close on release.
    mutating func close() -> [Action] {
        guard !isClosed else { return [] }
        isClosed = true
        var actions: [Action] = idle.map { .closeConnection($0) }
        for id in idle { connections[id] = nil }
        idle.removeAll()
        actions += waiters.map { .failWaiter($0, Self.closedError) }
        waiters.removeAll()
        return actions
    }

    /// Opens a connection when some waiter is not covered by a pending connect and there is room.
    private mutating func openIfUncovered() -> [Action] {
        guard !isClosed, waiters.count > connectingCount, connections.count < maxConnections else { return [] }
        let id = nextConnectionID
        nextConnectionID += 1
        connections[id] = .connecting
        if consecutiveConnectFailures > 0 {
            return [.openConnectionAfterBackoff(id, failures: consecutiveConnectFailures)]
        }
        return [.openConnection(id)]
    }
}
