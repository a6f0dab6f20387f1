// One connection's requests in flight: parse, hand to the handler on a Task, serialize; cancel on disconnect.
import Dispatch
import Synchronization

/// One connection's requests in flight (`ConnectionDispatcher`), outside the generic class: a type nested in it
/// would have its metadata looked up at run time on every request (its `Mutex`'s `withLock`), because the handler's
/// type is known only where the gateway builds its server (docs/perf/README.md, section 1, session 38).
struct DispatcherState {
    /// Requests (or batches) in flight: counted before their task starts.
    var inFlight = 0
    /// Their tasks, by a per-connection token, for cancellation (stored just after each task is created).
    var running: [UInt64: Task<Void, Never>] = [:]
    /// Tokens whose task finished before `dispatch` could store it (it then is not stored).
    var finishedUnstored: Set<UInt64> = []
    var nextToken: UInt64 = 0
    var closed = false
    var ended = false
    /// Called once nothing is in flight (`whenIdle`).
    var idleCallbacks: [@Sendable () -> Void] = []
    /// Set while the stdio reader waits in `dispatch(_:blockingAt:)`: wake it when `running` is down to this.
    var wakeReaderAt: Int? = nil
}

/// What `ConnectionDispatcher.dispatch` did with a frame (outside the generic class, as `DispatcherState`).
enum DispatchedFrame: Equatable {
    /// Handled on a task: `complete` will be called with its answer.
    case started
    /// Answered at once (`RPCHandler.answerNow`); the caller writes the response (nil for a notification),
    /// encoding it straight into its own output (`RPCResponse.appendFrame(to:)`), not through a frame of its own.
    /// `complete` is not called.
    case answered(RPCResponse?)
    /// The connection is closed: nobody could read an answer.
    case dropped
}

/// Runs one connection's requests: parse, dispatch to the handler, serialize. Transport-independent.
///
/// It is the one owner of the connection's requests in flight: each runs on its own `Task`, kept here until it
/// finished. When the transport reports the connection closed (`closed()`), the tasks still running are cancelled
/// (the client can no longer receive their answers, so a handler awaiting a query sees cancellation), and
/// `sessionEnded` fires once the last of them finished. A peer's EOF (stdin at its end, a socket half-close) is not
/// a close: the transport lets what runs finish and be answered first.
final class ConnectionDispatcher<Handler: RPCHandler>: Sendable {
    typealias State = DispatcherState
    typealias Dispatched = DispatchedFrame

    let handler: Handler
    let session: Handler.Session
    let info: ConnectionInfo
    let maxDepth: Int
    let sendFrame: @Sendable ([UInt8]) -> Void
    let complete: @Sendable ([UInt8]?) -> Void
    let state = Mutex(State())
    /// Wakes the (one) thread blocked in `dispatch(_:blockingAt:)`.
    let capacity = DispatchSemaphore(value: 0)

    init(
        handler: Handler, info: ConnectionInfo, maxDepth: Int, sendFrame: @escaping @Sendable ([UInt8]) -> Void,
        complete: @escaping @Sendable ([UInt8]?) -> Void
    ) {
        self.handler = handler
        self.session = handler.makeSession(info)
        self.info = info
        self.maxDepth = maxDepth
        self.sendFrame = sendFrame
        self.complete = complete
    }

    /// Requests (or batches) in flight.
    var inFlight: Int { state.withLock { $0.inFlight } }

    /// Handles one frame: a single request the handler can answer at once is answered here, on the caller's
    /// thread (`.answered`); anything else runs on its own task and `complete` is called exactly once with the
    /// response frame (or nil). A frame that arrives after `closed()` is dropped.
    ///
    /// With `blockingAt` (stdio's one reader thread, never a pool thread): once that many requests are in flight,
    /// blocks the caller until at most half of them are left, so a full pipeline costs one wake-up per batch of
    /// completions instead of one per request, and the check shares the lock that counts the request.
    /// `beforeWaiting` runs just before the caller would block (stdio writes the answers it held back).
    @discardableResult
    func dispatch(_ frame: [UInt8], blockingAt limit: Int? = nil, beforeWaiting: () -> Void = {}) -> Dispatched {
        var later: (start: RPCNowAnswer.Start, id: RPCID?)? = nil
        var inbound: RPCInbound? = nil
        switch RPCExchange.atOnce(
            frame, handler: handler, session: session, connection: info, maxDepth: maxDepth, sendFrame: sendFrame)
        {
        case .answered(let response):
            guard state.withLock({ !$0.closed }) else { return .dropped }
            return .answered(response)
        case .later(let start, let id):
            later = (start, id)
        case .declined(let parsed):
            inbound = parsed
        }
        let token = state.withLock { s -> UInt64? in
            guard !s.closed else { return nil }
            s.inFlight += 1
            defer { s.nextToken += 1 }
            return s.nextToken
        }
        guard let token else { return .dropped }
        let task: Task<Void, Never>?
        if let (start, id) = later {
            // No task: the handler answers from whichever thread has the answer. Counted in flight like a task, so
            // `whenIdle` and the end of the session wait for it; a close cannot cancel it (it has nothing to stop).
            start { result in
                self.complete(id.map { RPCExchange.frame(RPCResponse(id: $0, result: result)) })
                self.finished(token, hasTask: false)
            }
            task = nil
        } else {
            // Created outside the lock: starting a task may wake a pool thread, and completions take this lock too.
            task = Task {
                let response = await self.process(inbound ?? RPCInbound.classify(frame, maxDepth: self.maxDepth))
                self.complete(response)
                self.finished(token)
            }
        }
        let mustWait = state.withLock { s -> Bool in
            if let task, s.finishedUnstored.remove(token) == nil {
                s.running[token] = task
                // Closed meanwhile: `closed()` did not see this task, so cancel it here.
                if s.closed { task.cancel() }
            }
            guard let limit, s.inFlight >= max(1, limit) else { return false }
            s.wakeReaderAt = max(1, limit) / 2
            return true
        }
        if mustWait {
            beforeWaiting()
            capacity.wait()
        }
        return .started
    }

