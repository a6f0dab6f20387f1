// The lifecycle of one event-loop channel as a pure state machine: no IO, no clock.

/// Why a channel closed: the `reason` of `RPCLogEvent.closed` (its raw value).
enum ChannelCloseReason: String, Sendable, Hashable {
    /// The peer went away: EOF with nothing left to answer or write, a hang-up, or a reset seen as one.
    case peerClosed = "peer_closed"
    case readError = "read_error"
    case writeError = "write_error"
    /// A drain (server shutdown) finished: everything in flight was answered and written.
    case drained
    case idleTimeout = "idle_timeout"
    /// The event loop stopped with the channel still open (shutdown past its grace period).
    case loopStopped = "loop_stopped"
    /// `RPCClient.close()`.
    case closedByClient = "closed_by_client"
    /// The last reference to an `RPCClient` went away.
    case clientReleased = "client_released"
}

/// One channel's lifecycle: reading and frame delivery under an in-flight cap, output back-pressure, the peer's
/// EOF (half-close), drain, write shutdown, idle timeout, errors and close.
///
/// The event loop reports what happened and performs the `Action` it gets back; it asks `wantsRead`, `wantsWrite`
/// and `canDeliverFrame` for its epoll interest and to pace delivery. Time comes in as arguments, so every
/// transition is unit-tested without sockets (`ChannelStateMachineTests`).
///
///     active(input: .open, output: .open)
///       inputEnded           → input .peerClosed: deliver and answer what was read, then close(.peerClosed)
///       drainRequested       → input .draining: start nothing new, answer what runs, then close(.drained)
///       finishWritingRequested → output .shutdownWhenFlushed → (all written) .shutdown
///       hangUp, readFailed, writeFailed, idleCheck (idle), closeRequested → closed(reason)
///
/// Invariants: `pendingOutput` is the loop's count of queued, unwritten bytes; nothing is queued once the output is
/// shut down; a channel closes "when done" only between deliveries, with nothing in flight and nothing unwritten.
struct ChannelStateMachine {
    /// The read side.
    enum Input: Hashable {
        /// Reading and delivering frames (reading pauses at the in-flight cap and under output back-pressure).
        case open
        /// The peer sent EOF (it may be a half-close): frames already read are still delivered and answered.
        case peerClosed
        /// Shutdown drains the channel: nothing more is read or started; what runs is answered.
        case draining
    }

    /// The write side.
    enum Output: Hashable {
        case open
        /// Half-close once everything queued is written.
        case shutdownWhenFlushed
        /// Half-closed: nothing more is written.
        case shutdown
    }

    enum State: Hashable {
        case active(input: Input, output: Output)
        case closed(ChannelCloseReason)
    }

    /// What the loop does next.
    enum Action: Hashable {
        case none
        /// Hand buffered frames to the handler while `canDeliverFrame`, report each one that awaits a completion
        /// with `frameStarted()`, then report `deliveryStopped()` and perform what that returns.
        case deliverFrames
        /// Half-close the write side (socket: `shutdown(SHUT_WR)`; pipe pair: close the write end).
        case shutdownWrite
        /// Close the channel's descriptors and tell its handler, with this reason.
        case close(ChannelCloseReason)
    }

    struct Limits: Hashable {
        /// Frames in flight (delivered, not yet completed) before delivery and reading pause.
        var maxInFlight: Int
        /// Reading pauses once this many bytes are queued and unwritten...
        var highWater: Int = 4 << 20
        /// ...and resumes once they are down to this many.
        var lowWater: Int = 2 << 20
        /// Close after this many seconds without traffic while nothing is in flight or unwritten (`nil`: never).
        var idleTimeout: Double? = nil
    }

    let limits: Limits
    private(set) var state: State = .active(input: .open, output: .open)
    /// Frames delivered that await `frameCompleted()`.
    private(set) var inFlight = 0
    /// Bytes queued and not yet written.
    private(set) var pendingOutput = 0
    /// Reading is paused because `pendingOutput` reached the high water mark (until it is down to the low one).
    private(set) var outputBackPressure = false
    /// When bytes were last read or written.
    private(set) var lastActivity: Double
    /// Between `.deliverFrames` and `deliveryStopped()`: more frames may start, so the channel is not done yet.
    private(set) var delivering = false

    init(limits: Limits, now: Double) {
        var limits = limits
        limits.maxInFlight = max(1, limits.maxInFlight)
        limits.lowWater = min(max(0, limits.lowWater), limits.highWater)
        self.limits = limits
        self.lastActivity = now
    }

    // MARK: Questions the loop asks

    var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    /// Poll for readability: the input is open, under the in-flight cap and not held back by unwritten output.
    var wantsRead: Bool {
        guard case .active(.open, _) = state else { return false }
        return inFlight < limits.maxInFlight && !outputBackPressure
    }

    /// Poll for writability: bytes are queued and the output is not shut down.
    var wantsWrite: Bool {
        guard case .active(_, let output) = state, output != .shutdown else { return false }
        return pendingOutput > 0
    }

