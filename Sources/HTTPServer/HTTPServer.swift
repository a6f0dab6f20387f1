// HTTP/1.1 on GNU libmicrohttpd: its epoll threads do all socket IO and parsing; complete requests go to Swift tasks.
import CMicroHTTPD
import Dispatch
import Foundation
import JSONRPC
import Synchronization
import Threads

#if canImport(Glibc)
    import Glibc
#endif

/// An HTTP/1.1 server (keep-alive, pipelining) on libmicrohttpd, one daemon per listen address.
///
/// libmicrohttpd parses everything (request line, header fields, chunked bodies) on its own internal epoll threads.
/// When a request is complete it is first offered to the `immediate` handler, if any: an answer given at once is
/// queued on libmicrohttpd's thread without suspending anything (no task, no thread hand-off), one promised for
/// later suspends the connection until it comes. Otherwise the connection is *suspended* (`MHD_suspend_connection`),
/// the request is handed to the handler on a Swift task, and when the handler returns the connection is *resumed*
/// and the response queued from libmicrohttpd's thread, as its API requires. No thread ever blocks waiting for a
/// handler, so a slow handler holds one suspended connection and nothing else (see
/// `docs/decisions/008-http-listener.md`).
///
/// Lifecycle: `listen(_:)` any number of times, then `shutdown(gracePeriod:)`.
public final class HTTPServer: Sendable {
    let handler: HTTPRequestHandler
    let immediate: HTTPImmediateHandler?
    let configuration: HTTPServerConfiguration
    private let state = Mutex<State>(State())
    /// Requests between their first byte of body-or-headers seen by us and their response sent (shutdown waits).
    let activeRequests = LiveCount()

    struct State {
        var listeners: [Listener] = []
        var shuttingDown = false
        var finished = false
    }

    public init(
        configuration: HTTPServerConfiguration = HTTPServerConfiguration(), immediate: HTTPImmediateHandler? = nil,
        handler: @escaping HTTPRequestHandler
    ) {
        self.configuration = configuration
        self.immediate = immediate
        self.handler = handler
    }

    /// The addresses bound so far (TCP port 0 resolved to the real port).
    public var boundAddresses: [ListenAddress] { state.withLock { $0.listeners.map(\.address) } }

    var isShuttingDown: Bool { state.withLock { $0.shuttingDown } }

    /// Binds `address` and starts serving it; returns the bound address.
    @discardableResult
    public func listen(_ address: ListenAddress) throws(JSONRPCError) -> ListenAddress {
        guard !isShuttingDown else { throw JSONRPCError(.notRunning, "server is shutting down") }
        let (fd, bound) = try address.openListeningSocket(permissions: configuration.unixSocketPermissions)
        let listener = Listener(server: self, address: bound)
        let retained = Unmanaged.passRetained(listener)
        let daemon = og_mhd_start(
            fd, UInt32(max(1, configuration.threads)), UInt32(clamping: max(1, configuration.maxConnections)),
            UInt32(clamping: max(1, configuration.idleTimeoutSeconds)), max(4096, configuration.maxHeaderBytes), 1,
            accessHandler, requestCompleted, connectionEvent, retained.toOpaque())
        guard let daemon else {
            retained.release()
            close(fd)
            if case .unix(let path) = bound { unlink(path) }
            throw JSONRPCError(.invalidAddress, "libmicrohttpd could not start on \(bound)")
        }
        listener.started(daemon: daemon, listenFD: fd, retained: retained)
        state.withLock { $0.listeners.append(listener) }
        configuration.logger?(.listening(bound))
        return bound
    }

    /// Stops accepting, lets requests in progress finish (and their responses be sent) for up to `gracePeriod`,
    /// cancels the handlers still running, then stops every daemon (closing idle keep-alive connections) and removes
    /// Unix socket files. Idempotent; returns when done.
    public func shutdown(gracePeriod: Duration) async {
        let deadline = ContinuousClock.now.advanced(by: gracePeriod)
        let listeners = state.withLock { s -> [Listener]? in
            if s.shuttingDown { return nil }
            s.shuttingDown = true
            return s.listeners
        }
        guard let listeners else { return }
        configuration.logger?(.shutdownStarted)
        for listener in listeners { listener.stopAccepting() }
        _ = await activeRequests.waitForZero(until: deadline)
        let forced = activeRequests.value
        // Handlers still running past the grace period: cancel them and give them a moment to return and resume
        // their connections, so no connection is left suspended when its daemon stops.
        for listener in listeners { listener.cancelHandlers() }
        for listener in listeners { _ = await listener.handlersRunning.waitForZero(until: .now + .seconds(1)) }
        // MHD_stop_daemon joins libmicrohttpd's threads: a blocking call, so it runs on a thread of its own, never on
        // the cooperative pool.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            startThread(named: "http-shutdown") {
                for listener in listeners { listener.stop() }
                continuation.resume()
            }
        }
        state.withLock { $0.finished = true }
        configuration.logger?(.shutdownFinished(forcedRequests: forced))
    }
}

