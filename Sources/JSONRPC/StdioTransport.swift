// The stdio transport: a reader thread (read(2)) and a writer thread (write(2)), never the cooperative pool.
import Foundation
import Synchronization
import Threads

#if canImport(Glibc)
    import Glibc
#endif

/// A queue of outgoing frames drained by a dedicated thread with blocking `write(2)`.
final class BlockingWriter: Sendable {
    struct State {
        var queue: [UInt8] = []
        var closing = false
        var failed = false
        var exited = false
        var callbacks: [@Sendable () -> Void] = []
    }

    let fd: Int32
    let state = Mutex(State())
    let signal = DispatchSemaphore(value: 0)

    init(fd: Int32, name: String) {
        self.fd = fd
        startThread(named: name) { [self] in self.run() }
    }

    /// Buffers above this capacity are not kept for reuse once written (one huge answer must not pin its memory).
    static var keptCapacityLimit: Int { 1 << 20 }

    /// Empties a buffer for reuse, keeping its capacity unless it is above `keptCapacityLimit`.
    static func recycle(_ buffer: inout [UInt8]) {
        if buffer.capacity > keptCapacityLimit { buffer = [] } else { buffer.removeAll(keepingCapacity: true) }
    }

    func enqueue(_ bytes: [UInt8]) {
        var bytes = bytes
        if push(&bytes) { signal.signal() }
    }

    /// Enqueues `bytes` and leaves it empty. When nothing is queued, the buffers are swapped instead of copied, so
    /// `bytes` comes back with the capacity of a buffer the thread already wrote: a caller that hands over the same
    /// buffer again and again (the stdio reader's held answers) neither copies nor allocates per hand-over.
    func enqueue(taking bytes: inout [UInt8]) {
        let wasEmpty = push(&bytes)
        Self.recycle(&bytes)
        if wasEmpty { signal.signal() }
    }

    /// Queues `bytes` (by swap into an empty queue, else appended); whether the queue was empty, so the thread must
    /// be woken. Dropped after `finish` or a failed write.
    private func push(_ bytes: inout [UInt8]) -> Bool {
        state.withLock { s -> Bool in
            if s.failed || s.closing { return false }
            if s.queue.isEmpty {
                swap(&s.queue, &bytes)
                return true
            }
            s.queue.append(contentsOf: bytes)
            return false
        }
    }

    /// Flushes what is queued, stops the thread, then calls `callback` (at once if it already stopped).
    /// Frames enqueued after this are dropped. May be called more than once.
    func finish(then callback: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { s -> Bool in
            if s.exited { return true }
            s.closing = true
            s.callbacks.append(callback)
            return false
        }
        if runNow { callback() } else { signal.signal() }
    }

    func run() {
        // The buffer written last goes back as the queue's next one (its capacity kept), so a steady stream of
        // hand-overs cycles the same few buffers instead of allocating (and page-faulting) a new one each time.
        var chunk: [UInt8] = []
        while true {
            signal.wait()
            while true {
                Self.recycle(&chunk)
                let closing = state.withLock { s -> Bool in
                    swap(&chunk, &s.queue)
                    return s.closing
                }
                if chunk.isEmpty {
                    if closing {
                        let callbacks = state.withLock { s -> [@Sendable () -> Void] in
                            s.exited = true
                            defer { s.callbacks = [] }
                            return s.callbacks
                        }
                        for callback in callbacks { callback() }
                        return
                    }
                    break
                }
                if !writeAll(chunk) {
                    state.withLock { $0.failed = true }
                }
            }
        }
    }

    func writeAll(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw in Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset) }
            if n > 0 {
                offset += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }
}

