// A pipelining JSON-RPC client over the same framing, on the process-wide client event loop.
import Foundation
import Synchronization
import Threads

#if canImport(Glibc)
    import Glibc
#endif

/// Client settings.
public struct RPCClientConfiguration: Sendable {
    /// Longest accepted incoming line (default 64 MiB); longer lines are dropped.
    public var maxFrameBytes: Int = 64 << 20
    /// Nesting limit when parsing incoming frames (default 512).
    public var maxNestingDepth: Int = 512
    /// Whether a response's `result` is checked for syntax before its call is resolved (default true). False, for a
    /// load generator that only counts most answers: a result laid out as this gateway writes it (the last member
    /// but for an integer `id`) is located from the line's end and not read, so a result handed over unparsed
    /// (``RPCClient/sendForRawResult(method:params:timeout:_:)``) is checked only when parsed
    /// (``RPCRawResult/value(maxDepth:)``). Results parsed for their caller are checked either way.
    public var checksUnreadResults: Bool = true
    public init() {}
}

/// A JSON-RPC 2.0 client: many calls in flight on one connection, matched by id.
///
/// Calls use integer ids 1, 2, 3, …; lines sent with `sendRaw` should use other ids (e.g. strings) so their
/// answers are not mistaken for call results. Incoming lines that answer no pending call (and notifications, when
/// no notification handler is set) are queued for `nextRawLine`.
public final class RPCClient: Sendable {
    /// A call waiting for its response; `deadline` (``EventLoop/now()`` seconds) is when it times out, if ever.
    /// A reference: the table of calls moves a pointer in and out, where a value (its `Waiter` a multi-payload enum
    /// of closures and a continuation) was copied and destroyed through generic witnesses at every step, a fifth
    /// of a load generator's CPU per call (docs/perf/offer-load.md, session 30).
    final class Pending: Sendable {
        /// Who waits: a suspended task, or a callback run on the loop thread (``send(method:params:timeout:_:)``).
        enum Waiter {
            case task(CheckedContinuation<JSONValue, any Error>)
            case callback(@Sendable (Result<JSONValue, any Error>) -> Void)
            /// Takes the result's bytes unparsed (``sendForRawResult(method:params:timeout:_:)``).
            case rawCallback(@Sendable (Result<RPCRawResult, any Error>) -> Void)
        }
        let waiter: Waiter
        let deadline: Double?

        init(waiter: Waiter, deadline: Double?) {
            self.waiter = waiter
            self.deadline = deadline
        }

        var wantsRawResult: Bool {
            if case .rawCallback = waiter { return true }
            return false
        }

        func resume(_ result: Result<JSONValue, any Error>) {
            switch waiter {
            case .task(let continuation): continuation.resume(with: result)
            case .callback(let callback): callback(result)
            case .rawCallback(let callback):
                callback(result.map { RPCRawResult(frame: JSONSerializer.serialize($0)) })
            }
        }

        func resume(raw result: RPCRawResult) {
            guard case .rawCallback(let callback) = waiter else { return }
            callback(.success(result))
        }
    }

    struct State {
        var nextID: Int64 = 1
        var pending: [Int64: Pending] = [:]
        /// Calls with a deadline among `pending` (the loop's tick scans only when there are some).
        var timedCalls = 0
        /// Bytes sent but not yet handed to the loop; `flushScheduled` while a hand-over is queued on it. Requests
        /// made while one is queued ride along: one loop hop and one write for many calls.
        var outbox: [UInt8] = []
        var flushScheduled = false
        var rawLines: [[UInt8]] = []
        var rawWaiters: [(token: UInt64, continuation: CheckedContinuation<[UInt8]?, any Error>)] = []
        var nextToken: UInt64 = 1
        var closed = false
        var notificationHandler: (@Sendable (RPCRequest) -> Void)? = nil

        /// Whether the caller should hand the outbox to the loop: true for the first caller with something to send
        /// while no hand-over is queued (the others' lines ride along with it).
        mutating func takeFlushTurn() -> Bool {
            if flushScheduled || outbox.isEmpty { return false }
            flushScheduled = true
            return true
        }

        /// Registers a call waiting for `id`, counting it among `timedCalls` if it has a deadline.
        mutating func add(_ call: Pending, id: Int64) {
            pending[id] = call
            if call.deadline != nil { timedCalls += 1 }
        }