/// One libmicrohttpd daemon: a listen address, its connections' deadlines, its handlers in flight.
///
/// `@unchecked Sendable`: `daemon`, `listenFD` and `retained` are written once by `started` before the listener is
/// shared (callbacks never read them), then read only by `stopAccepting`/`stop`, which the server calls in order
/// from one shutdown; everything else is behind `Mutex`es.
final class Listener: @unchecked Sendable {
    unowned let server: HTTPServer
    let address: ListenAddress
    private var daemon: OpaquePointer?
    private var listenFD: Int32 = -1
    private var retained: Unmanaged<Listener>?
    private var timer: DispatchSourceTimer?
    let deadlines: Mutex<RequestDeadlines<Int32>>
    /// Handler tasks by token, so shutdown can cancel them.
    private let handlers = Mutex<Handlers>(Handlers())
    /// Resumes in progress, and `stoppedFlag` once the daemon is stopping, after which no connection is resumed (it
    /// would no longer exist). Not a lock: handlers ending on several threads resume their connections at once
    /// (`MHD_resume_connection` is thread-safe), where a mutex held across that system call made them queue for it
    /// (docs/perf/b9-retention.md, session 39). `stop` sets the flag, then waits for the resumes already past it.
    private let resuming = Atomic<Int>(0)
    private static let stoppedFlag = 1 << 40
    let handlersRunning = LiveCount()

    struct Handlers {
        var running: [UInt64: Task<Void, Never>] = [:]
        /// Handlers that ended before their task was stored (so it is not stored at all).
        var endedEarly: Set<UInt64> = []
        var next: UInt64 = 0
    }

    init(server: HTTPServer, address: ListenAddress) {
        self.server = server
        self.address = address
        self.deadlines = Mutex(RequestDeadlines(timeout: server.configuration.requestTimeout))
    }

    var configuration: HTTPServerConfiguration { server.configuration }

