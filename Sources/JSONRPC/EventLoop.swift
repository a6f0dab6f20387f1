// A single-threaded epoll event loop for non-blocking sockets and pipes.
import CEpoll
import Foundation
import Synchronization
import Threads

#if canImport(Glibc)
    import Glibc
#endif

/// Loop-thread callbacks of a channel's owner. Called only on the loop thread.
protocol ChannelHandler: AnyObject {
    /// A complete frame arrived. Return `true` if a completion will follow via `EventLoop.complete` (the frame
    /// then counts against the channel's in-flight cap), `false` if it was fully handled.
    func channelFrame(_ frame: [UInt8], channel: Channel) -> Bool
    /// A line exceeded the frame limit (its bytes are discarded).
    func channelFrameTooLarge(channel: Channel)
    /// The channel was closed. Called exactly once.
    func channelClosed(channel: Channel, reason: ChannelCloseReason)
    /// The loop's periodic tick (four times a second), e.g. for a client's call deadlines.
    func channelTick(now: Double, channel: Channel)
}

extension ChannelHandler {
    func channelTick(now: Double, channel: Channel) {}
}

/// One connection (a socket, or a read/write pipe pair) owned by the loop thread: its descriptors and buffers.
/// Its lifecycle (reading, back-pressure, half-close, drain, idle, close) is `machine`.
final class Channel {
    let id: UInt64
    let readFD: Int32
    /// The socket again, or a pipe pair's write end; -1 once that end was closed by a write shutdown.
    private(set) var writeFD: Int32
    let isSocket: Bool
    var framer: LineFramer
    var machine: ChannelStateMachine
    var handler: (any ChannelHandler)?
    /// Queued output: `out[outOffset...]` is unwritten (`machine.pendingOutput` bytes).
    var out: [UInt8] = []
    /// Set while the loop hands this channel's frames to its handler: answers given at once are queued and written
    /// together afterwards (one `send` for a pipeline's worth of answers, not one each).
    var corked = false
    var outOffset = 0
    /// The epoll interest last registered (socket: read and write bits of one registration).
    var readInterest: UInt32 = 0
    var writeInterest: UInt32 = 0

    init(
        id: UInt64, readFD: Int32, writeFD: Int32, isSocket: Bool, frameLimit: Int, limits: ChannelStateMachine.Limits,
        now: Double
    ) {
        self.id = id
        self.readFD = readFD
        self.writeFD = writeFD
        self.isSocket = isSocket
        self.framer = LineFramer(limit: frameLimit)
        self.machine = ChannelStateMachine(limits: limits, now: now)
    }

    var pendingOut: Int { out.count - outOffset }
    /// A pipe pair's write end, registered with epoll apart from the read end (while it is open).
    var hasSeparateWriteFD: Bool { writeFD >= 0 && writeFD != readFD }

    func writeEndClosed() { writeFD = -1 }
}

/// The loop. Invariant for `@unchecked Sendable`: it owns the epoll fd and the wake pipe; `channels`, `listeners`
/// and every `Channel` are touched only on the loop thread. Other threads talk to it only through `execute`,
/// whose inbox is guarded by a `Mutex`.
final class EventLoop: @unchecked Sendable {
    struct Inbox {
        var work: [@Sendable () -> Void] = []
        var wakePending = false
        /// The loop has exited: further work is dropped (e.g. responses of requests that outlived shutdown).
        var closed = false
    }

    final class Listener {
        let id: UInt64
        let fd: Int32
        let address: ListenAddress
        let accept: (Int32) -> Void
        var onError: ((String) -> Void)?
        init(id: UInt64, fd: Int32, address: ListenAddress, accept: @escaping (Int32) -> Void) {
            self.id = id
            self.fd = fd
            self.address = address
            self.accept = accept
        }
    }

    /// A timer on the loop thread (``addTimer(after:_:)``): its timerfd and what runs when it expires.
    final class Timer {
        let id: UInt64
        let fd: Int32
        let fire: () -> UInt64?
        init(id: UInt64, fd: Int32, fire: @escaping () -> UInt64?) {
            self.id = id
            self.fd = fd
            self.fire = fire
        }
    }

    let epfd: Int32
    let wakeRead: Int32
    let wakeWrite: Int32
    let inbox = Mutex(Inbox())
    let started = Atomic<Bool>(false)
    /// The loop thread's pthread id, once it runs (0 before).
    let loopThread = Atomic<UInt>(0)
    let threadName: String