    /// The transport closed: cancels what is still running; ends the session now or after the last request.
    func closed() {
        let (running, end) = state.withLock { s -> ([Task<Void, Never>], Bool) in
            if s.closed { return ([], false) }
            s.closed = true
            return (Array(s.running.values), endIfDone(&s))
        }
        for task in running { task.cancel() }
        if end { handler.sessionEnded(session) }
    }

    /// Calls `callback` once nothing is in flight: at once if nothing is, else when the last request finished.
    func whenIdle(_ callback: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.inFlight == 0 { return true }
            s.idleCallbacks.append(callback)
            return false
        }
        if now { callback() }
    }

    /// A request finished; `hasTask` false for one answered later without a task (never in `running`).
    func finished(_ token: UInt64, hasTask: Bool = true) {
        let (idle, wakeReader, end) = state.withLock { s -> ([@Sendable () -> Void], Bool, Bool) in
            s.inFlight -= 1
            if hasTask, s.running.removeValue(forKey: token) == nil { s.finishedUnstored.insert(token) }
            var wakeReader = false
            if let at = s.wakeReaderAt, s.inFlight <= at {
                s.wakeReaderAt = nil
                wakeReader = true
            }
            var idle: [@Sendable () -> Void] = []
            if s.inFlight == 0 {
                idle = s.idleCallbacks
                s.idleCallbacks = []
            }
            return (idle, wakeReader, endIfDone(&s))
        }
        if wakeReader { capacity.signal() }
        for callback in idle { callback() }
        if end { handler.sessionEnded(session) }
    }

    /// Whether the session ends now (closed, nothing in flight, not ended yet); marks it ended.
    private func endIfDone(_ s: inout State) -> Bool {
        guard s.closed, s.inFlight == 0, !s.ended else { return false }
        s.ended = true
        return true
    }

    func process(_ inbound: RPCInbound) async -> [UInt8]? {
        await RPCExchange.answer(
            inbound, handler: handler, session: session, connection: info, sendFrame: sendFrame)
    }
}

/// One frame in, its answer out, exactly as every transport does it: parse, classify, handle each request (a batch's
/// concurrently), serialize. The socket and stdio dispatchers use it per line; the HTTP listener per request body.
public enum RPCExchange {
    /// Frames up to this size are offered to `RPCHandler.answerNow`.
    static let answerNowMaxBytes = 4_096

    /// The answer to `frame` (a request, a notification or a batch), `\n`-terminated; nil when it held only
    /// notifications. `sendFrame` receives what handlers send back on their own (`RPCContext.notify`).
    public static func answer<Handler: RPCHandler>(
        _ frame: [UInt8], handler: Handler, session: Handler.Session, connection: ConnectionInfo,
        maxDepth: Int = JSONParsing.defaultMaxDepth, sendFrame: @escaping @Sendable ([UInt8]) -> Void = { _ in }
    ) async -> [UInt8]? {
        await answer(
            RPCInbound.classify(frame, maxDepth: maxDepth), handler: handler, session: session, connection: connection,
            sendFrame: sendFrame)
    }

