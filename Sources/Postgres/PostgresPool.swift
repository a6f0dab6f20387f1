import Foundation
import Synchronization

/// A pool of `PostgresConnection`s: opens up to `maxConnections` lazily, serves waiters first come first served,
/// fails a waiter with `.poolTimeout` after `acquireTimeout`, discards broken connections and reconnects idle ones
/// that died (e.g. after a server restart), so the process recovers without restarting. While connection attempts
/// fail, waiters get the error at once and the next attempt waits a bounded, jittered backoff (`backoff(failures:)`).
public final class PostgresPool: Sendable {
    /// Snapshot of the pool's counters.
    public struct Stats: Sendable, Equatable {
        /// Open connections (idle + in use).
        public var open: Int
        public var idle: Int
        public var inUse: Int
        /// Connections being opened.
        public var connecting: Int
        /// Tasks waiting for a connection.
        public var waiters: Int
        public var maxConnections: Int

        public init(open: Int, idle: Int, inUse: Int, connecting: Int, waiters: Int, maxConnections: Int) {
            self.open = open
            self.idle = idle
            self.inUse = inUse
            self.connecting = connecting
            self.waiters = waiters
            self.maxConnections = maxConnections
        }
    }

    public let configuration: PostgresConfiguration
    public let maxConnections: Int
    public let acquireTimeout: Duration

    /// Gets a leased connection (its id and itself) or the reason there is none, once.
    private typealias Leased = @Sendable (Result<(Int, PostgresConnection), any Error>) -> Void

    private struct Waiter {
        var resume: Leased
        var timeout: Task<Void, Never>?
    }

    private struct State {
        var machine: PoolStateMachine
        var connections: [Int: PostgresConnection] = [:]
        var waiters: [Int: Waiter] = [:]
        var nextWaiterID = 1
    }

    private let state: Mutex<State>

    /// Creates a pool; no connection is opened until first use.
    public init(configuration: PostgresConfiguration, maxConnections: Int = 10, acquireTimeout: Duration = .seconds(10))
    {
        self.configuration = configuration
        self.maxConnections = max(1, maxConnections)
        self.acquireTimeout = acquireTimeout
        self.state = Mutex(State(machine: PoolStateMachine(maxConnections: maxConnections)))
    }

    /// Current counters.
    public func stats() -> Stats {
        let s = state.withLock { $0.machine.stats }
        return Stats(
            open: s.open, idle: s.idle, inUse: s.inUse, connecting: s.connecting, waiters: s.waiters,
            maxConnections: s.maxConnections)
    }

    // MARK: Using connections

    /// Leases a connection for `body` and returns it after (rolling back any transaction `body` left open; a
    /// broken connection is discarded). Do not keep the connection beyond `body`.
    public func withConnection<T: Sendable>(
        _ body: @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let (id, connection) = try await lease()
        let value: T
        do {
            value = try await body(connection)
        } catch {
            await giveBack(id, connection)
            throw error
        }
        await giveBack(id, connection)
        return value
    }

    /// Runs one statement on a pooled connection (see `PostgresConnection.query(_:prepared:)`).
    @discardableResult
    public func query(_ query: PostgresQuery, prepared: Bool = false) async throws -> PostgresRows {
        let (id, connection) = try await acquire()
        let outcome = await connection.pooled { try $0.runQuery(query, prepared: prepared) }
        release(id, reusable: outcome.reusable)
        return try outcome.result.get()
    }

    /// Runs a pipeline on a pooled connection (see `PostgresConnection.pipeline(_:prepared:)`), in one hop onto the
    /// connection's queue like `query` (not three: the liveness check, the pipeline, the reuse check).
    public func pipeline(
        _ queries: [PostgresQuery], prepared: Bool = false
    ) async throws -> [Result<PostgresRows, PostgresError>] {
        let (id, connection) = try await acquire()
        let outcome = await connection.pooled { try $0.runPipeline(queries, prepared: prepared) }
        release(id, reusable: outcome.reusable)
        return try outcome.result.get()
    }

    /// `pipeline` without a task: `reply` gets the results on the connection's own queue, right after the round
    /// trip. Nothing hops to the cooperative pool and back, so a batched read costs its caller no thread hand-off
    /// of its own. Not cancellable (there is no task to cancel it); `acquireTimeout` still holds.
    public func pipeline(
        _ queries: [PostgresQuery], prepared: Bool = false,
        reply: @escaping @Sendable (Result<[Result<PostgresRows, PostgresError>], PostgresError>) -> Void
    ) {
        leasing({ try $0.runPipeline(queries, prepared: prepared) }, reply: reply)
    }

