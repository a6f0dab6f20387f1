import CLibPQ
import Foundation
import Synchronization
import Threads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A `NOTIFY` received by a `PostgresListener`.
public struct PostgresNotification: Sendable, Hashable {
    public var channel: String
    public var payload: String
    /// The notifying server process.
    public var backendPID: Int32

    public init(channel: String, payload: String, backendPID: Int32) {
        self.channel = channel
        self.payload = payload
        self.backendPID = backendPID
    }
}

/// What a listener delivers.
public enum PostgresListenerEvent: Sendable, Hashable {
    case notification(PostgresNotification)
    /// The connection was lost (the server went away, restarted or failed over); the listener keeps trying to
    /// reconnect. From here until `.reconnected`, notifications may be missed: nothing they keep fresh is provably
    /// current any more.
    case disconnected
    /// The connection was lost and re-established (all channels LISTENed again). Notifications sent while it was
    /// down are lost: invalidate whatever they keep fresh.
    case reconnected
}

/// LISTENs on channels over a dedicated connection driven by its own thread (`poll` on `PQsocket`, then
/// `PQconsumeInput`/`PQnotifies`); reconnects and re-LISTENs by itself after the server restarts. With a multi-host
/// conninfo (`host=a,b target_session_attrs=read-write`) each reconnect finds the current primary, so it follows a
/// failover: NOTIFY is delivered only to listeners on the server that committed the change.
public final class PostgresListener: Sendable {
    /// Notifications and reconnect markers, in order. Ends after `stop()`.
    public let events: AsyncStream<PostgresListenerEvent>
    private let core: ListenerCore

    private init(events: AsyncStream<PostgresListenerEvent>, core: ListenerCore) {
        self.events = events
        self.core = core
    }

    /// Connects, LISTENs on `channels`, and returns once they are active (throws if the first connect fails).
    /// `events` keeps the newest 10,000 events for a slow reader and drops older ones without saying so: where a
    /// missed event matters, use `run(configuration:channels:reconnectDelay:onListening:deliver:)`.
    public static func start(
        configuration: PostgresConfiguration, channels: [String], reconnectDelay: Duration = .milliseconds(200)
    ) async throws -> PostgresListener {
        let (stream, continuation) = AsyncStream.makeStream(
            of: PostgresListenerEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        let core = ListenerCore(
            configuration: configuration, channels: channels, reconnectDelay: reconnectDelay,
            deliver: { continuation.yield($0) }, finished: { continuation.finish() })
        continuation.onTermination = { [core] _ in core.requestStop() }
        try await withCheckedThrowingContinuation { (started: CheckedContinuation<Void, any Error>) in
            core.startThread(started: { error in
                if let error { started.resume(throwing: error) } else { started.resume() }
            })
        }
        return PostgresListener(events: stream, core: core)
    }

    /// The listener as one long-running call (swift-service-lifecycle style): connects and LISTENs on `channels`,
    /// calls `onListening` once they are active, then hands every event to `deliver` (on the listener thread, in
    /// order, with no buffer in between: `deliver` decides what to keep), reconnecting and re-LISTENing by itself.
    /// Returns when the calling task is cancelled (within ~100 ms); throws if the first connect fails.
    public static func run(
        configuration: PostgresConfiguration, channels: [String], reconnectDelay: Duration = .milliseconds(200),
        onListening: @escaping @Sendable () -> Void = {},
        deliver: @escaping @Sendable (PostgresListenerEvent) -> Void
    ) async throws {
        let done = Mutex<CheckedContinuation<Void, any Error>?>(nil)
        let failure = Mutex<(any Error)?>(nil)
        let core = ListenerCore(
            configuration: configuration, channels: channels, reconnectDelay: reconnectDelay, deliver: deliver,
            finished: {
                let continuation = done.withLock { c in
                    defer { c = nil }
                    return c
                }
                if let error = failure.withLock({ $0 }) {
                    continuation?.resume(throwing: error)
                } else {
                    continuation?.resume()
                }
            })
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                done.withLock { $0 = continuation }
                core.startThread(started: { error in
                    if let error { failure.withLock { $0 = error } } else { onListening() }
                })
            }
        } onCancel: {
            core.requestStop()
        }
    }

    /// Adds a channel (LISTENed within a poll interval, ~100 ms).
    public func listen(_ channel: String) {
        core.add(channel)
    }

    /// Stops the thread and ends `events` (within ~100 ms).
    public func stop() {
        core.requestStop()
    }

    deinit {
        core.requestStop()
    }
}

/// The listener thread's shared state. Sendable: mutable state is behind a `Mutex`; the `PGconn` lives only in
/// `run`'s locals on the listener thread.
final class ListenerCore: Sendable {
    private struct State {
        var channels: [String]
        var pending: [String] = []
        var stopped = false
    }