    func started(daemon: OpaquePointer, listenFD: Int32, retained: Unmanaged<Listener>) {
        self.daemon = daemon
        self.listenFD = listenFD
        self.retained = retained
        // Checks deadlines a few times per timeout: a late request is cut within a quarter of the timeout.
        let timeout = configuration.requestTimeout
        let interval = max(.milliseconds(50), min(.seconds(1), timeout / 4))
        let nanos = Int(interval / .nanoseconds(1))
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "http-deadlines"))
        timer.schedule(deadline: .now() + .nanoseconds(nanos), repeating: .nanoseconds(nanos))
        timer.setEventHandler { [weak self] in self?.expireLateRequests() }
        timer.resume()
        self.timer = timer
    }

    /// Shuts down (`shutdown(2)`, never `close`: the descriptor stays libmicrohttpd's) every connection past its
    /// deadline. Done under the deadlines lock, which the close notification also takes before libmicrohttpd closes
    /// the descriptor, so a descriptor number is never shut down after it was reused.
    private func expireLateRequests() {
        let count = deadlines.withLock { d -> Int in
            let late = d.expire(at: .now)
            for fd in late { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
            return late.count
        }
        for _ in 0..<count { configuration.logger?(.requestTimedOut) }
    }

    func stopAccepting() {
        guard let daemon else { return }
        let fd = MHD_quiesce_daemon(daemon)
        if fd >= 0 { close(fd) }
        if case .unix(let path) = address { unlink(path) }
    }

    func cancelHandlers() {
        let running = handlers.withLock { Array($0.running.values) }
        for task in running { task.cancel() }
    }

    func stop() {
        resuming.bitwiseOr(Self.stoppedFlag, ordering: .sequentiallyConsistent)
        while resuming.load(ordering: .sequentiallyConsistent) != Self.stoppedFlag { usleep(50) }
        timer?.cancel()
        if let daemon { MHD_stop_daemon(daemon) }
        daemon = nil
        retained?.release()
        retained = nil
    }

    /// Runs the handler for a complete request on a task; resumes the connection with its response.
    ///
    /// The task is created outside the lock (creating it inside made libmicrohttpd's threads and the handlers that
    /// end contend for it); a handler that ends before its task is stored leaves its token in `endedEarly`, so the
    /// task is then not stored at all.
    func dispatch(_ request: HTTPRequest, pending: PendingRequest, connection: ConnectionHandle) {
        handlersRunning.increment()
        let handler = server.handler
        let token = handlers.withLock { h in
            defer { h.next += 1 }
            return h.next
        }
        let task = Task {
            let response = await handler(request)
            pending.handoff.withLock { $0.response = response }
            self.handlers.withLock { h in
                if h.running.removeValue(forKey: token) == nil { h.endedEarly.insert(token) }
            }
            self.resume(connection)
        }
        handlers.withLock { h in
            if h.endedEarly.remove(token) == nil { h.running[token] = task }
        }
    }

    /// What `answerWithoutTask` did with a complete request.
    enum Immediate {
        /// Answered at once: queue this response (the connection was never suspended).
        case answered(HTTPResponse)
        /// Taken, to be answered later: the connection is suspended until the answer resumes it.
        case suspended
        /// Not taken (no immediate handler, or it declined): `dispatch` it.
        case declined
    }

    /// Offers a complete request to the server's immediate handler (on libmicrohttpd's thread, in the access
    /// handler, the only place a connection may be suspended). Counted as a running handler until answered, so
    /// shutdown waits for a later answer as it waits for a task.
    func answerWithoutTask(_ request: HTTPRequest, pending: PendingRequest, connection: OpaquePointer) -> Immediate {
        guard let immediate = server.immediate else { return .declined }
        handlersRunning.increment()
        let handle = ConnectionHandle(pointer: connection)
        let taken = immediate(request) { response in
            // Given before the access handler looked (at once, or on another thread just then): it queues it.
            // Given after it suspended the connection: resumed here, and queued by the access handler's next call.
            let suspended = pending.handoff.withLock { h -> Bool in
                h.response = response
                return h.suspended
            }
            if suspended { self.resume(handle) }
        }
        guard taken else {
            handlersRunning.decrement()
            return .declined
        }
        // Under the hand-off's lock, so an answer given on another thread either is seen here or sees the
        // connection suspended (and resumes it after this).
        let outcome = pending.handoff.withLock { h -> Immediate in
            if let response = h.response { return .answered(response) }
            h.suspended = true
            MHD_suspend_connection(connection)
            return .suspended
        }
        if case .answered = outcome { handlersRunning.decrement() }
        return outcome
    }

    /// Resumes a suspended connection whose response is in its hand-off (unless the daemon stopped: the connection
    /// is then gone), and counts its handler finished.
    private func resume(_ connection: ConnectionHandle) {
        let state = resuming.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue
        if state & Self.stoppedFlag == 0 { MHD_resume_connection(connection.pointer) }
        resuming.wrappingSubtract(1, ordering: .sequentiallyConsistent)
        handlersRunning.decrement()
    }
}

/// A libmicrohttpd connection pointer carried to the handler task. `@unchecked Sendable`: the task only passes it to
/// `MHD_resume_connection` (thread-safe with `MHD_USE_ITC`), and only while the connection is suspended, so it
/// cannot have been freed.
struct ConnectionHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// One request's state between libmicrohttpd's calls of the access handler.
///
/// `@unchecked Sendable`: every `var` is touched only by the libmicrohttpd thread serving the connection (calls for
/// one connection never overlap); `handoff` is written by whoever answers (the handler task, or the immediate
/// handler's respond) and read by that thread, under its own lock.
final class PendingRequest: @unchecked Sendable {
    enum Phase { case receiving, handling }

    let fd: Int32
    /// When the listener first knew of the request: its request line and header fields had arrived (the access
    /// handler's first call). Time queued in this process after it counts against any deadline measured from here.
    let receivedAt = ContinuousClock.now
    var phase = Phase.receiving
    var method = ""
    var path = ""
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
    /// Set when the listener refuses the request (answered once the body, if any, has been read and dropped).
    var refusal: Refusal?
    /// A response is queued already (a refusal answered at the first call).
    var answered = false
    /// The answer, and whether the connection was suspended to wait for it.
    let handoff = Mutex<Handoff>(Handoff())

    struct Handoff {
        var response: HTTPResponse?
        /// Set (by the immediate path) once the connection is suspended: an answer given after must resume it.
        var suspended = false
    }