    // Loop-thread state.
    var channels: [UInt64: Channel] = [:]
    var listeners: [UInt64: Listener] = [:]
    var timers: [UInt64: Timer] = [:]
    var pausedListeners: [UInt64] = []
    var nextID: UInt64 = 1
    var running = true
    var onExit: [() -> Void] = []
    var scratch = [UInt8](repeating: 0, count: 65_536)

    /// The loop used by clients in this process.
    static let shared: EventLoop? = {
        let loop = try? EventLoop(name: "rpc-client-loop")
        loop?.start()
        return loop
    }()

    /// `name` names the loop thread in `top -H`, `perf` and /proc: at most 15 bytes, Linux's limit (a longer name is
    /// refused, and the thread keeps its creator's).
    init(name: String) throws(JSONRPCError) {
        precondition(name.utf8.count <= 15, "a thread name is at most 15 bytes on Linux")
        threadName = name
        let fd = Epoll.create()
        guard fd >= 0 else { throw SocketAddress.systemError("epoll_create1(2)") }
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            close(fd)
            throw SocketAddress.systemError("pipe(2)")
        }
        epfd = fd
        wakeRead = fds[0]
        wakeWrite = fds[1]
        for f in fds {
            SocketAddress.setNonBlocking(f)
            SocketAddress.setCloseOnExec(f)
        }
        ctl(Epoll.ctlAdd, wakeRead, events: Epoll.readable, data: 0)
    }

    /// Starts the loop thread (once).
    func start() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        signal(SIGPIPE, SIG_IGN)
        startThread(named: threadName, stackSize: 1 << 20) { [self] in self.run() }
    }

    /// Runs `work` on the loop thread, soon. From the loop thread itself no wake-up is needed: the inbox is run
    /// after the events at hand (e.g. a client's next request, queued while it handles an answer, leaves in the
    /// same write as the others of that turn). Returns false, and drops `work`, once the loop has stopped.
    @discardableResult
    func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        let onLoop = pthread_equal(pthread_self(), loopThread.load(ordering: .relaxed)) != 0
        let (queued, wake) = inbox.withLock { inbox -> (Bool, Bool) in
            if inbox.closed { return (false, false) }
            inbox.work.append(work)
            if onLoop || inbox.wakePending { return (true, false) }
            inbox.wakePending = true
            return (true, true)
        }
        if wake {
            var byte: UInt8 = 1
            _ = Glibc.write(wakeWrite, &byte, 1)
        }
        return queued
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    @discardableResult
    func ctl(_ op: Int32, _ fd: Int32, events: UInt32, data: UInt64) -> Int32 {
        Epoll.ctl(epfd, op, fd, events: events, data: data)
    }

    // MARK: Loop thread

    func run() {
        loopThread.store(pthread_self(), ordering: .relaxed)
        let maxEvents = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: maxEvents)
        defer { events.deallocate() }
        var lastTick = EventLoop.now()
        while running {
            let n = epoll_wait(epfd, events, Int32(maxEvents), 250)
            if n < 0 && errno != EINTR { break }
            for i in 0..<max(Int(n), 0) {
                let flags = events[i].events
                let data = events[i].data.u64
                if data == 0 {
                    drainWakePipe()
                    continue
                }
                let id = data >> 1
                if let listener = listeners[id] {
                    acceptAll(listener)
                } else if let channel = channels[id] {
                    handle(channel, flags: flags, isWriteFD: data & 1 == 1)
                } else if let timer = timers[id] {
                    fire(timer)
                }
            }
            runInbox()
            let now = EventLoop.now()
            if now - lastTick >= 0.25 {
                lastTick = now
                idleScan(now: now)
                for id in pausedListeners {
                    if let listener = listeners[id] {
                        ctl(Epoll.ctlMod, listener.fd, events: Epoll.readable, data: id << 1)
                    }
                }
                pausedListeners.removeAll()
                runInbox()  // what the tick queued from this thread (no wake-up was sent for it)
            }
        }
        // What was queued before the loop closed still runs (e.g. a connection handed over by the accepting loop
        // is registered, then closed below like the others): none of it is lost unseen.
        let leftover = inbox.withLock { inbox -> [@Sendable () -> Void] in
            inbox.closed = true
            defer { inbox.work = [] }
            return inbox.work
        }
        for item in leftover { item() }
        for channel in Array(channels.values) { closeChannel(channel, reason: .loopStopped) }
        for listener in Array(listeners.values) { removeListener(listener.id) }
        for timer in Array(timers.values) { removeTimer(timer) }
        close(epfd)
        close(wakeRead)
        close(wakeWrite)
        for exit in onExit { exit() }
    }

    func drainWakePipe() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &buffer, 64) > 0 {}
    }

    func runInbox() {
        while true {
            let work = inbox.withLock { inbox -> [@Sendable () -> Void] in
                let work = inbox.work
                inbox.work.removeAll(keepingCapacity: true)
                if work.isEmpty { inbox.wakePending = false }
                return work
            }
            if work.isEmpty { return }
            for item in work { item() }
        }
    }

    func allocateID() -> UInt64 {
        let id = nextID
        nextID += 1
        return id
    }

    func addListener(fd: Int32, address: ListenAddress, accept: @escaping (Int32) -> Void) -> UInt64 {
        let id = allocateID()
        listeners[id] = Listener(id: id, fd: fd, address: address, accept: accept)
        ctl(Epoll.ctlAdd, fd, events: Epoll.readable, data: id << 1)
        return id
    }

    func removeListener(_ id: UInt64) {
        guard let listener = listeners.removeValue(forKey: id) else { return }
        ctl(Epoll.ctlDel, listener.fd, events: 0, data: 0)
        close(listener.fd)
        if case .unix(let path) = listener.address { unlink(path) }
    }

    func acceptAll(_ listener: Listener) {
        for _ in 0..<64 {
            let fd = Glibc.accept(listener.fd, nil, nil)
            if fd < 0 {
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    // Out of descriptors: stop polling this listener until the next tick instead of spinning.
                    ctl(Epoll.ctlMod, listener.fd, events: 0, data: listener.id << 1)
                    pausedListeners.append(listener.id)
                    listener.onError?("accept_failed_emfile")
                }
                return
            }
            SocketAddress.setNonBlocking(fd)
            SocketAddress.setCloseOnExec(fd)
            if case .tcp = listener.address {
                var one: Int32 = 1
                _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            listener.accept(fd)
        }
    }

    /// Runs `fire` on the loop thread `nanoseconds` from now, then again each time after the delay it returns, until
    /// it returns nil (loop thread; a timerfd, so the wait is the kernel's and not the loop's 250 ms tick). False
    /// when no timer descriptor could be made (errno set). A timer still armed when the loop stops never fires again.
    func addTimer(after nanoseconds: UInt64, _ fire: @escaping () -> UInt64?) -> Bool {
        let fd = TimerFD.create()
        guard fd >= 0 else { return false }
        let timer = Timer(id: allocateID(), fd: fd, fire: fire)
        timers[timer.id] = timer
        ctl(Epoll.ctlAdd, fd, events: Epoll.readable, data: timer.id << 1)
        TimerFD.arm(fd, after: nanoseconds)
        return true
    }

    func fire(_ timer: Timer) {
        TimerFD.clear(timer.fd)
        if let next = timer.fire() {
            TimerFD.arm(timer.fd, after: next)
        } else {
            removeTimer(timer)
        }
    }

    func removeTimer(_ timer: Timer) {
        guard timers.removeValue(forKey: timer.id) != nil else { return }
        ctl(Epoll.ctlDel, timer.fd, events: 0, data: 0)
        close(timer.fd)
    }

    /// Registers a new channel (loop thread). For a socket pass the same fd twice.
    func addChannel(
        readFD: Int32, writeFD: Int32, isSocket: Bool, frameLimit: Int, maxInFlight: Int,
        idleTimeout: Double?, handler: any ChannelHandler
    ) -> Channel {
        let channel = Channel(
            id: allocateID(), readFD: readFD, writeFD: writeFD, isSocket: isSocket, frameLimit: frameLimit,
            limits: ChannelStateMachine.Limits(maxInFlight: maxInFlight, idleTimeout: idleTimeout),
            now: EventLoop.now())
        channel.handler = handler
        channels[channel.id] = channel
        channel.readInterest = Epoll.readable | (isSocket ? Epoll.readHangup : 0)
        ctl(Epoll.ctlAdd, readFD, events: channel.readInterest, data: channel.id << 1)
        if channel.hasSeparateWriteFD { ctl(Epoll.ctlAdd, writeFD, events: 0, data: channel.id << 1 | 1) }
        return channel
    }

    /// Performs what the channel's state machine asked for, then brings its epoll interest up to date.
    func perform(_ action: ChannelStateMachine.Action, on channel: Channel) {
        switch action {
        case .none: break
        case .deliverFrames: deliverFrames(channel)
        case .shutdownWrite: shutdownWriteSide(channel)
        case .close(let reason): closeDescriptors(channel, reason: reason)
        }
        updateInterest(channel)
    }

    func updateInterest(_ channel: Channel) {
        guard !channel.machine.isClosed else { return }
        let wantRead: UInt32 =
            channel.machine.wantsRead ? (Epoll.readable | (channel.isSocket ? Epoll.readHangup : 0)) : 0
        let wantWrite: UInt32 = channel.machine.wantsWrite ? Epoll.writable : 0
        if channel.readFD == channel.writeFD {
            let want = wantRead | wantWrite
            if want != channel.readInterest | channel.writeInterest {
                channel.readInterest = wantRead
                channel.writeInterest = wantWrite
                ctl(Epoll.ctlMod, channel.readFD, events: want, data: channel.id << 1)
            }
        } else {
            if wantRead != channel.readInterest {
                channel.readInterest = wantRead
                ctl(Epoll.ctlMod, channel.readFD, events: wantRead, data: channel.id << 1)
            }
            if channel.hasSeparateWriteFD && wantWrite != channel.writeInterest {
                channel.writeInterest = wantWrite
                ctl(Epoll.ctlMod, channel.writeFD, events: wantWrite, data: channel.id << 1 | 1)
            }
        }
    }

    func handle(_ channel: Channel, flags: UInt32, isWriteFD: Bool) {
        if flags & Epoll.writable != 0 { flush(channel) }
        if channel.machine.isClosed { return }
        let hungUp = flags & (Epoll.hangup | Epoll.error) != 0
        if !isWriteFD && flags & (Epoll.readable | Epoll.hangup | Epoll.error | Epoll.readHangup) != 0 {
            if channel.machine.wantsRead || flags & Epoll.readable != 0 {
                readOnce(channel)
            } else if hungUp {
                perform(channel.machine.hangUp(), on: channel)
            }
        } else if isWriteFD && hungUp {
            perform(channel.machine.hangUp(), on: channel)
        }
        updateInterest(channel)
    }

    func readOnce(_ channel: Channel) {
        let n = scratch.withUnsafeMutableBytes { raw in read(channel.readFD, raw.baseAddress, raw.count) }
        if n > 0 {
            scratch.withUnsafeBytes { raw in channel.framer.append(UnsafeRawBufferPointer(rebasing: raw[0..<n])) }
            perform(channel.machine.bytesRead(now: EventLoop.now()), on: channel)
        } else if n == 0 {
            perform(channel.machine.inputEnded(), on: channel)
        } else if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
            perform(channel.machine.readFailed(), on: channel)
        }
    }

    /// Hands buffered frames to the handler while the state machine allows it.
    func deliverFrames(_ channel: Channel) {
        channel.corked = true
        while channel.machine.canDeliverFrame, let event = channel.framer.next() {
            switch event {
            case .frame(let bytes):
                if channel.handler?.channelFrame(bytes, channel: channel) == true { channel.machine.frameStarted() }
            case .tooLarge:
                channel.handler?.channelFrameTooLarge(channel: channel)
            }
        }
        channel.corked = false
        if channel.pendingOut > 0 { flush(channel) }
        perform(channel.machine.deliveryStopped(), on: channel)
    }

    /// Queues what `append` writes, like `write(_:_:)`: while the channel is corked (frames being delivered), straight
    /// into its output buffer, with no buffer of its own (an answer given at once on the loop's thread).
    func write(_ channel: Channel, appending append: (inout [UInt8]) -> Void) {
        guard channel.machine.acceptsOutput else { return }
        guard channel.corked else {
            var bytes: [UInt8] = []
            append(&bytes)
            write(channel, bytes)
            return
        }
        let before = channel.out.count
        append(&channel.out)
        channel.machine.outputQueued(channel.out.count - before)
    }

    /// Queues bytes for writing and tries to write them now (dropped once the channel or its output is closed).
    func write(_ channel: Channel, _ bytes: [UInt8]) {
        guard channel.machine.acceptsOutput else { return }
        let queueWasEmpty = channel.pendingOut == 0
        channel.machine.outputQueued(bytes.count)
        if channel.corked {
            channel.out.append(contentsOf: bytes)
            return
        }
        guard queueWasEmpty else {
            channel.out.append(contentsOf: bytes)
            flush(channel)
            return
        }
        // Fast path: nothing queued, write straight from the caller's bytes.
        let n = bytes.withUnsafeBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            if channel.isSocket { return send(channel.writeFD, base, raw.count, Int32(MSG_NOSIGNAL)) }
            return Glibc.write(channel.writeFD, base, raw.count)
        }
        if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
            perform(channel.machine.writeFailed(), on: channel)
            return
        }
        let written = max(n, 0)
        channel.out.removeAll(keepingCapacity: true)
        channel.outOffset = 0
        if written < bytes.count { channel.out.append(contentsOf: bytes[written...]) }
        perform(channel.machine.outputWritten(written, now: written > 0 ? EventLoop.now() : 0), on: channel)
    }

    /// Writes queued bytes until done or the descriptor would block.
    func flush(_ channel: Channel) {
        guard channel.machine.acceptsOutput else { return }
        var written = 0
        while channel.pendingOut > 0 {
            let n = channel.out.withUnsafeBytes { raw -> Int in
                let base = raw.baseAddress! + channel.outOffset
                if channel.isSocket { return send(channel.writeFD, base, channel.pendingOut, Int32(MSG_NOSIGNAL)) }
                return Glibc.write(channel.writeFD, base, channel.pendingOut)
            }
            if n > 0 {
                channel.outOffset += n
                written += n
            } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                break
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                perform(channel.machine.writeFailed(), on: channel)
                return
            }
        }
        if channel.pendingOut == 0 {
            channel.out.removeAll(keepingCapacity: channel.out.capacity <= 16_384)
            channel.outOffset = 0
        }
        perform(channel.machine.outputWritten(written, now: written > 0 ? EventLoop.now() : 0), on: channel)
    }

    /// Half-closes the write side (socket: shutdown(SHUT_WR); pipe: close its write end).
    func shutdownWriteSide(_ channel: Channel) {
        if channel.isSocket {
            shutdown(channel.writeFD, Int32(SHUT_WR))
        } else if channel.hasSeparateWriteFD {
            ctl(Epoll.ctlDel, channel.writeFD, events: 0, data: 0)
            close(channel.writeFD)
            channel.writeEndClosed()
            channel.writeInterest = 0
        }
    }

    /// Closes the channel's descriptors, forgets it and tells its handler (the `.close` action).
    func closeDescriptors(_ channel: Channel, reason: ChannelCloseReason) {
        ctl(Epoll.ctlDel, channel.readFD, events: 0, data: 0)
        if channel.hasSeparateWriteFD {
            ctl(Epoll.ctlDel, channel.writeFD, events: 0, data: 0)
            close(channel.writeFD)
            channel.writeEndClosed()
        }
        close(channel.readFD)
        channels.removeValue(forKey: channel.id)
        let handler = channel.handler
        channel.handler = nil
        handler?.channelClosed(channel: channel, reason: reason)
    }

    /// Called (on the loop thread) when an in-flight frame finished; `response` is written first.
    func complete(_ id: UInt64, response: [UInt8]?) {
        guard let channel = channels[id] else { return }
        if let response { write(channel, response) }
        perform(channel.machine.frameCompleted(), on: channel)
    }

    /// Writes bytes to a channel by id (no-op if it is gone).
    func write(_ id: UInt64, _ bytes: [UInt8]) {
        guard let channel = channels[id] else { return }
        write(channel, bytes)
    }

    /// Stops reading and closes the channel once in-flight work is done and written.
    func drain(_ channel: Channel) {
        perform(channel.machine.drainRequested(), on: channel)
    }

    /// Half-closes the write side once what is queued is written (`RPCClient.finishWriting`).
    func finishWriting(_ channel: Channel) {
        perform(channel.machine.finishWritingRequested(), on: channel)
    }

    /// Closes the channel now.
    func closeChannel(_ channel: Channel, reason: ChannelCloseReason) {
        perform(channel.machine.closeRequested(reason), on: channel)
    }

    func idleScan(now: Double) {
        for channel in Array(channels.values) {
            perform(channel.machine.idleCheck(now: now), on: channel)
            if !channel.machine.isClosed { channel.handler?.channelTick(now: now, channel: channel) }
        }
    }

    /// Stops the loop (closing everything); `whenStopped` runs on the loop thread at the very end.
    func stop(whenStopped: @escaping @Sendable () -> Void) {
        execute { [self] in
            self.onExit.append(whenStopped)
            self.running = false
        }
    }
}