/// One stdio connection: its dispatcher (the one owner of its requests in flight), its writer, and how it ends.
///
/// At EOF the reader stops and the connection ends once every request already read was answered and written. A
/// server shutdown first stops the reading (`stopReading`), then waits, bounded, for the answers, then `end`s it:
/// requests still running are then cancelled.
final class StdioConnection<Handler: RPCHandler>: Sendable {
    let info: ConnectionInfo
    let dispatcher: ConnectionDispatcher<Handler>
    let writer: BlockingWriter
    let logger: RPCLogHandler?
    let stopped = Atomic<Bool>(false)
    /// `end` was called; it finished; `serveStdio` waits for that.
    let ending = Mutex<(started: Bool, finished: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, false, nil))

    init(
        info: ConnectionInfo, dispatcher: ConnectionDispatcher<Handler>, writer: BlockingWriter,
        logger: RPCLogHandler?
    ) {
        self.info = info
        self.dispatcher = dispatcher
        self.writer = writer
        self.logger = logger
    }

    /// Answers held back for one hand-over to the writer at most (bytes).
    static var heldAnswersLimit: Int { 65_536 }

    /// Whether shutdown stopped the reading (frames read after that are dropped).
    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    func stopReading() { stopped.store(true, ordering: .releasing) }

    /// Flushes what is written, closes the session (cancelling what still runs), logs, and resumes `serveStdio`.
    /// Only the first call counts.
    func end(reason: String) {
        let first = ending.withLock { state -> Bool in
            if state.started { return false }
            state.started = true
            return true
        }
        guard first else { return }
        writer.finish { [self] in
            self.dispatcher.closed()
            self.logger?(.closed(self.info, reason: reason))
            self.ending.withLock { state in
                state.finished = true
                defer { state.waiter = nil }
                return state.waiter
            }?.resume()
        }
    }

    /// Waits until `end` has finished.
    func waitUntilEnded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = ending.withLock { state -> Bool in
                if state.finished { return true }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// The reader thread's loop: read, frame, dispatch (blocking at the in-flight cap), until EOF or shutdown.
    ///
    /// The answers given at once to the requests of one read leave together, as a socket's do (one hand-over to
    /// the writer and one wake-up of its thread, not one per answer); they are handed over early when they reach
    /// `heldAnswersLimit` bytes, and before the reader blocks at the in-flight cap.
    func read(from input: Int32, frameLimit: Int, maxInFlight: Int) {
        var framer = LineFramer(limit: frameLimit)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var held: [UInt8] = []
        func handOver() {
            guard !held.isEmpty else { return }
            writer.enqueue(taking: &held)
        }
        reading: while !isStopped {
            let n = buffer.withUnsafeMutableBytes { raw in Glibc.read(input, raw.baseAddress, raw.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            buffer.withUnsafeBytes { raw in framer.append(UnsafeRawBufferPointer(rebasing: raw[0..<n])) }
            while let event = framer.next() {
                switch event {
                case .frame(let bytes):
                    if isStopped { break reading }
                    let dispatched = dispatcher.dispatch(bytes, blockingAt: maxInFlight, beforeWaiting: handOver)
                    if case .answered(let answer?) = dispatched {
                        answer.appendFrame(to: &held)
                        if held.count >= Self.heldAnswersLimit { handOver() }
                    }
                case .tooLarge:
                    if isStopped { break reading }
                    handOver()
                    let response = RPCResponse(id: .null, result: .failure(.frameTooLarge(limit: frameLimit)))
                    writer.enqueue(RPCExchange.frame(response))
                    logger?(.frameTooLarge(info))
                }
            }
            handOver()
        }
        handOver()
        // EOF is not a disconnect: answer everything already read, then end. (After `stopReading`, shutdown ends it.)
        if !isStopped { dispatcher.whenIdle { [self] in self.end(reason: "eof") } }
    }
}

extension RPCServer {
    /// Serves one connection over a pair of file descriptors (default stdin/stdout) with the same framing.
    ///
    /// Reads on a dedicated thread with `read(2)` (very long lines are discarded per the frame limit), writes on
    /// another; at EOF it finishes in-flight requests, flushes, and returns. `shutdown` also ends it: reading stops,
    /// in-flight requests get up to the grace period, then the ones still running are cancelled. The descriptors
    /// are not closed.
    public func serveStdio(input: Int32 = STDIN_FILENO, output: Int32 = STDOUT_FILENO) async {
        signal(SIGPIPE, SIG_IGN)
        let info = ConnectionInfo(id: ConnectionIDs.next(), transport: .stdio, listenAddress: nil, peer: nil)
        let writer = BlockingWriter(fd: output, name: "jsonrpc-stdio-writer")
        let dispatcher = ConnectionDispatcher(
            handler: handler, info: info, maxDepth: configuration.maxNestingDepth,
            sendFrame: { writer.enqueue($0) },
            complete: { bytes in if let bytes { writer.enqueue(bytes) } })
        let connection = StdioConnection(
            info: info, dispatcher: dispatcher, writer: writer, logger: configuration.logger)
        let registered = lifecycle.withLock { state -> Bool in
            if state.finished { return false }
            if state.shuttingDown { connection.stopReading() }
            state.stdio[info.id] = connection
            return true
        }
        guard registered else {
            connection.end(reason: "shutdown")
            await connection.waitUntilEnded()
            return
        }
        let (frameLimit, maxInFlight) = (configuration.maxFrameBytes, configuration.maxInFlightPerConnection)
        startThread(named: "jsonrpc-stdio-reader") {
            connection.read(from: input, frameLimit: frameLimit, maxInFlight: maxInFlight)
        }
        await connection.waitUntilEnded()
        lifecycle.withLock { _ = $0.stdio.removeValue(forKey: info.id) }
    }
}
