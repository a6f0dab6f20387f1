import CLibPQ
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Transaction isolation levels for `BEGIN`.
public enum PostgresIsolationLevel: String, Sendable, Hashable {
    case readCommitted = "READ COMMITTED"
    case repeatableRead = "REPEATABLE READ"
    case serializable = "SERIALIZABLE"
}

/// One libpq connection, pinned to its own serial queue: every (blocking) libpq call runs there, never on the
/// cooperative pool. Results are copied into `PostgresRows` before they leave the actor.
///
/// Not for concurrent use by design: calls queue up on the actor. Use `PostgresPool` for concurrency.
public actor PostgresConnection {
    /// The configuration it connects with.
    public nonisolated let configuration: PostgresConfiguration
    /// A process-unique number (for logs and the pool).
    public nonisolated let id: Int
    nonisolated let executor: PostgresQueueExecutor

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Owns the libpq handle (PQfinish in its deinit); only touched on this actor.
    private let box = LibPQConnectionBox()
    /// Cancels the statement in progress from another thread when the awaiting task is cancelled.
    nonisolated let canceller = StatementCanceller()
    /// The libpq handle; nil when closed.
    private var handle: OpaquePointer? {
        get { box.conn }
        set { box.conn = newValue }
    }
    /// Prepared statements by SQL text + parameter OIDs. Belongs to the current handle: cleared on (re)connect.
    private var preparedStatements: [PreparedKey: String] = [:]
    /// The few statements found or prepared last, newest first, looked through before `preparedStatements`: a
    /// statement whose text is made once (most are) is then found by comparing two string pointers, where the
    /// dictionary hashes the whole text (1-2 KB for the batched reads) on every execution.
    private var recentStatements: [(key: PreparedKey, name: String)] = []
    private var statementCounter = 0
    /// Upper bound of the prepared-statement cache; beyond it statements run unprepared.
    static let maxPreparedStatements = 512

    private static let ids = Atomic<Int>(0)

    /// Creates a connection object without connecting (call `connect()`), e.g. for a pool.
    public init(configuration: PostgresConfiguration) {
        self.configuration = configuration
        let id = Self.ids.wrappingAdd(1, ordering: .relaxed).newValue
        self.id = id
        self.executor = PostgresQueueExecutor(label: "offergate.postgres.connection.\(id)")
    }

    /// Opens a connection.
    public static func connect(configuration: PostgresConfiguration) async throws -> PostgresConnection {
        let connection = PostgresConnection(configuration: configuration)
        try await connection.connect()
        return connection
    }

    /// (Re)connects: closes any current handle (and forgets its prepared statements), then opens a new one.
    public func connect() throws {
        close()
        let conn = try Self.open(configuration)
        box.watchNotices(of: conn)
        canceller.install(conn)
        handle = conn
    }

    /// The libpq connect steps, for this type and `PostgresListener`: `PQconnectdbParams` with the configuration's
    /// parameters, the status check (closing a failed handle), and no notice output. Blocks until connected.
    static func open(_ configuration: PostgresConfiguration) throws -> OpaquePointer {
        let pairs = try configuration.parameters()
        let conn = withCStrings(pairs.map(\.0)) { keywords in
            withCStrings(pairs.map(\.1)) { values in
                PQconnectdbParams(keywords, values, 0)
            }
        }
        guard let conn else { throw PostgresError.connection("out of memory creating a connection") }
        guard PQstatus(conn) == CONNECTION_OK else {
            let message = PostgresError.trimmed(PQerrorMessage(conn)) ?? "connection failed"
            PQfinish(conn)
            throw PostgresError.connection(message)
        }
        // The gateway speaks JSON on stdout and keeps stderr for logs: swallow NOTICE/WARNING messages.
        PQsetNoticeProcessor(conn, { _, _ in }, nil)
        return conn
    }

    /// Closes the connection (idempotent).
    public func close() {
        canceller.uninstall()
        if let handle { PQfinish(handle) }
        handle = nil
        forgetPreparedStatements()
    }

    /// True when a handle exists and `PQstatus` is OK (no I/O).
    public var isConnected: Bool {
        guard let handle else { return false }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// True when the caller runs on this connection's own queue (always, for the actor's methods): blocking
    /// libpq calls never run on Swift's cooperative pool.
    public var isOnDedicatedQueue: Bool { executor.isCurrent }

    /// Number of cached prepared statements.
    public var preparedStatementCount: Int { preparedStatements.count }

    // MARK: Queries

    /// Runs one parameterized statement. With `prepared: true` the statement is prepared once per connection
    /// (keyed by SQL text and parameter types) and executed with `PQexecPrepared` after.
    ///
    /// Cancelling the awaiting task cancels the statement on the server (`PQcancel`) and throws `.cancelled`; the
    /// connection is then closed (call `connect()` to use it again; a pool discards it).
    @discardableResult
    public func query(_ query: PostgresQuery, prepared: Bool = false) async throws -> PostgresRows {
        try await cancellable { try runQuery(query, prepared: prepared) }
    }

    /// Runs SQL text with the simple query protocol (`PQexec`): several `;`-separated statements are allowed
    /// (migrations); no parameters. Returns the last statement's result. Never pass untrusted input. Cancellable
    /// like `query(_:prepared:)`.
    @discardableResult
    public func simpleQuery(unsafeSQL sql: String) async throws -> PostgresRows {
        try await cancellable { try runSimpleQuery(unsafeSQL: sql) }
    }

    /// Runs `queries` in one round trip using libpq pipeline mode, followed by one sync point.
    ///
    /// Each element of the result is that statement's rows or its error. The statements form one implicit
    /// transaction (unless inside `BEGIN`): when one fails, the earlier ones are rolled back and the later ones are
    /// skipped (`.pipelineAborted`). The connection stays usable. Throws only for connection-level failures (and
    /// `.cancelled`, like `query(_:prepared:)`).
    public func pipeline(
        _ queries: [PostgresQuery], prepared: Bool = false
    ) async throws -> [Result<PostgresRows, PostgresError>] {
        try await cancellable { try runPipeline(queries, prepared: prepared) }
    }

    /// `query(_:prepared:)` for work already on this connection's queue, outside any task
    /// (`PostgresPool.leasing(_:reply:)`): runs at once and cannot be cancelled.
    @discardableResult
    public func queryNow(_ query: PostgresQuery, prepared: Bool = false) throws -> PostgresRows {
        try runQuery(query, prepared: prepared)
    }

    /// `pipeline(_:prepared:)` for work already on this connection's queue, outside any task
    /// (`PostgresPool.leasing(_:reply:)`): runs at once and cannot be cancelled.
    public func pipelineNow(
        _ queries: [PostgresQuery], prepared: Bool = false
    ) throws -> [Result<PostgresRows, PostgresError>] {
        try runPipeline(queries, prepared: prepared)
    }

    /// Runs blocking libpq work so that cancelling the current task cancels it: the cancellation handler (on
    /// whatever thread cancels) sends `PQcancel` while the work runs. The server may act on a cancel request a
    /// little late, after the statement finished, and would then cancel the next one: so a connection a cancel
    /// was sent on is closed, never reused.
    func cancellable<T>(_ work: () throws -> T) async throws -> T {
        let canceller = self.canceller
        let ticket = canceller.register()
        return try await withTaskCancellationHandler {
            defer { canceller.unregister(ticket) }
            guard canceller.begin() else { throw PostgresError.cancelledByTask() }
            let result = Result { try work() }
            guard canceller.end() else { return try result.get() }
            close()
            if case .success(let value) = result { return value }
            throw PostgresError.cancelledByTask()
        } onCancel: {
            canceller.cancel(ticket)
        }
    }

    func runQuery(_ query: PostgresQuery, prepared: Bool = false) throws -> PostgresRows {
        let conn = try liveHandle()
        if prepared, let name = try preparedName(for: query, conn: conn) {
            let result = Self.withParams(query.binds) { n, _, values, lengths, formats in
                PQexecPrepared(conn, name, n, values, lengths, formats, 0)
            }
            do {
                return try consume(result, query: query)
            } catch let error as PostgresError where error.sqlState == "26000" {
                // The statement vanished (DEALLOCATE ALL, DISCARD ALL): forget it. Outside a transaction nothing
                // ran, so prepare again and retry once; inside one the transaction is aborted anyway.
                preparedStatements = preparedStatements.filter { $0.value != name }
                recentStatements.removeAll()
                guard PQtransactionStatus(conn) == PQTRANS_IDLE else { throw error }
                return try runQuery(query, prepared: true)
            }
        }
        let result = Self.withParams(query.binds) { n, types, values, lengths, formats in
            PQexecParams(conn, query.sql, n, types, values, lengths, formats, 0)
        }
        return try consume(result, query: query)
    }

    @discardableResult
    func runSimpleQuery(unsafeSQL sql: String) throws -> PostgresRows {
        let conn = try liveHandle()
        let result = PQexec(conn, sql)
        return try consume(result, query: PostgresQuery(unsafeSQL: sql))
    }

    func runPipeline(
        _ queries: [PostgresQuery], prepared: Bool = false
    ) throws -> [Result<PostgresRows, PostgresError>] {
        let conn = try liveHandle()
        if queries.isEmpty { return [] }
        var names: [String?] = []
        for q in queries { names.append(prepared ? try preparedName(for: q, conn: conn) : nil) }
        guard PQenterPipelineMode(conn) == 1 else { throw connectionError(conn, "cannot enter pipeline mode") }
        PQsetnonblocking(conn, 1)
        for (q, name) in zip(queries, names) {
            let sent = Self.withParams(q.binds) { n, types, values, lengths, formats in
                if let name { return PQsendQueryPrepared(conn, name, n, values, lengths, formats, 0) }
                return PQsendQueryParams(conn, q.sql, n, types, values, lengths, formats, 0)
            }
            guard sent == 1 else { return try abandonPipeline(conn) }
        }
        // One flush for the whole pipeline, after its sync (libpq sends early only past 8 KB). A flush per statement
        // let the server see each statement alone: it answered each in its own packet, and the queue thread slept
        // and woke once per result instead of once per round trip.
        guard PQpipelineSync(conn) == 1, flush(conn) else { return try abandonPipeline(conn) }
        PQsetnonblocking(conn, 0)
        var results: [Result<PostgresRows, PostgresError>] = []
        results.reserveCapacity(queries.count)
        for q in queries {
            guard let result = PQgetResult(conn) else { return try abandonPipeline(conn) }
            results.append(
                Result { try consume(result, query: q, checkCommit: false) }.mapError { Self.asPostgresError($0) })
            // Each statement's results end with a NULL.
            while let extra = PQgetResult(conn) { PQclear(extra) }
        }
        guard let sync = PQgetResult(conn) else { return try abandonPipeline(conn) }
        let syncStatus = PQresultStatus(sync)
        PQclear(sync)
        guard syncStatus == PGRES_PIPELINE_SYNC, PQexitPipelineMode(conn) == 1 else {
            return try abandonPipeline(conn)
        }
        // The implicit transaction commits at the sync point: its wait for the standby may have been cancelled.
        try throwIfCommitNotReplicated(query: queries.last?.sql)
        return results
    }

    // MARK: Pool support

    /// Cheap liveness check before reuse: if the idle socket is readable (the server sent a termination message
    /// or closed it, e.g. after a restart), consume the input; returns whether the connection is still OK.
    func probe() -> Bool {
        guard let conn = handle, PQstatus(conn) == CONNECTION_OK else { return false }
        // A server shutting down sends an error (which libpq hands to the notice processor while idle) and then
        // closes the socket: keep reading while there is input, so the EOF is seen too.
        for _ in 0..<8 {
            var pfd = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 0) > 0 else { break }
            if PQconsumeInput(conn) == 0 { return false }
            while let notify = PQnotifies(conn) { PQfreemem(notify) }
            if PQstatus(conn) != CONNECTION_OK { return false }
        }
        return PQstatus(conn) == CONNECTION_OK
    }

    /// Makes the connection ready for the next user: rolls back an open transaction. Returns false when the
    /// connection must be discarded.
    func prepareForReuse() -> Bool {
        guard let conn = handle, PQstatus(conn) == CONNECTION_OK else { return false }
        if PQpipelineStatus(conn) != PQ_PIPELINE_OFF { return false }
        switch PQtransactionStatus(conn) {
        case PQTRANS_IDLE:
            return true
        case PQTRANS_INTRANS, PQTRANS_INERROR:
            return (try? runSimpleQuery(unsafeSQL: "ROLLBACK")) != nil && PQtransactionStatus(conn) == PQTRANS_IDLE
        default:
            return false
        }
    }

    /// `PQtransactionStatus` is idle (not inside BEGIN).
    var isIdleOutsideTransaction: Bool {
        guard let handle else { return false }
        return PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    // MARK: Internals

    private func liveHandle() throws -> OpaquePointer {
        guard let handle else { throw PostgresError.connection("connection is closed") }
        guard PQstatus(handle) == CONNECTION_OK else {
            throw connectionError(handle, "connection is broken")
        }
        return handle
    }

    private func connectionError(_ conn: OpaquePointer, _ fallback: String) -> PostgresError {
        PostgresError.connection(PostgresError.trimmed(PQerrorMessage(conn)) ?? fallback)
    }

    /// After a failure in the middle of a pipeline the protocol state is unknown: drop the connection.
    private func abandonPipeline(_ conn: OpaquePointer) throws -> [Result<PostgresRows, PostgresError>] {
        let error = connectionError(conn, "pipeline failed")
        close()
        throw error
    }

    /// Flushes a non-blocking connection, reading input meanwhile so the server never blocks on a full socket.
    private func flush(_ conn: OpaquePointer) -> Bool {
        while true {
            let r = PQflush(conn)
            if r == 0 { return true }
            if r < 0 { return false }
            var pfd = pollfd(fd: PQsocket(conn), events: Int16(POLLIN | POLLOUT), revents: 0)
            if poll(&pfd, 1, -1) < 0, errno != EINTR { return false }
            if pfd.revents & Int16(POLLIN) != 0, PQconsumeInput(conn) == 0 { return false }
        }
    }

    private func preparedName(for query: PostgresQuery, conn: OpaquePointer) throws -> String? {
        if let recent = recentStatements.first(where: { $0.key.matches(query) }) { return recent.name }
        let key = PreparedKey(sql: query.sql, types: query.binds.map { Oid($0.type.rawValue) })
        if let name = preparedStatements[key] {
            remember(key, name)
            return name
        }
        guard preparedStatements.count < Self.maxPreparedStatements else { return nil }
        statementCounter += 1
        let name = "og_\(statementCounter)"
        let result = PQprepare(conn, name, query.sql, Int32(key.types.count), key.types)
        _ = try consume(result, query: query)
        preparedStatements[key] = name
        remember(key, name)
        return name
    }

    /// A prepared statement's identity: its text and its parameters' types.
    private struct PreparedKey: Hashable {
        let sql: String
        let types: [Oid]

        func matches(_ query: PostgresQuery) -> Bool {
            types.count == query.binds.count && sql == query.sql
                && zip(types, query.binds).allSatisfy { $0 == Oid($1.type.rawValue) }
        }
    }

    private func remember(_ key: PreparedKey, _ name: String) {
        if recentStatements.count == 8 { recentStatements.removeLast() }
        recentStatements.insert((key, name), at: 0)
    }

    private func forgetPreparedStatements() {
        preparedStatements.removeAll()
        recentStatements.removeAll()
    }

    /// Converts a result (and clears it). `checkCommit`: a success is an error when the server warned that its
    /// commit's wait for the standby was cancelled (a pipeline checks once, after its sync point, instead).
    private func consume(_ result: OpaquePointer?, query: PostgresQuery, checkCommit: Bool = true) throws
        -> PostgresRows
    {
        guard let result else {
            throw PostgresError.fromResult(nil, conn: handle, query: query.sql, binds: query.binds)
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            if checkCommit { try throwIfCommitNotReplicated(query: query.sql) }
            return PostgresRows(result: result)
        default:
            if checkCommit { _ = box.takeSyncReplicationCancelled() }
            throw PostgresError.fromResult(result, conn: handle, query: query.sql, binds: query.binds)
        }
    }

    /// A commit whose wait for the synchronous standby was cancelled succeeds on the wire, with only a WARNING (seen
    /// by the notice receiver) to say it may not be on the standby: that is no success to report.
    private func throwIfCommitNotReplicated(query: String?) throws {
        guard box.takeSyncReplicationCancelled() else { return }
        throw PostgresError.commitNotReplicated(query: query)
    }

    static func asPostgresError(_ error: any Error) -> PostgresError {
        (error as? PostgresError) ?? PostgresError(kind: .protocolViolation, message: "\(error)")
    }

    /// Lays out binds for libpq: text values NUL-terminated in one buffer, binary values with lengths.
    static func withParams<R>(
        _ binds: [PostgresBind],
        _ body: (
            Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
            UnsafePointer<Int32>?
        ) -> R
    ) -> R {
        if binds.isEmpty { return body(0, nil, nil, nil, nil) }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(binds.reduce(0) { $0 + ($1.bytes?.count ?? 0) + 1 })
        var offsets: [Int] = []
        var lengths: [Int32] = []
        for bind in binds {
            if let bytes = bind.bytes {
                offsets.append(buffer.count)
                buffer.append(contentsOf: bytes)
                buffer.append(0)
                lengths.append(Int32(bytes.count))
            } else {
                offsets.append(-1)
                lengths.append(0)
            }
        }
        let types = binds.map { Oid($0.type.rawValue) }
        let formats = binds.map { $0.format.rawValue }
        return buffer.withUnsafeBufferPointer { raw in
            let base = raw.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
            let values: [UnsafePointer<CChar>?] = offsets.map { offset in
                offset < 0 ? nil : base.map { $0 + offset }
            }
            return body(Int32(binds.count), types, values, lengths, formats)
        }
    }

    static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer {
            for copy in copies { free(copy) }
        }
        let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
        // Never empty (NULL-terminated), so baseAddress is non-nil.
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}

/// Owns a `PGconn`; finishes it when released. Not Sendable: lives inside one `PostgresConnection` actor.
///
/// Also the connection's notice receiver: libpq calls it on the thread running the statement (the actor's queue),
/// while it reads the statement's results, so the flag it sets is read right after by the same thread.
final class LibPQConnectionBox {
    var conn: OpaquePointer?
    /// Set by the notice receiver when the server warned that a commit's wait for synchronous replication was
    /// cancelled; read and cleared by `takeSyncReplicationCancelled()`.
    private var syncReplicationCancelled = false

    /// Replaces `open`'s silent notice processor with a receiver that watches for the synchronous replication
    /// warning (and swallows every notice, as before: stdout carries JSON). The box outlives the handle (the handle
    /// is finished first, in `close()` or `deinit`), so the unretained pointer stays valid.
    func watchNotices(of conn: OpaquePointer) {
        syncReplicationCancelled = false
        PQsetNoticeReceiver(
            conn,
            { arg, result in
                guard let arg, let result, LibPQConnectionBox.isSyncReplicationCancelled(result) else { return }
                Unmanaged<LibPQConnectionBox>.fromOpaque(arg).takeUnretainedValue().syncReplicationCancelled = true
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    func takeSyncReplicationCancelled() -> Bool {
        defer { syncReplicationCancelled = false }
        return syncReplicationCancelled
    }

    /// PostgreSQL's `SyncRepWaitForLSN` warns (SQLSTATE 01000) "canceling wait for synchronous replication due to
    /// user request" on a cancel (`PQcancel`, `pg_cancel_backend`; not on `statement_timeout`, which PostgreSQL 15
    /// turns off before the commit), and "canceling the wait for synchronous replication and
    /// terminating connection…" before it terminates the backend (that connection then breaks, which is already an
    /// error). The severity is matched unlocalised; the text in English, the server's messages as initdb sets them.
    static func isSyncReplicationCancelled(_ result: OpaquePointer) -> Bool {
        func field(_ code: UInt8) -> String? {
            PQresultErrorField(result, Int32(code)).map { String(cString: $0) }
        }
        guard field(UInt8(ascii: "V")) == "WARNING", let message = field(UInt8(ascii: "M")) else { return false }
        return message.contains("wait for synchronous replication")
    }

    deinit {
        if let conn { PQfinish(conn) }
    }
}

/// Lets any thread cancel the statement in progress on one connection: `PQcancel` on a `PGcancel` object, which
/// libpq allows from a thread other than the connection's. Sendable: all state is behind the `Mutex`.
///
/// `PQcancel` opens a connection of its own to the server (a blocking round trip, longer during a partition), so
/// it never runs on the thread that cancels (an event loop closing a client's connection, or the cooperative
/// pool): the request is decided under the lock and sent from one serial queue. The `PGcancel` object is a
/// reference (`CancelObject`) freed when its last user lets go, so a send still queued when the connection is
/// finished uses a live object.
///
/// A call registers a ticket first; a cancellation handler acts only for its own ticket, so one arriving late can
/// never cancel the next caller's statement.
final class StatementCanceller: Sendable {
    private struct State {
        var cancel: CancelObject?
        var lastTicket: UInt64 = 0
        var active: UInt64?
        var requested = false
        var running = false
        var sent = false
    }

    private let state = Mutex(State())

    /// A `PGcancel` object. `@unchecked Sendable`: libpq lets any thread call `PQcancel` on it (it holds only the
    /// server's address and the backend's key, no link to the `PGconn`); it is freed once, by the last reference.
    final class CancelObject: @unchecked Sendable {
        let pointer: OpaquePointer

        init(_ pointer: OpaquePointer) {
            self.pointer = pointer
        }

        /// Sends the cancel request (blocking: a short connection of its own to the server).
        func send() {
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(pointer, &buffer, Int32(buffer.count))
        }

        deinit {
            PQfreeCancel(pointer)
        }
    }

    /// Where cancel requests are sent from: never the thread that cancels.
    private static let sender = DispatchQueue(label: "postgres.cancel")

    /// Makes the cancel object for a fresh handle (on the connection's queue).
    func install(_ conn: OpaquePointer) {
        let cancel = PQgetCancel(conn).map(CancelObject.init)
        state.withLock { $0.cancel = cancel }
    }

    /// Lets go of the cancel object (the handle is about to be finished; a send still queued keeps it alive).
    func uninstall() {
        state.withLock { $0.cancel = nil }
    }

    func register() -> UInt64 {
        state.withLock { s in
            s.lastTicket &+= 1
            s.active = s.lastTicket
            s.requested = false
            s.running = false
            s.sent = false
            return s.lastTicket
        }
    }

    func unregister(_ ticket: UInt64) {
        state.withLock { s in
            guard s.active == ticket else { return }
            s.active = nil
            s.running = false
        }
    }

    /// Before the blocking work: false when the caller was cancelled already (then run nothing).
    func begin() -> Bool {
        state.withLock { s in
            if s.requested { return false }
            s.running = true
            return true
        }
    }

    /// After the blocking work: whether a cancel request was sent while it ran.
    func end() -> Bool {
        state.withLock { s in
            s.running = false
            return s.sent
        }
    }

    /// From the cancellation handler (any thread). Decides under the lock, so `end()` cannot miss that a request
    /// went out (the connection is then not reused: the server may act on the cancel late), and sends it from the
    /// cancel queue.
    func cancel(_ ticket: UInt64) {
        let send = state.withLock { s -> CancelObject? in
            guard s.active == ticket else { return nil }
            s.requested = true
            guard s.running, !s.sent, let cancel = s.cancel else { return nil }
            s.sent = true
            return cancel
        }
        guard let send else { return }
        Self.sender.async { send.send() }
    }

    deinit {
        uninstall()
    }
}