    /// `query` without a task, like `pipeline(_:prepared:reply:)`: `reply` gets the rows on the connection's own
    /// queue, right after the round trip (a group commit's statement, answered by the thread that committed it).
    /// Not cancellable; `acquireTimeout` still holds.
    public func query(
        _ query: PostgresQuery, prepared: Bool = false,
        reply: @escaping @Sendable (Result<PostgresRows, PostgresError>) -> Void
    ) {
        leasing({ try $0.runQuery(query, prepared: prepared) }, reply: reply)
    }

    /// Leases a connection without a task and runs `work` on its queue, isolated to it: for several statements
    /// (a transaction) whose caller waits with a callback, e.g. a group commit's batch, so that neither the
    /// statements nor the answer hop through the cooperative pool. `work` uses the connection's synchronous calls
    /// (`queryNow`, `pipelineNow`). The connection is given back first (rolled back if `work` left a transaction
    /// open, discarded if broken), then `reply` is called on the same queue. `.failure` only when no live
    /// connection could be had (or `work` threw: a `PostgresError` as it is, anything else wrapped). Not
    /// cancellable; `acquireTimeout` still holds.
    public func leasing<T>(
        _ work: @escaping @Sendable (isolated PostgresConnection) throws -> T,
        reply: @escaping @Sendable (Result<T, PostgresError>) -> Void
    ) {
        // `pooledNow` checks the connection before `work` and readies it for reuse after, as `pooled` does.
        acquire { leased in
            switch leased {
            case .failure(let error):
                reply(.failure(PostgresConnection.asPostgresError(error)))
            case .success((let id, let connection)):
                connection.onQueue { connection in
                    let outcome = connection.pooledNow(work)
                    self.release(id, reusable: outcome.reusable)
                    reply(outcome.result)
                }
            }
        }
    }

    /// Sends a notification (`pg_notify`) on `channel`.
    public func notify(channel: String, payload: String = "") async throws {
        try await query("SELECT pg_notify(\(channel), \(payload))")
    }

    /// Runs `body` in a transaction: `BEGIN ISOLATION LEVEL …`, body, `COMMIT`; `ROLLBACK` when anything throws.
    ///
    /// On a serialization failure (40001) or deadlock (40P01), from the body or from `COMMIT`, the whole
    /// transaction is retried (fresh `BEGIN`, body run again) up to `maxAttempts` times in all, with a small
    /// jittered backoff; then the last error is thrown. `body` must therefore be safe to run more than once
    /// (no side effects outside the database). A `COMMIT` that turns into a rollback (the body swallowed an error)
    /// throws `.transactionAborted`.
    public func withTransaction<T: Sendable>(
        isolation: PostgresIsolationLevel = .readCommitted,
        maxAttempts: Int = 5,
        _ body: @Sendable (PostgresTransaction) async throws -> T
    ) async throws -> T {
        try await retryingSerializationFailures(maxAttempts: maxAttempts) {
            try await withConnection { connection in
                try await connection.runTransaction(isolation: isolation, body)
            }
        }
    }

    /// Shuts down: closes idle connections, fails waiters with `.poolClosed`; leased connections close when
    /// returned; later calls fail with `.poolClosed`.
    public func close() async {
        let (actions, toClose) = state.withLock { s -> ([PoolStateMachine.Action], [PostgresConnection]) in
            let actions = s.machine.close()
            let ids = actions.compactMap { if case .closeConnection(let id) = $0 { id } else { nil } }
            return (actions, ids.compactMap { s.connections[$0] })
        }
        perform(actions.filter { if case .closeConnection = $0 { false } else { true } })
        for connection in toClose { await connection.close() }
        state.withLock { s in
            for (id, c) in s.connections where toClose.contains(where: { $0 === c }) { s.connections[id] = nil }
        }
    }

    // MARK: Lease / release

    /// A connection that is alive (reconnected in place if its idle socket died).
    private func lease() async throws -> (Int, PostgresConnection) {
        let (id, connection) = try await acquire()
        do {
            try await connection.ensureAlive()
        } catch {
            release(id, reusable: false)
            throw error
        }
        return (id, connection)
    }

    private func giveBack(_ id: Int, _ connection: PostgresConnection) async {
        let reusable = await connection.prepareForReuse()
        release(id, reusable: reusable)
    }

    private func release(_ id: Int, reusable: Bool) {
        let actions = state.withLock { $0.machine.release(id, reusable: reusable) }
        perform(actions)
    }