    /// The answer to a frame already classified (`RPCInbound.classify`).
    public static func answer<Handler: RPCHandler>(
        _ inbound: RPCInbound, handler: Handler, session: Handler.Session, connection: ConnectionInfo,
        sendFrame: @escaping @Sendable ([UInt8]) -> Void = { _ in }
    ) async -> [UInt8]? {
        func run(_ entry: RPCInbound.Entry) async -> RPCResponse? {
            switch entry {
            case .invalid(let invalid):
                return RPCResponse(id: invalid.id ?? .null, result: .failure(invalid.error))
            case .request(let request):
                let context = RPCContext(connection: connection, requestID: request.id, sendFrame: sendFrame)
                let result = await handler.handle(request, session: session, context: context)
                guard let id = request.id else { return nil }
                return RPCResponse(id: id, result: result)
            }
        }
        switch inbound {
        case .reject(let response):
            return Self.frame(response)
        case .single(let entry):
            guard let response = await run(entry) else { return nil }
            return Self.frame(response)
        case .batch(let entries):
            let responses = await withTaskGroup(of: (Int, RPCResponse?).self) { group in
                for (index, entry) in entries.enumerated() {
                    group.addTask { (index, await run(entry)) }
                }
                var collected = [RPCResponse?](repeating: nil, count: entries.count)
                for await (index, response) in group { collected[index] = response }
                return collected.compactMap { $0 }
            }
            if responses.isEmpty { return nil }
            var bytes: [UInt8] = [UInt8(ascii: "[")]
            for (index, response) in responses.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                response.append(to: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
            bytes.append(0x0A)
            return bytes
        }
    }

    /// What `atOnce` did with a frame.
    enum AtOnce {
        /// Answered on the caller's thread: the response (nil for a notification).
        case answered(RPCResponse?)
        /// Taken by the handler to answer later without a task: `start` replies once, on any thread, with the
        /// result for request `id` (nil for a notification).
        case later(RPCNowAnswer.Start, id: RPCID?)
        /// Left to `answer` (a batch, a malformed frame, a request the handler leaves to `handle`), with what was
        /// parsed of it already (nil: too large to parse on the caller's thread, `answerNowMaxBytes`). Nothing was
        /// called and nothing started.
        case declined(RPCInbound?)
    }

    /// The at-once path every transport shares (decision 009): a small frame holding one request is parsed on the
    /// caller's (transport) thread and offered to `handler.answerNow`. A large frame (a catalog, a batch) is not
    /// parsed here: it would hold up every other connection of that thread.
    static func atOnce<Handler: RPCHandler>(
        _ frame: [UInt8], handler: Handler, session: Handler.Session, connection: ConnectionInfo,
        maxDepth: Int = JSONParsing.defaultMaxDepth, sendFrame: @escaping @Sendable ([UInt8]) -> Void = { _ in }
    ) -> AtOnce {
        guard frame.count <= answerNowMaxBytes else { return .declined(nil) }
        let inbound = RPCInbound.classify(frame, maxDepth: maxDepth)
        guard case .single(.request(let request)) = inbound else { return .declined(inbound) }
        let context = RPCContext(connection: connection, requestID: request.id, sendFrame: sendFrame)
        switch handler.answerNow(request, session: session, context: context) {
        case .answered(let result)?: return .answered(request.id.map { RPCResponse(id: $0, result: result) })
        case .later(let start)?: return .later(start, id: request.id)
        case nil: return .declined(inbound)
        }
    }

    /// `answer` without a task, when `atOnce` takes the frame (the HTTP route's at-once path; the socket and stdio
    /// dispatchers use `atOnce` itself, to write an answer straight into their output): `reply` gets the bytes
    /// `answer` would return, at once (on the caller's thread) or from the handler's later reply (on any thread),
    /// and the result is true. False, with nothing called and nothing started, when `atOnce` declines it: the caller
    /// then uses `answer`.
    public static func answerWithoutTask<Handler: RPCHandler>(
        _ frame: [UInt8], handler: Handler, session: Handler.Session, connection: ConnectionInfo,
        maxDepth: Int = JSONParsing.defaultMaxDepth, reply: @escaping @Sendable ([UInt8]?) -> Void
    ) -> Bool {
        switch atOnce(frame, handler: handler, session: session, connection: connection, maxDepth: maxDepth) {
        case .answered(let response):
            reply(response.map(Self.frame))
        case .later(let start, let id):
            start { result in reply(id.map { Self.frame(RPCResponse(id: $0, result: result)) }) }
        case .declined:
            return false
        }
        return true
    }

    static func frame(_ response: RPCResponse) -> [UInt8] {
        var bytes: [UInt8] = []
        // The frame around an encoded result (an offers.best answer, ~1.2 KB) is its size plus ~60 bytes: reserved
        // at once, not regrown (a new buffer and a copy) on the way there.
        if case .success(.encoded(let encoded)) = response.result {
            bytes.reserveCapacity(96 + encoded.bytes.count)
        } else {
            bytes.reserveCapacity(96)
        }
        response.appendFrame(to: &bytes)
        return bytes
    }
}