        /// Removes and returns the call waiting for `id`, keeping `timedCalls` in step.
        mutating func take(_ id: Int64) -> Pending? {
            guard let call = pending.removeValue(forKey: id) else { return nil }
            if call.deadline != nil { timedCalls -= 1 }
            return call
        }
    }

    let loop: EventLoop
    let channelID: UInt64
    let configuration: RPCClientConfiguration
    let state = Mutex(State())

    init(loop: EventLoop, channelID: UInt64, configuration: RPCClientConfiguration) {
        self.loop = loop
        self.channelID = channelID
        self.configuration = configuration
    }

    /// Connects to `unix:/path` or `tcp:HOST:PORT`.
    public static func connect(to address: ListenAddress, configuration: RPCClientConfiguration = .init())
        async throws -> RPCClient
    {
        let fd: Int32 = try await withCheckedThrowingContinuation { continuation in
            // connect(2) blocks: do it on a short-lived thread, never on the cooperative pool.
            startThread(named: "rpc-connect") {
                do throws(JSONRPCError) {
                    continuation.resume(returning: try SocketAddress.connect(address))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
        return try await attach(readFD: fd, writeFD: fd, isSocket: true, configuration: configuration)
    }

    /// Connects to an address string (`unix:/path`, `tcp:127.0.0.1:7411`).
    public static func connect(to address: String, configuration: RPCClientConfiguration = .init())
        async throws -> RPCClient
    {
        try await connect(to: try ListenAddress(parsing: address), configuration: configuration)
    }

    /// Speaks over a pair of pipes, e.g. a spawned `offergate serve --stdio`: `readFD` is the child's stdout,
    /// `writeFD` its stdin. The client takes ownership of both descriptors (makes them non-blocking, closes them).
    public static func attach(readFD: Int32, writeFD: Int32, configuration: RPCClientConfiguration = .init())
        async throws -> RPCClient
    {
        SocketAddress.setNonBlocking(readFD)
        SocketAddress.setNonBlocking(writeFD)
        return try await attach(readFD: readFD, writeFD: writeFD, isSocket: false, configuration: configuration)
    }

    /// Speaks over two `FileHandle`s, e.g. `(process.standardOutput as! Pipe).fileHandleForReading` and
    /// `(process.standardInput as! Pipe).fileHandleForWriting`. The descriptors are duplicated, so the handles
    /// keep theirs (close the write handle yourself only after `close()`/`finishWriting()`).
    public static func attach(reading: FileHandle, writing: FileHandle, configuration: RPCClientConfiguration = .init())
        async throws -> RPCClient
    {
        let readFD = dup(reading.fileDescriptor)
        let writeFD = dup(writing.fileDescriptor)
        guard readFD >= 0, writeFD >= 0 else {
            if readFD >= 0 { Glibc.close(readFD) }
            if writeFD >= 0 { Glibc.close(writeFD) }
            throw SocketAddress.systemError("dup(2)")
        }
        SocketAddress.setCloseOnExec(readFD)
        SocketAddress.setCloseOnExec(writeFD)
        return try await attach(readFD: readFD, writeFD: writeFD, configuration: configuration)
    }

    /// Closes the connection when the last reference goes away.
    deinit {
        let loop = self.loop
        let id = self.channelID
        loop.execute {
            guard let channel = loop.channels[id] else { return }
            loop.closeChannel(channel, reason: .clientReleased)
        }
    }

    static func attach(readFD: Int32, writeFD: Int32, isSocket: Bool, configuration: RPCClientConfiguration)
        async throws -> RPCClient
    {
        guard let loop = EventLoop.shared else {
            Glibc.close(readFD)
            if writeFD != readFD { Glibc.close(writeFD) }
            throw JSONRPCError(.system, "client event loop unavailable")
        }
        let box = ClientBox()
        let id: UInt64 = await withCheckedContinuation { continuation in
            loop.execute {
                let connection = ClientConnection(box: box)
                let channel = loop.addChannel(
                    readFD: readFD, writeFD: writeFD, isSocket: isSocket, frameLimit: configuration.maxFrameBytes,
                    maxInFlight: Int.max, idleTimeout: nil, handler: connection)
                continuation.resume(returning: channel.id)
            }
        }
        let client = RPCClient(loop: loop, channelID: id, configuration: configuration)
        box.set(client)
        return client
    }

    /// Whether the connection is closed.
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Sets the handler for notifications the server sends (e.g. progress). Called on the client loop thread:
    /// keep it short.
    public func onNotification(_ handler: @escaping @Sendable (RPCRequest) -> Void) {
        state.withLock { $0.notificationHandler = handler }
    }

    /// Calls `method` and waits for its response. Throws `RPCError` for an error response, `JSONRPCError`
    /// (`.connectionClosed`) if the connection closes first, or `.timeout` after `timeout` (the late answer, if
    /// any, is then ignored). Deadlines are checked on the client loop's tick, four times a second, so a call times
    /// out up to 250 ms after `timeout`; no timer is armed per call.
    public func call(method: String, params: JSONValue? = nil, timeout: Duration) async throws -> JSONValue {
        try await call(method: method, params: params, deadline: Self.deadline(after: timeout))
    }

    /// A timer: `fire` runs after `delay` unless the returned task is cancelled first (which is how a caller says
    /// the answer came in time). It never throws, so no error of it can go unseen.
    static func timer(after delay: Duration, _ fire: @escaping @Sendable () -> Void) -> Task<Void, Never> {
        Task {
            do { try await Task.sleep(for: delay) } catch { return }
            fire()
        }
    }

    /// Calls `method` and waits for its response. Throws `RPCError` for an error response, `JSONRPCError`
    /// (`.connectionClosed`) if the connection closes first.
    public func call(method: String, params: JSONValue? = nil) async throws -> JSONValue {
        try await call(method: method, params: params, deadline: nil)
    }

    func call(method: String, params: JSONValue?, deadline: Double?) async throws -> JSONValue {
        try await withCheckedThrowingContinuation { continuation in
            if !enqueue(method: method, params: params, deadline: deadline, .task(continuation)) {
                continuation.resume(throwing: JSONRPCError(.connectionClosed, "connection is closed"))
            }
        }
    }

    /// Sends a call and hands its outcome to `onResponse` instead of suspending a task: the result, an `RPCError`,
    /// `.connectionClosed` or `.timeout` (checked as ``call(method:params:timeout:)`` does). `onResponse` runs on
    /// the client loop thread (keep it short; it may send the next call), or at once on the caller's thread when
    /// the connection is already closed. For load generators: no task switch per call.
    public func send(
        method: String, params: JSONValue? = nil, timeout: Duration? = nil,
        _ onResponse: @escaping @Sendable (Result<JSONValue, any Error>) -> Void
    ) {
        if !enqueue(method: method, params: params, deadline: timeout.map(Self.deadline), .callback(onResponse)) {
            onResponse(.failure(JSONRPCError(.connectionClosed, "connection is closed")))
        }
    }

    /// Like ``send(method:params:timeout:_:)``, but the result reaches `onResponse` as its bytes, checked as JSON
    /// syntax and not parsed (``RPCRawResult``): for a caller that looks at few results (a load generator reading
    /// hundreds of large answers a millisecond), the envelope's `id` and `error` are all that is read.
    public func sendForRawResult(
        method: String, params: JSONValue? = nil, timeout: Duration? = nil,
        _ onResponse: @escaping @Sendable (Result<RPCRawResult, any Error>) -> Void
    ) {
        if !enqueue(method: method, params: params, deadline: timeout.map(Self.deadline), .rawCallback(onResponse)) {
            onResponse(.failure(JSONRPCError(.connectionClosed, "connection is closed")))
        }
    }

    /// Runs `tick` on this client's event-loop thread (where its answers are handled) `nanoseconds` from now, then
    /// again each time after the delay it returns, until it returns nil. A timer of the loop itself (timerfd): calls
    /// sent from `tick` leave in the same turn of the loop, with no other thread, lock hand-over or wake-up per call.
    /// For a load generator's open loop. Throws `.system` when no timer could be made or the loop has stopped.
    public func onLoop(after nanoseconds: UInt64, _ tick: @escaping @Sendable () -> UInt64?) async throws(JSONRPCError)
    {
        let loop = self.loop
        let added: Bool = await withCheckedContinuation { continuation in
            if !loop.execute({ continuation.resume(returning: loop.addTimer(after: nanoseconds, tick)) }) {
                continuation.resume(returning: false)
            }
        }
        guard added else { throw JSONRPCError(.system, "the client loop could not start a timer") }
    }

    /// The loop clock's reading (``EventLoop/now()`` seconds) `timeout` from now: a call's deadline.
    static func deadline(after timeout: Duration) -> Double {
        EventLoop.now() + timeout / .seconds(1)
    }

    /// Registers a call and queues its line (the id is taken and the line queued under one lock, so lines leave in
    /// id order); false when the connection is closed.
    func enqueue(method: String, params: JSONValue?, deadline: Double?, _ waiter: Pending.Waiter) -> Bool {
        let call = Pending(waiter: waiter, deadline: deadline)
        let (queued, handOver) = state.withLock { s -> (Bool, Bool) in
            if s.closed { return (false, false) }
            let id = s.nextID
            s.nextID += 1
            s.add(call, id: id)
            Self.appendRequestLine(method: method, params: params, id: id, to: &s.outbox)
            return (true, s.takeFlushTurn())
        }
        if handOver { handOutboxToLoop() }
        return queued
    }

    /// Appends `{"jsonrpc":"2.0","method":…,"params":…,"id":N}` and a newline: the bytes of ``RPCRequest/json``
    /// serialized, written directly (no request object built per call).
    static func appendRequestLine(method: String, params: JSONValue?, id: Int64, to out: inout [UInt8]) {
        JSONSerializer.appendASCII(#"{"jsonrpc":"2.0","method":"#, to: &out)
        JSONSerializer.appendString(method, to: &out)
        if let params {
            JSONSerializer.appendASCII(#","params":"#, to: &out)
            JSONSerializer.append(params, to: &out)
        }
        JSONSerializer.appendASCII(#","id":"#, to: &out)
        JSONSerializer.appendInt(id, to: &out)
        JSONSerializer.appendASCII("}\n", to: &out)
    }

    /// Fails the calls whose deadline passed (loop thread, on its tick).
    func expireCalls(now: Double) {
        let expired = state.withLock { s -> [Pending] in
            guard s.timedCalls > 0 else { return [] }
            var expired: [Pending] = []
            for (id, call) in s.pending {
                guard let deadline = call.deadline, deadline <= now else { continue }
                s.pending.removeValue(forKey: id)
                s.timedCalls -= 1
                expired.append(call)
            }
            return expired
        }
        for call in expired { call.resume(.failure(JSONRPCError(.timeout, "no response within the call's timeout"))) }
    }

    /// Calls `method` with `Encodable` params and decodes the result.
    public func call<Params: Encodable, Result: Decodable>(
        method: String, params: Params, as type: Result.Type
    ) async throws -> Result {
        let value = try await call(method: method, params: try JSONValueEncoder().encode(params))
        return try JSONValueDecoder().decode(Result.self, from: value)
    }

    /// Sends a notification (no response expected).
    public func notify(method: String, params: JSONValue? = nil) throws {
        guard !isClosed else { throw JSONRPCError(.connectionClosed, "connection is closed") }
        var bytes = JSONSerializer.serialize(RPCRequest(method: method, params: params, id: nil).json)
        bytes.append(0x0A)
        send(bytes)
    }

    /// Sends bytes exactly as given (no newline added): for conformance tests.
    public func sendRaw(bytes: [UInt8]) throws {
        guard !isClosed else { throw JSONRPCError(.connectionClosed, "connection is closed") }
        send(bytes)
    }

    /// Sends one line: `line` plus `\n`.
    public func sendRaw(_ line: String) throws {
        try sendRaw(bytes: Array(line.utf8) + [0x0A])
    }

    /// The next incoming line that answered no pending call (without its newline); `nil` once the connection is
    /// closed and no lines are left. Throws `JSONRPCError(.protocolViolation, "timeout")` after `timeout`.
    public func nextRawLine(timeout: Duration = .seconds(10)) async throws -> [UInt8]? {
        let token = state.withLock { s -> UInt64 in
            let t = s.nextToken
            s.nextToken += 1
            return t
        }
        let timer = Self.timer(after: timeout) { [self] in
            let waiter = self.state.withLock { s -> CheckedContinuation<[UInt8]?, any Error>? in
                guard let index = s.rawWaiters.firstIndex(where: { $0.token == token }) else { return nil }
                return s.rawWaiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: JSONRPCError(.protocolViolation, "timeout waiting for a line"))
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            let immediate = state.withLock { s -> [UInt8]?? in
                if !s.rawLines.isEmpty { return .some(s.rawLines.removeFirst()) }
                if s.closed { return .some(nil) }
                s.rawWaiters.append((token, continuation))
                return nil
            }
            if let immediate { continuation.resume(returning: immediate) }
        }
    }

    /// Parses the next raw line as JSON.
    public func nextRawValue(timeout: Duration = .seconds(10)) async throws -> JSONValue? {
        guard let line = try await nextRawLine(timeout: timeout) else { return nil }
        return try JSONParsing.parse(line, maxDepth: configuration.maxNestingDepth)
    }

    /// Half-closes the write side after what was sent so far (socket: shutdown(SHUT_WR); pipe: closes the write
    /// end): the server sees EOF, finishes in-flight requests, answers them, and closes. Responses still arrive.
    public func finishWriting() {
        loop.execute { [loop, channelID] in
            guard let channel = loop.channels[channelID] else { return }
            loop.finishWriting(channel)
        }
    }

    /// Closes the connection; pending calls fail with `.connectionClosed`.
    public func close() {
        loop.execute { [loop, channelID] in
            guard let channel = loop.channels[channelID] else { return }
            loop.closeChannel(channel, reason: .closedByClient)
        }
    }

    /// Queues bytes behind what was sent before; they go out with the next hand-over to the loop.
    func send(_ bytes: [UInt8]) {
        state.withLock { $0.outbox.append(contentsOf: bytes) }
        scheduleFlush()
    }

    /// Queues one hand-over of the outbox to the loop, unless one is queued already.
    func scheduleFlush() {
        if state.withLock({ $0.takeFlushTurn() }) { handOutboxToLoop() }
    }

    /// Hands the outbox to the loop, which writes it (the caller took the turn: ``State/takeFlushTurn()``).
    private func handOutboxToLoop() {
        loop.execute { [self] in
            let bytes = self.state.withLock { s -> [UInt8] in
                s.flushScheduled = false
                var taken: [UInt8] = []
                swap(&taken, &s.outbox)
                s.outbox.reserveCapacity(min(taken.capacity, 65_536))
                return taken
            }
            if !bytes.isEmpty { self.loop.write(self.channelID, bytes) }
        }
    }

    // MARK: Loop thread

    func received(_ frame: [UInt8]) {
        // Most lines answer a call: read the envelope, parse only the result a waiter wants built.
        if let envelope = ResponseEnvelope.scan(
            frame, maxDepth: configuration.maxNestingDepth, checkingResult: configuration.checksUnreadResults),
            resolve(envelope, in: frame)
        {
            return
        }
        guard let value = try? JSONParsing.parse(frame, maxDepth: configuration.maxNestingDepth) else {
            deliverRaw(frame)
            return
        }
        switch value {
        case .object(let object) where object["method"] != nil:
            let handler = state.withLock { $0.notificationHandler }
            if let handler, case .success(let request) = RPCRequest.validate(value), request.isNotification {
                handler(request)
            } else {
                deliverRaw(frame)
            }
        case .object:
            if !resolve(value) { deliverRaw(frame) }
        case .array(let elements):
            var allMatched = !elements.isEmpty
            for element in elements where !resolve(element) { allMatched = false }
            if !allMatched { deliverRaw(frame) }
        default:
            deliverRaw(frame)
        }
    }

    func resolve(_ value: JSONValue) -> Bool {
        guard let response = RPCResponse(json: value), case .number(let number) = response.id,
            let id = number.int64
        else { return false }
        guard let call = state.withLock({ $0.take(id) }) else { return false }
        switch response.result {
        case .success(let result): call.resume(.success(result))
        case .failure(let error): call.resume(.failure(error))
        }
        return true
    }

    /// Resolves the call `envelope` answers; false when none waits for it or its result does not parse (the line
    /// then takes the whole-line path, as every line did before envelopes were scanned).
    func resolve(_ envelope: ResponseEnvelope, in frame: [UInt8]) -> Bool {
        guard let call = state.withLock({ $0.take(envelope.id) }) else { return false }
        switch envelope.outcome {
        case .error(let error): call.resume(.failure(error))
        case .result(let range) where call.wantsRawResult:
            call.resume(raw: RPCRawResult(frame: frame, range: range))
        case .result(let range):
            // One level less: the envelope around it counted as one when the whole line was parsed.
            let depth = max(configuration.maxNestingDepth - 1, 1)
            guard let result = try? JSONParsing.parse(frame[range], maxDepth: depth) else {
                // Put it back: the whole-line path will not resolve it either, and it times out as before.
                state.withLock { $0.add(call, id: envelope.id) }
                return false
            }
            call.resume(.success(result))
        }
        return true
    }

    func deliverRaw(_ line: [UInt8]) {
        let waiter = state.withLock { s -> CheckedContinuation<[UInt8]?, any Error>? in
            if !s.rawWaiters.isEmpty { return s.rawWaiters.removeFirst().continuation }
            s.rawLines.append(line)
            return nil
        }
        waiter?.resume(returning: line)
    }

    func closed() {
        let (pending, waiters) = state.withLock { s in
            s.closed = true
            defer {
                s.pending = [:]
                s.timedCalls = 0
                s.rawWaiters = []
                s.outbox = []
            }
            return (s.pending, s.rawWaiters)
        }
        for (_, call) in pending {
            call.resume(.failure(JSONRPCError(.connectionClosed, "connection closed before the response")))
        }
        for waiter in waiters { waiter.continuation.resume(returning: nil) }
    }
}

/// Points the loop-side handler at its client (weakly, so dropping the last reference closes the connection).
final class ClientBox: Sendable {
    struct Ref {
        weak var client: RPCClient?
        var closedEarly = false
    }

    let state = Mutex(Ref())

    func set(_ client: RPCClient) {
        let closedEarly = state.withLock { s -> Bool in
            s.client = client
            return s.closedEarly
        }
        if closedEarly { client.closed() }
    }

    var client: RPCClient? { state.withLock { $0.client } }

    func markClosed() -> RPCClient? {
        state.withLock { s in
            if s.client == nil { s.closedEarly = true }
            return s.client
        }
    }
}

/// The loop-side owner of a client connection.
final class ClientConnection: ChannelHandler {
    let box: ClientBox
    init(box: ClientBox) { self.box = box }

    func channelFrame(_ frame: [UInt8], channel: Channel) -> Bool {
        // The client is set before any request is sent, so a missing client means a line nobody asked for.
        box.client?.received(frame)
        return false
    }

    func channelFrameTooLarge(channel: Channel) {}

    func channelClosed(channel: Channel, reason: ChannelCloseReason) {
        box.markClosed()?.closed()
    }

    func channelTick(now: Double, channel: Channel) {
        box.client?.expireCalls(now: now)
    }
}

/// A call's `result` as it arrived: the bytes of one JSON value, checked for syntax (escapes, UTF-8, nesting) but not
/// built, and not yet checked for duplicate keys, which ``value(maxDepth:)`` rejects as every parse does. With
/// ``RPCClientConfiguration/checksUnreadResults`` false, not checked at all until ``value(maxDepth:)``.
public struct RPCRawResult: Sendable {
    let frame: [UInt8]
    let range: Range<Int>

    init(frame: [UInt8], range: Range<Int>) {
        self.frame = frame
        self.range = range
    }

    init(frame: [UInt8]) { self.init(frame: frame, range: frame.indices) }

    /// The result's JSON text.
    public var bytes: ArraySlice<UInt8> { frame[range] }

    /// The result, parsed.
    public func value(maxDepth: Int = JSONParsing.defaultMaxDepth) throws(JSONRPCError) -> JSONValue {
        try JSONParsing.parse(frame[range], maxDepth: maxDepth)
    }

    /// The result with only the members named in `names` parsed, when it is an object (the others are stepped over
    /// and checked, not built); otherwise the whole result, parsed. For a caller that reads a few fields of a large
    /// result: a load generator reading an `offers.sign` answer's JWS builds one string, not the whole object.
    public func value(keeping names: Set<String>, maxDepth: Int = JSONParsing.defaultMaxDepth)
        throws(JSONRPCError) -> JSONValue
    {
        let depth = JSONParsing.depthLimit(maxDepth)
        let kept = frame.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONRPCError) -> JSONObject? in
                var parser = JSONParser(buffer: UnsafeBufferPointer(rebasing: buffer[range]), maxDepth: depth)
                return try parser.parseObjectKeeping(names)
            }
        }
        if let object = try kept.get() { return .object(object) }
        return try value(maxDepth: maxDepth)
    }
}

extension RPCRawResult {
    /// A whole JSON-RPC response with an integer id, read as a client of many answers needs it (e.g. one that came as
    /// an HTTP body): its error, or its result located and not built (`checkingResult` false: not checked either,
    /// until read). Nil when `frame` is not such a response.
    public static func response(
        _ frame: [UInt8], maxDepth: Int = JSONParsing.defaultMaxDepth, checkingResult: Bool = true
    ) -> Result<RPCRawResult, RPCError>? {
        guard let envelope = ResponseEnvelope.scan(frame, maxDepth: maxDepth, checkingResult: checkingResult) else {
            return nil
        }
        switch envelope.outcome {
        case .error(let error): return .failure(error)
        case .result(let range): return .success(RPCRawResult(frame: frame, range: range))
        }
    }
}