    let configuration: PostgresConfiguration
    let reconnectDelay: Duration
    /// Called on the listener thread for each event.
    let deliver: @Sendable (PostgresListenerEvent) -> Void
    /// Called on the listener thread when it ends (after `started` in every case).
    let finished: @Sendable () -> Void
    private let state: Mutex<State>

    init(
        configuration: PostgresConfiguration, channels: [String], reconnectDelay: Duration,
        deliver: @escaping @Sendable (PostgresListenerEvent) -> Void, finished: @escaping @Sendable () -> Void
    ) {
        self.configuration = configuration
        self.reconnectDelay = reconnectDelay
        self.deliver = deliver
        self.finished = finished
        self.state = Mutex(State(channels: channels))
    }

    /// Starts the listener thread; `started` is called on it with nil once LISTENing, or with the first connect's
    /// error (then the thread ends).
    func startThread(started: @escaping @Sendable ((any Error)?) -> Void) {
        Threads.startThread(named: "pg-listener") { self.run(started: started) }
    }

    func add(_ channel: String) {
        state.withLock { s in
            guard !s.channels.contains(channel) else { return }
            s.channels.append(channel)
            s.pending.append(channel)
        }
    }

    func requestStop() {
        state.withLock { $0.stopped = true }
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    static func quoteIdentifier(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Connects and LISTENs on every channel; nil (and the handle closed) on failure.
    private func open() -> (OpaquePointer?, String?) {
        let conn: OpaquePointer
        do {
            conn = try PostgresConnection.open(configuration)
        } catch let error as PostgresError {
            return (nil, error.message)
        } catch {
            return (nil, "\(error)")
        }
        let channels = state.withLock { s in
            s.pending.removeAll()
            return s.channels
        }
        for channel in channels where !execute(conn, "LISTEN \(Self.quoteIdentifier(channel))") {
            let message = PostgresError.trimmed(PQerrorMessage(conn))
            PQfinish(conn)
            return (nil, message)
        }
        return (conn, nil)
    }

    private func execute(_ conn: OpaquePointer, _ sql: String) -> Bool {
        guard let result = PQexec(conn, sql) else { return false }
        defer { PQclear(result) }
        return PQresultStatus(result) == PGRES_COMMAND_OK
    }

    /// The pause before reconnect attempt `failures + 1`: the first one soon (10-20 ms: the connection broke, the
    /// new primary may already answer), then doubling, jittered (half to all of it), capped at `cap` (the
    /// `reconnectDelay`), so a feed follows a failover as soon as a primary answers without spinning meanwhile.
    static func reconnectPause(failures: Int, cap: Duration) -> Duration {
        let capMs = max(1, Int(cap / .milliseconds(1)))
        let ceiling = min(capMs, 20 << min(failures, 10))
        return .milliseconds(Int.random(in: (ceiling / 2)...ceiling))
    }

    private func sleep(_ duration: Duration) {
        Thread.sleep(forTimeInterval: duration / .seconds(1))
    }

    /// The thread body.
    private func run(started: @Sendable ((any Error)?) -> Void) {
        var (conn, message) = open()
        guard conn != nil else {
            started(PostgresError.connection(message ?? "listener could not connect"))
            finished()
            return
        }
        started(nil)
        var failedReconnects = 0
        while !isStopped {
            guard let live = conn else {
                sleep(Self.reconnectPause(failures: failedReconnects, cap: reconnectDelay))
                if isStopped { break }
                (conn, message) = open()
                if conn != nil {
                    failedReconnects = 0
                    deliver(.reconnected)
                } else {
                    failedReconnects += 1
                }
                continue
            }
            let pending = state.withLock { s in
                defer { s.pending.removeAll() }
                return s.pending
            }
            for channel in pending { _ = execute(live, "LISTEN \(Self.quoteIdentifier(channel))") }
            var pfd = pollfd(fd: PQsocket(live), events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, 100)
            if ready > 0, PQconsumeInput(live) == 0 {
                PQfinish(live)
                conn = nil
                deliver(.disconnected)
                continue
            }
            while let notify = PQnotifies(live) {
                let n = notify.pointee
                let event = PostgresNotification(
                    channel: n.relname.map { String(cString: $0) } ?? "",
                    payload: n.extra.map { String(cString: $0) } ?? "", backendPID: n.be_pid)
                PQfreemem(notify)
                deliver(.notification(event))
            }
            if PQstatus(live) != CONNECTION_OK {
                PQfinish(live)
                conn = nil
                deliver(.disconnected)
            }
        }
        if let conn { PQfinish(conn) }
        finished()
    }
}