    private func acquire() async throws -> (Int, PostgresConnection) {
        let waiterID = state.withLock { s in
            defer { s.nextWaiterID += 1 }
            return s.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                acquire(waiterID) { continuation.resume(with: $0) }
            }
        } onCancel: {
            let actions = state.withLock { $0.machine.waiterCancelled(waiterID) }
            perform(actions)
        }
    }

    /// A connection to `leased`, without a task: at once when one is idle, else when one is returned or opened, or
    /// `.poolTimeout` after `acquireTimeout`.
    private func acquire(_ leased: @escaping Leased) {
        let waiterID = state.withLock { s in
            defer { s.nextWaiterID += 1 }
            return s.nextWaiterID
        }
        acquire(waiterID, leased)
    }

    private func acquire(_ waiterID: Int, _ leased: @escaping Leased) {
        let actions = state.withLock { s in
            s.waiters[waiterID] = Waiter(resume: leased, timeout: nil)
            return s.machine.acquire(waiterID)
        }
        perform(actions)
        let timeout = acquireTimeout
        let needsTimer = state.withLock { $0.waiters[waiterID] != nil }
        guard needsTimer else { return }
        let timer = Task { [weak self] in
            do { try await Task.sleep(for: timeout) } catch { return }
            self?.waiterTimedOut(waiterID)
        }
        let stillWaiting = state.withLock { s in
            guard s.waiters[waiterID] != nil else { return false }
            s.waiters[waiterID]?.timeout = timer
            return true
        }
        if !stillWaiting { timer.cancel() }
    }

    private func waiterTimedOut(_ waiterID: Int) {
        let error = PostgresError(
            kind: .poolTimeout,
            message: "no connection became available within \(acquireTimeout) (max \(maxConnections) connections)")
        let actions = state.withLock { $0.machine.waiterTimedOut(waiterID, error: error) }
        perform(actions)
    }

    /// Performs actions: continuations are resumed and tasks started outside the lock.
    private func perform(_ actions: [PoolStateMachine.Action]) {
        for action in actions {
            switch action {
            case .lease(let id, let waiterID):
                let (waiter, connection) = state.withLock { s in
                    (s.waiters.removeValue(forKey: waiterID), s.connections[id])
                }
                waiter?.timeout?.cancel()
                if let connection {
                    waiter?.resume(.success((id, connection)))
                } else {
                    waiter?.resume(.failure(PostgresError(kind: .protocolViolation, message: "pool lost a connection")))
                }
            case .failWaiter(let waiterID, let error):
                let waiter = state.withLock { $0.waiters.removeValue(forKey: waiterID) }
                waiter?.timeout?.cancel()
                waiter?.resume(.failure(error))
            case .closeConnection(let id):
                let connection = state.withLock { $0.connections.removeValue(forKey: id) }
                if let connection { Task { await connection.close() } }
            case .openConnection(let id), .openConnectionAfterBackoff(let id, _):
                var pause: Duration = .zero
                if case .openConnectionAfterBackoff(_, let failures) = action {
                    pause = Self.backoff(failures: failures)
                }
                let connection = PostgresConnection(configuration: configuration)
                state.withLock { $0.connections[id] = connection }
                Task { [weak self] in
                    if pause > .zero { try? await Task.sleep(for: pause) }
                    do {
                        try await connection.connect()
                        guard let self else { return }
                        self.perform(self.state.withLock { $0.machine.connectionOpened(id) })
                    } catch {
                        guard let self else { return }
                        let failure = PostgresConnection.asPostgresError(error)
                        self.state.withLock { _ = $0.connections.removeValue(forKey: id) }
                        self.perform(self.state.withLock { $0.machine.connectionFailed(id, error: failure) })
                    }
                }
            }
        }
    }
}

extension PostgresPool {
    /// The pause before the next connection attempt after `failures` failed in a row: doubling from 20 ms, capped
    /// at 500 ms, with jitter (half to all of it) so that pools of several gateways do not retry in step. Bounded
    /// by design: once a host accepts writes again, the pool finds it within half a second.
    static func backoff(failures: Int) -> Duration {
        let ceiling = min(500, 20 << min(max(failures - 1, 0), 5))
        return .milliseconds(Int.random(in: (ceiling / 2)...ceiling))
    }
}

/// A transaction in progress, handed to `PostgresPool.withTransaction`'s body. Only valid inside the body.
public struct PostgresTransaction: Sendable {
    /// The connection the transaction runs on.
    public let connection: PostgresConnection

    /// Runs one statement in the transaction.
    @discardableResult
    public func query(_ query: PostgresQuery, prepared: Bool = false) async throws -> PostgresRows {
        try await connection.query(query, prepared: prepared)
    }

    /// Runs a pipeline inside the transaction (a failing statement fails the transaction).
    public func pipeline(
        _ queries: [PostgresQuery], prepared: Bool = false
    ) async throws -> [Result<PostgresRows, PostgresError>] {
        try await connection.pipeline(queries, prepared: prepared)
    }
}