    init(fd: Int32) { self.fd = fd }
}

// MARK: libmicrohttpd callbacks (called on its threads)

private func listener(_ cls: UnsafeMutableRawPointer?) -> Listener? {
    guard let cls else { return nil }
    return Unmanaged<Listener>.fromOpaque(cls).takeUnretainedValue()
}

private let accessHandler: MHD_AccessHandlerCallback = {
    cls, connection, url, method, _, uploadData, uploadDataSize, conCls in
    guard let listener = listener(cls), let connection, let conCls, let uploadDataSize else { return OG_MHD_NO }
    guard let raw = conCls.pointee else {
        // First call: the request line and header fields are complete.
        let pending = PendingRequest(fd: og_mhd_connection_fd(connection))
        conCls.pointee = Unmanaged.passRetained(pending).toOpaque()
        listener.server.activeRequests.increment()
        pending.method = method.map { String(cString: $0) } ?? ""
        let (fields, folded) = headerFields(connection)
        pending.headers = fields
        if let url, let path = String(validatingCString: url) {
            pending.path = path
        } else {
            pending.refusal = Refusal(400, reason: "invalid_path", message: "the path is not valid UTF-8")
        }
        if pending.refusal == nil && folded {
            // RFC 9112 §5.2: a server must reject obs-fold (or replace it with spaces, which libmicrohttpd does not).
            pending.refusal = Refusal(
                400, reason: "obsolete_line_folding", message: "a header field continues on the next line (obs-fold)")
        }
        if pending.refusal == nil { pending.refusal = framingRefusal(pending.headers, listener.configuration) }
        if let refusal = pending.refusal {
            listener.configuration.logger?(.refused(status: refusal.status, reason: refusal.reason))
            // Answered at once (libmicrohttpd then skips any body and closes); if it cannot take a response yet,
            // the body is read and dropped and the refusal answered at its end.
            if queue(refusal.response, on: connection, closing: true) == OG_MHD_YES { pending.answered = true }
        }
        return OG_MHD_YES
    }
    let pending = Unmanaged<PendingRequest>.fromOpaque(raw).takeUnretainedValue()
    let size = uploadDataSize.pointee
    if size > 0 {
        if pending.refusal == nil, let uploadData {
            if pending.body.count + size > listener.configuration.maxBodyBytes {
                pending.body = []
                pending.refusal = Refusal(
                    413, reason: "body_too_large", message: "the body is larger than the frame limit")
                listener.configuration.logger?(.refused(status: 413, reason: "body_too_large"))
            } else {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: size) { bytes in
                    pending.body.append(contentsOf: UnsafeBufferPointer(start: bytes, count: size))
                }
            }
        }
        uploadDataSize.pointee = 0
        return OG_MHD_YES
    }
    if pending.answered { return OG_MHD_YES }
    switch pending.phase {
    case .receiving:
        if let refusal = pending.refusal { return queue(refusal.response, on: connection, closing: true) }
        pending.phase = .handling
        listener.deadlines.withLock { $0.handling(pending.fd) }
        let request = HTTPRequest(
            method: pending.method, path: pending.path, headers: pending.headers, body: pending.body,
            listenAddress: listener.address, receivedAt: pending.receivedAt)
        pending.body = []
        switch listener.answerWithoutTask(request, pending: pending, connection: connection) {
        case .answered(let response):
            return queue(response, on: connection, closing: listener.server.isShuttingDown)
        case .suspended:
            return OG_MHD_YES
        case .declined:
            MHD_suspend_connection(connection)
            listener.dispatch(request, pending: pending, connection: ConnectionHandle(pointer: connection))
            return OG_MHD_YES
        }
    case .handling:
        // Resumed: the handler's response is there.
        let response =
            pending.handoff.withLock { $0.response }
            ?? Refusal(500, reason: "internal_error", message: "the handler gave no response").response
        return queue(response, on: connection, closing: listener.server.isShuttingDown)
    }
}

private let requestCompleted: MHD_RequestCompletedCallback = { cls, _, conCls, _ in
    guard let listener = listener(cls), let conCls, let raw = conCls.pointee else { return }
    conCls.pointee = nil
    let pending = Unmanaged<PendingRequest>.fromOpaque(raw).takeRetainedValue()
    listener.deadlines.withLock { $0.requestEnded(pending.fd, at: .now) }
    listener.server.activeRequests.decrement()
}