    /// Whether bytes may be queued (after a write shutdown they could never leave, so they are dropped).
    var acceptsOutput: Bool {
        guard case .active(_, let output) = state else { return false }
        return output != .shutdown
    }

    /// Whether one more buffered frame may be handed to the handler now (frames read before the peer's EOF are
    /// still delivered; a draining channel starts nothing new).
    var canDeliverFrame: Bool {
        guard case .active(let input, _) = state, input != .draining else { return false }
        return inFlight < limits.maxInFlight
    }

    // MARK: Input events

    /// `read` returned bytes (already fed to the framer).
    mutating func bytesRead(now: Double) -> Action {
        guard !isClosed else { return .none }
        lastActivity = now
        return startDelivery()
    }

    /// `read` returned 0: the peer closed its side (or half-closed it; the two look the same on TCP).
    mutating func inputEnded() -> Action {
        guard case .active(let input, let output) = state else { return .none }
        if input == .open { state = .active(input: .peerClosed, output: output) }
        return startDelivery()
    }

    /// A delivered frame awaits a completion: it counts against the in-flight cap until `frameCompleted()`.
    mutating func frameStarted() {
        guard !isClosed else { return }
        inFlight += 1
    }

    /// The loop stopped handing frames over (none left, the cap reached, or the channel closed meanwhile).
    mutating func deliveryStopped() -> Action {
        delivering = false
        return closeIfDone()
    }

    /// A frame in flight finished (its response, if any, was queued first).
    mutating func frameCompleted() -> Action {
        guard !isClosed else { return .none }
        assert(inFlight > 0, "frameCompleted() without frameStarted()")
        inFlight = max(0, inFlight - 1)
        return startDelivery()
    }

    // MARK: Output events

    /// `count` bytes were queued for writing (report this before trying to write them).
    mutating func outputQueued(_ count: Int) {
        guard acceptsOutput else { return }
        pendingOutput += count
        if pendingOutput >= limits.highWater { outputBackPressure = true }
    }

    /// `count` queued bytes were written; `pendingOutput` reaching 0 is the "flushed" event.
    mutating func outputWritten(_ count: Int, now: Double) -> Action {
        guard case .active(let input, let output) = state else { return .none }
        assert(count <= pendingOutput, "outputWritten(\(count)) with \(pendingOutput) queued")
        if count > 0 { lastActivity = now }
        pendingOutput = max(0, pendingOutput - count)
        if outputBackPressure && pendingOutput <= limits.lowWater { outputBackPressure = false }
        guard pendingOutput == 0 else { return .none }
        if output == .shutdownWhenFlushed {
            state = .active(input: input, output: .shutdown)
            let close = closeIfDone()
            return close == .none ? .shutdownWrite : close
        }
        return closeIfDone()
    }

    /// Our side will write nothing more (`RPCClient.finishWriting`): half-close now, or once the queue is written.
    mutating func finishWritingRequested() -> Action {
        guard case .active(let input, .open) = state else { return .none }
        if pendingOutput > 0 {
            state = .active(input: input, output: .shutdownWhenFlushed)
            return .none
        }
        state = .active(input: input, output: .shutdown)
        return .shutdownWrite
    }

    // MARK: Lifecycle events

    /// Shutdown: stop reading and starting frames (buffered ones are dropped); close once what runs is written.
    mutating func drainRequested() -> Action {
        guard case .active(_, let output) = state else { return .none }
        state = .active(input: .draining, output: output)
        return closeIfDone()
    }

    /// The loop's periodic tick.
    mutating func idleCheck(now: Double) -> Action {
        guard !isClosed, let timeout = limits.idleTimeout, inFlight == 0, pendingOutput == 0,
            now - lastActivity >= timeout
        else { return .none }
        return close(.idleTimeout)
    }

    /// EPOLLHUP/EPOLLERR while not reading (or on a pipe's write end): the peer is gone, whatever is in flight.
    mutating func hangUp() -> Action { close(.peerClosed) }

    mutating func readFailed() -> Action { close(.readError) }

    mutating func writeFailed() -> Action { close(.writeError) }

    /// Our side closes now (client close or release, the loop stopping).
    mutating func closeRequested(_ reason: ChannelCloseReason) -> Action { close(reason) }

    // MARK: Transitions

    private mutating func startDelivery() -> Action {
        guard canDeliverFrame else { return closeIfDone() }
        delivering = true
        return .deliverFrames
    }

    /// Closes a channel whose input ended (EOF or drain) once nothing is in flight or unwritten.
    private mutating func closeIfDone() -> Action {
        guard case .active(let input, _) = state, input != .open, !delivering, inFlight == 0, pendingOutput == 0
        else { return .none }
        return close(input == .draining ? .drained : .peerClosed)
    }

    private mutating func close(_ reason: ChannelCloseReason) -> Action {
        guard !isClosed else { return .none }
        state = .closed(reason)
        delivering = false
        return .close(reason)
    }
}