/// Runs `attempt` until it succeeds, fails with something other than 40001/40P01, or `maxAttempts` ran; sleeps a
/// small jittered backoff (1-10 ms times the attempt number) in between.
func retryingSerializationFailures<T: Sendable>(
    isolation: isolated (any Actor)? = #isolation, maxAttempts: Int, _ attempt: () async throws -> T
) async throws -> T {
    try await PostgresPool.retrying(maxAttempts: maxAttempts, when: \.isSerializationFailure, attempt)
}

extension PostgresPool {
    /// The retry loop of `withTransaction`, for work that runs its own transaction (e.g. one pipelined with its
    /// reads): runs `attempt` until it succeeds, throws an error that is not a `PostgresError` accepted by
    /// `shouldRetry` (default: serialization failure or deadlock), or `maxAttempts` ran; sleeps a small jittered
    /// backoff (1-10 ms times the attempt number) in between. `attempt` must be safe to run more than once.
    public static func retrying<T: Sendable>(
        isolation: isolated (any Actor)? = #isolation, maxAttempts: Int = 5,
        when shouldRetry: (PostgresError) -> Bool = \.isSerializationFailure, _ attempt: () async throws -> T
    ) async throws -> T {
        var attempts = 0
        while true {
            attempts += 1
            do {
                return try await attempt()
            } catch let error as PostgresError where shouldRetry(error) && attempts < maxAttempts {
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...10) * attempts))
            }
        }
    }
}

extension PostgresConnection {
    /// Runs `body` in a transaction on this connection, with the same semantics as
    /// `PostgresPool.withTransaction` (rollback on error, retry of serialization failures and deadlocks).
    public func withTransaction<T: Sendable>(
        isolation: PostgresIsolationLevel = .readCommitted,
        maxAttempts: Int = 5,
        _ body: @Sendable (PostgresTransaction) async throws -> T
    ) async throws -> T {
        try await retryingSerializationFailures(maxAttempts: maxAttempts) {
            try await runTransaction(isolation: isolation, body)
        }
    }

    /// One attempt of a transaction (BEGIN, body, COMMIT; ROLLBACK on error).
    func runTransaction<T: Sendable>(
        isolation: PostgresIsolationLevel, _ body: @Sendable (PostgresTransaction) async throws -> T
    ) async throws -> T {
        try runQuery(.unsafeRaw("BEGIN ISOLATION LEVEL \(isolation.rawValue)"))
        do {
            let value = try await body(PostgresTransaction(connection: self))
            let commit = try runQuery("COMMIT")
            guard commit.commandTag == "COMMIT" else {
                throw PostgresError(
                    kind: .transactionAborted,
                    message: "COMMIT rolled back: a statement of the transaction had failed")
            }
            return value
        } catch {
            rollbackIfInTransaction()
            throw error
        }
    }

    /// `ROLLBACK` if a transaction is open (errors ignored: a broken connection is discarded by the pool).
    func rollbackIfInTransaction() {
        guard isConnected, !isIdleOutsideTransaction else { return }
        _ = try? runSimpleQuery(unsafeSQL: "ROLLBACK")
    }

    /// Reconnects in place (same actor, fresh handle, empty statement cache) when the idle connection died.
    func ensureAlive() throws {
        if !probe() { try connect() }
    }

    /// `ensureAlive` + `work` (cancellable) + reuse check in one hop onto the connection's queue.
    func pooled<T: Sendable>(_ work: @Sendable (isolated PostgresConnection) throws -> T) async -> (
        result: Result<T, PostgresError>, reusable: Bool
    ) {
        do {
            try ensureAlive()
        } catch {
            return (.failure(Self.asPostgresError(error)), false)
        }
        let result: Result<T, PostgresError>
        do {
            result = .success(try await cancellable { try work(self) })
        } catch {
            result = .failure(Self.asPostgresError(error))
        }
        return (result, prepareForReuse())
    }

    /// `pooled` for a caller already on the queue and outside any task (`onQueue`): nothing to cancel it.
    func pooledNow<T>(_ work: (isolated PostgresConnection) throws -> T) -> (
        result: Result<T, PostgresError>, reusable: Bool
    ) {
        do {
            try ensureAlive()
        } catch {
            return (.failure(Self.asPostgresError(error)), false)
        }
        return (Result { try work(self) }.mapError(Self.asPostgresError), prepareForReuse())
    }

    /// Runs `body` on the connection's queue, isolated to it, outside any task: for callers that wait with a
    /// callback, not a task (`PostgresPool.pipeline(_:prepared:reply:)`).
    nonisolated func onQueue(_ body: @escaping @Sendable (isolated PostgresConnection) -> Void) {
        executor.queue.async { self.assumeIsolated { body($0) } }
    }
}