private let connectionEvent: MHD_NotifyConnectionCallback = { cls, connection, _, event in
    guard let listener = listener(cls), let connection else { return }
    let fd = og_mhd_connection_fd(connection)
    guard fd >= 0 else { return }
    if og_mhd_is_connection_start(event) != 0 {
        listener.deadlines.withLock { $0.opened(fd, at: .now) }
    } else {
        listener.deadlines.withLock { $0.closed(fd) }
    }
}

/// Refuses what could be read two ways (request smuggling) or cannot be read at all, and bodies announced larger
/// than the limit. libmicrohttpd parses; this only declines shapes a server may reject (RFC 9112 §6.3).
private func framingRefusal(_ headers: [(name: String, value: String)], _ configuration: HTTPServerConfiguration)
    -> Refusal?
{
    let lengths = headers.filter { $0.name == "content-length" }
    let encodings = headers.filter { $0.name == "transfer-encoding" }
    if lengths.count > 1 || (!lengths.isEmpty && !encodings.isEmpty) {
        return Refusal(
            400, reason: "ambiguous_length", message: "give either one Content-Length or Transfer-Encoding: chunked")
    }
    if encodings.count > 1 || encodings.contains(where: { $0.value.trimmingSpaces.lowercased() != "chunked" }) {
        return Refusal(400, reason: "unsupported_transfer_encoding", message: "only Transfer-Encoding: chunked")
    }
    if let length = lengths.first {
        guard let bytes = Int(length.value.trimmingSpaces), bytes >= 0 else {
            return Refusal(400, reason: "invalid_content_length", message: "Content-Length is not a number")
        }
        if bytes > configuration.maxBodyBytes {
            return Refusal(413, reason: "body_too_large", message: "the body is larger than the frame limit")
        }
    }
    return nil
}

/// The request's header fields, names lowercased, and whether libmicrohttpd unfolded an obs-fold line into one.
///
/// libmicrohttpd 0.9.75 accepts obs-fold (a field line continued on the next line, which starts with a space or a
/// tab) and glues the continuation onto the previous field's *name*: it copies that name to a new block of the
/// connection's memory pool, which lies after the read buffer where every field value stays. So a field whose name
/// lies after its value in memory is one libmicrohttpd unfolded; every other field has its name before its value,
/// on its own line of the read buffer. Nothing here reads the request's bytes: the check compares the addresses
/// libmicrohttpd hands over (decision 008). A later libmicrohttpd that handles obs-fold itself never trips it.
private func headerFields(_ connection: OpaquePointer) -> (fields: [(name: String, value: String)], folded: Bool) {
    final class Collected {
        var fields: [(name: String, value: String)] = []
        var folded = false
    }
    let collected = Collected()
    withExtendedLifetime(collected) {
        _ = MHD_get_connection_values_n(
            connection, OG_MHD_HEADER_KIND,
            { cls, _, key, keySize, value, valueSize in
                guard let cls, let key else { return OG_MHD_YES }
                let box = Unmanaged<Collected>.fromOpaque(cls).takeUnretainedValue()
                let name = String(decoding: UnsafeRawBufferPointer(start: key, count: keySize), as: UTF8.self)
                var text = ""
                if let value {
                    text = String(decoding: UnsafeRawBufferPointer(start: value, count: valueSize), as: UTF8.self)
                    if UInt(bitPattern: value) < UInt(bitPattern: key) + UInt(keySize) { box.folded = true }
                }
                box.fields.append((name.lowercased(), text))
                return OG_MHD_YES
            }, Unmanaged.passUnretained(collected).toOpaque())
    }
    return (collected.fields, collected.folded)
}

/// Queues `response` on `connection` (from libmicrohttpd's thread, inside the access handler, as it requires).
private func queue(_ response: HTTPResponse, on connection: OpaquePointer, closing: Bool) -> MHD_Result {
    var body = response.body
    let made = body.withUnsafeMutableBytes { bytes in
        MHD_create_response_from_buffer(bytes.count, bytes.baseAddress, OG_MHD_RESPMEM_MUST_COPY)
    }
    guard let made else { return OG_MHD_NO }
    var sawConnection = false
    for (name, value) in response.headers {
        if name.lowercased() == "connection" { sawConnection = true }
        _ = MHD_add_response_header(made, name, value)
    }
    if closing && !sawConnection { _ = MHD_add_response_header(made, "Connection", "close") }
    let result = MHD_queue_response(connection, UInt32(response.status), made)
    MHD_destroy_response(made)
    return result
}
