// The slowloris guard as a pure state machine: events in, connections to shut down out.

/// Tracks, per connection, when its current request must be complete.
///
/// libmicrohttpd's own timeout counts silence only, so a client sending one byte a second keeps a connection (and
/// its memory) forever. Here a request's header fields and body must arrive within `timeout` of the moment the
/// connection became ready for it (accepted, or the previous response sent); a request being handled has no
/// deadline (the handler's own timeouts apply). Pure: the listener feeds events and performs the actions.
public struct RequestDeadlines<Connection: Hashable & Sendable>: Sendable {
    public enum Phase: Sendable, Equatable {
        /// Waiting for, or receiving, a request that must be complete by `deadline`.
        case reading(deadline: ContinuousClock.Instant)
        /// The request is complete and with the application: no deadline.
        case handling
        /// Shut down by `expire`; waiting for libmicrohttpd to report it closed.
        case expired
    }

    public let timeout: Duration
    public private(set) var connections: [Connection: Phase] = [:]

    public init(timeout: Duration) {
        self.timeout = timeout
    }

    /// A connection was accepted.
    public mutating func opened(_ connection: Connection, at now: ContinuousClock.Instant) {
        connections[connection] = .reading(deadline: now + timeout)
    }

    /// Its request is complete and handed to the application.
    public mutating func handling(_ connection: Connection) {
        guard connections[connection] != nil, connections[connection] != .expired else { return }
        connections[connection] = .handling
    }

    /// Its response was sent (or the request ended otherwise): the next request's clock starts.
    public mutating func requestEnded(_ connection: Connection, at now: ContinuousClock.Instant) {
        guard connections[connection] != nil, connections[connection] != .expired else { return }
        connections[connection] = .reading(deadline: now + timeout)
    }

    /// libmicrohttpd closed it.
    public mutating func closed(_ connection: Connection) {
        connections[connection] = nil
    }

    /// The connections whose deadline passed by `now`: shut each down once (they are marked expired).
    public mutating func expire(at now: ContinuousClock.Instant) -> [Connection] {
        var late: [Connection] = []
        for (connection, phase) in connections {
            if case .reading(let deadline) = phase, deadline <= now { late.append(connection) }
        }
        for connection in late { connections[connection] = .expired }
        return late
    }
}
