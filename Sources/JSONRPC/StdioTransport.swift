// The stdio transport: a reader thread (read(2)) and a writer thread (write(2)), never the cooperative pool.
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A queue of outgoing frames drained by a dedicated thread with blocking `write(2)`.
/// Bounds the requests in flight on the stdio connection (back-pressure: the reader stops reading). The reader stops
/// at `limit` and resumes once half of those completed, so a full pipeline costs one wake-up per batch of completions
/// instead of a semaphore round trip per request (which was a tenth of B8's CPU).
final class InFlightGate: Sendable {
    private let limit: Int
    private let resumeAt: Int
    private let count = Atomic<Int>(0)
    private let waiting = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)

    init(limit: Int) {
        self.limit = max(1, limit)
        self.resumeAt = self.limit / 2
    }

    /// Blocks the (one) reader thread while `limit` requests are in flight, then counts one more.
    func enter() {
        while count.load(ordering: .sequentiallyConsistent) >= limit {
            // Announce the wait, then look again: a completion that lands in between either is seen here or sees
            // the announcement and wakes us. A stale wake-up only makes this loop look once more.
            waiting.store(true, ordering: .sequentiallyConsistent)
            if count.load(ordering: .sequentiallyConsistent) >= limit { wake.wait() }
        }
        count.add(1, ordering: .sequentiallyConsistent)
    }

    /// One request completed.
    func leave() {
        let now = count.subtract(1, ordering: .sequentiallyConsistent).newValue
        if now <= resumeAt, waiting.exchange(false, ordering: .sequentiallyConsistent) { wake.signal() }
    }

    var inFlight: Int { count.load(ordering: .relaxed) }
}

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
        let thread = Thread { [self] in self.run() }
        thread.name = name
        thread.start()
    }

    func enqueue(_ bytes: [UInt8]) {
        let wasEmpty = state.withLock { s -> Bool in
            if s.failed || s.closing { return false }
            let empty = s.queue.isEmpty
            s.queue.append(contentsOf: bytes)
            return empty
        }
        if wasEmpty { signal.signal() }
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
        while true {
            signal.wait()
            while true {
                let (chunk, closing) = state.withLock { s -> ([UInt8], Bool) in
                    let chunk = s.queue
                    s.queue = []
                    return (chunk, s.closing)
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

extension RPCServer {
    /// Serves one connection over a pair of file descriptors (default stdin/stdout) with the same framing.
    ///
    /// Reads on a dedicated thread with `read(2)` (very long lines are discarded per the frame limit), writes on
    /// another; at EOF it finishes in-flight requests, flushes, and returns. `shutdown` also ends it (in-flight
    /// requests get up to the grace period). The descriptors are not closed.
    public func serveStdio(input: Int32 = STDIN_FILENO, output: Int32 = STDOUT_FILENO) async {
        signal(SIGPIPE, SIG_IGN)
        let info = ConnectionInfo(id: ConnectionIDs.next(), transport: .stdio, listenAddress: nil, peer: nil)
        let writer = BlockingWriter(fd: output, name: "jsonrpc-stdio-writer")
        let slots = InFlightGate(limit: configuration.maxInFlightPerConnection)
        let group = DispatchGroup()
        let stopping = Atomic<Bool>(false)
        let dispatcher = ConnectionDispatcher(
            handler: handler, info: info, maxDepth: configuration.maxNestingDepth,
            sendFrame: { writer.enqueue($0) },
            complete: { bytes in
                if let bytes { writer.enqueue(bytes) }
                self.stdioInFlight.subtract(1, ordering: .relaxed)
                slots.leave()
                group.leave()
            })
        let limit = configuration.maxFrameBytes
        let logger = configuration.logger
        let finishedOnce = Atomic<Bool>(false)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let finish: @Sendable () -> Void = {
                guard !finishedOnce.exchange(true, ordering: .acquiringAndReleasing) else { return }
                continuation.resume()
            }
            let alreadyStopped = lifecycle.withLock { state -> Bool in
                if state.finished { return true }
                state.stdioStops.append {
                    stopping.store(true, ordering: .relaxed)
                    writer.finish(then: finish)
                }
                return false
            }
            if alreadyStopped {
                finish()
                return
            }
            let reader = Thread {
                var framer = LineFramer(limit: limit)
                var buffer = [UInt8](repeating: 0, count: 65_536)
                reading: while !stopping.load(ordering: .relaxed) {
                    let n = buffer.withUnsafeMutableBytes { raw in read(input, raw.baseAddress, raw.count) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    buffer.withUnsafeBytes { raw in framer.append(UnsafeRawBufferPointer(rebasing: raw[0..<n])) }
                    while let event = framer.next() {
                        if stopping.load(ordering: .relaxed) { break reading }
                        switch event {
                        case .frame(let bytes):
                            slots.enter()
                            group.enter()
                            self.stdioInFlight.add(1, ordering: .relaxed)
                            dispatcher.dispatch(bytes)
                        case .tooLarge:
                            let response = RPCResponse(id: .null, result: .failure(.frameTooLarge(limit: limit)))
                            writer.enqueue(ConnectionDispatcher<Handler>.frame(response))
                            logger?(.frameTooLarge(info))
                        }
                    }
                }
                group.wait()
                writer.finish {
                    dispatcher.closed()
                    logger?(.closed(info, reason: stopping.load(ordering: .relaxed) ? "shutdown" : "eof"))
                    finish()
                }
            }
            reader.name = "jsonrpc-stdio-reader"
            reader.start()
        }
    }
}
