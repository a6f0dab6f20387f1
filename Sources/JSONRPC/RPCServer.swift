// The server: listeners and connections on a dedicated epoll thread, handlers on Swift tasks.
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A JSON-RPC 2.0 server over newline-delimited frames, on Unix sockets, TCP and stdio.
///
/// Socket IO runs on dedicated epoll threads (non-blocking sockets, per-connection read buffer and write queue):
/// the first loop accepts, and each connection is served by the loop with the fewest (`eventLoops` of them);
/// complete frames are parsed and handled on Swift tasks, and responses are written back through the loop.
/// Requests of one connection run concurrently up to `maxInFlightPerConnection`; beyond that the connection is
/// not read until one completes (back-pressure).
///
/// Lifecycle: `listen(_:)` (any number of times), then `run()` until `shutdown(gracePeriod:)`.
public final class RPCServer<Handler: RPCHandler>: Sendable {
    let handler: Handler
    let configuration: RPCServerConfiguration
    /// The loop that owns the listeners (and serves connections too).
    var loop: EventLoop { loops[0].loop }
    /// Every loop that serves connections, the listeners' first.
    let loops: [ServingLoop]
    /// Open socket connections (shutdown waits, bounded, for it to reach zero).
    let connections = LiveCount()
    let lifecycle = Mutex<Lifecycle>(Lifecycle())

    struct Lifecycle {
        var shuttingDown = false
        var finished = false
        /// `run()` and `shutdown` callers waiting for the end of a shutdown.
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
        /// Stdio connections being served (shutdown stops them reading, waits for their answers, then ends them).
        var stdio: [UInt64: StdioConnection<Handler>] = [:]
        var boundAddresses: [ListenAddress] = []
    }

    /// Creates a server (no thread runs until the first `listen`).
    public init(handler: Handler, configuration: RPCServerConfiguration = RPCServerConfiguration())
        throws(JSONRPCError)
    {
        self.handler = handler
        self.configuration = configuration
        self.loops = try (0..<max(configuration.eventLoops, 1)).map { _ throws(JSONRPCError) in
            ServingLoop(try EventLoop(name: "rpc-server-loop"))
        }
    }

    typealias ServingLoop = RPCServingLoop

    func startLoops() {
        for serving in loops { serving.loop.start() }
    }

    /// Number of open socket connections.
    public var connectionCount: Int { connections.value }

    /// The addresses bound so far (TCP port 0 resolved to the real port).
    public var boundAddresses: [ListenAddress] { lifecycle.withLock { $0.boundAddresses } }

    var isShuttingDown: Bool { lifecycle.withLock { $0.shuttingDown } }

    /// Starts listening on `address` and returns the bound address (with the ephemeral port for `tcp:…:0`).
    /// A stale Unix socket file is replaced; the socket file gets `unixSocketPermissions` and is unlinked at shutdown.
    @discardableResult
    public func listen(_ address: ListenAddress) throws(JSONRPCError) -> ListenAddress {
        guard !isShuttingDown else { throw JSONRPCError(.notRunning, "server is shutting down") }
        let (fd, bound) = try SocketAddress.listen(address, permissions: mode_t(configuration.unixSocketPermissions))
        lifecycle.withLock { $0.boundAddresses.append(bound) }
        startLoops()
        loop.execute { [self] in
            // A shutdown that began meanwhile has already removed the listeners: this one must not outlive it.
            let id = self.loop.addListener(fd: fd, address: bound) { [self] clientFD in
                self.accepted(clientFD, via: bound)
            }
            if self.isShuttingDown {
                self.loop.removeListener(id)
                return
            }
            let logger = self.configuration.logger
            self.loop.listeners[id]?.onError = { reason in logger?(.refused(bound, reason: reason)) }
        }
        configuration.logger?(.listening(bound))
        return bound
    }

    /// Runs until the server has shut down: returns once `shutdown` finished. Cancelling the task that runs it
    /// shuts the server down with `configuration.shutdownGracePeriod` (as a service group stops its services), and it
    /// returns when that shutdown finished.
    public func run() async {
        let token = newWaiterToken()
        await withTaskCancellationHandler {
            await waitUntilFinished(token: token, returnIfCancelled: true)
        } onCancel: {
            lifecycle.withLock { $0.waiters.removeValue(forKey: token) }?.resume()
        }
        if Task.isCancelled { await shutdown(gracePeriod: configuration.shutdownGracePeriod) }
    }

    func newWaiterToken() -> UInt64 {
        lifecycle.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
    }

    /// Waits until `shutdown` has finished, or (`returnIfCancelled`) until the task is cancelled.
    func waitUntilFinished(token: UInt64, returnIfCancelled: Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = lifecycle.withLock { state -> Bool in
                if state.finished { return true }
                state.waiters[token] = continuation
                return false
            }
            if done {
                continuation.resume()
            } else if returnIfCancelled && Task.isCancelled {
                // Cancelled before the waiter was stored, so `run()`'s cancellation handler found nothing to resume.
                lifecycle.withLock { $0.waiters.removeValue(forKey: token) }?.resume()
            }
        }
    }

    /// Stops accepting, stops reading, lets in-flight requests finish and their responses be written for up to
    /// `gracePeriod`, then closes every connection (cancelling the requests still running) and removes Unix socket
    /// files. Returns when done; idempotent.
    public func shutdown(gracePeriod: Duration) async {
        let deadline = ContinuousClock.now.advanced(by: gracePeriod)
        let stdio = lifecycle.withLock { state -> [StdioConnection<Handler>]? in
            if state.shuttingDown { return nil }
            state.shuttingDown = true
            return Array(state.stdio.values)
        }
        guard let stdio else {
            await waitUntilFinished(token: newWaiterToken(), returnIfCancelled: false)
            return
        }
        configuration.logger?(.shutdownStarted)
        startLoops()
        for serving in loops {
            let loop = serving.loop
            loop.execute {
                for id in Array(loop.listeners.keys) { loop.removeListener(id) }
                for channel in Array(loop.channels.values) { loop.drain(channel) }
            }
        }
        let stdioAnswering = LiveCount()
        for connection in stdio {
            connection.stopReading()
            stdioAnswering.increment()
            connection.dispatcher.whenIdle { stdioAnswering.decrement() }
        }
        // Both counts only go down now (listeners are gone, stdio reads no more); each decrement to zero wakes us.
        // Awaited in a task of its own so the caller's cancellation (a cancelled `run()`) does not cut the grace short.
        await Task { [connections] in
            _ = await connections.waitForZero(until: deadline)
            _ = await stdioAnswering.waitForZero(until: deadline)
        }.value
        let forced = connectionCount
        for serving in loops {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                serving.loop.stop { continuation.resume() }
            }
        }
        let (waiters, remaining) = lifecycle.withLock { state in
            state.finished = true
            defer { state.waiters = [:] }
            return (Array(state.waiters.values), Array(state.stdio.values))
        }
        for connection in remaining { connection.end(reason: "shutdown") }
        configuration.logger?(.shutdownFinished(forcedConnections: forced))
        for waiter in waiters { waiter.resume() }
    }

    // MARK: Loop thread

    func accepted(_ fd: Int32, via address: ListenAddress) {
        let refusal: String? =
            isShuttingDown
            ? "shutting_down" : connections.value >= configuration.maxConnections ? "connection_limit" : nil
        if let refusal {
            configuration.logger?(.refused(address, reason: refusal))
            close(fd)
            return
        }
        let transport: ConnectionInfo.Transport
        let peer: String?
        switch address {
        case .unix:
            transport = .unix
            peer = nil
        case .tcp:
            transport = .tcp
            peer = SocketAddress.peerDescription(fd)
        }
        // Counted now, so the next accept sees the limit, though the connection is registered on its loop later.
        connections.increment()
        let serving = loops.min { $0.connections.load(ordering: .relaxed) < $1.connections.load(ordering: .relaxed) }!
        serving.connections.add(1, ordering: .relaxed)
        let info = ConnectionInfo(id: ConnectionIDs.next(), transport: transport, listenAddress: address, peer: peer)
        if serving.loop === loop {
            serve(fd, info: info, on: serving)
        } else if !serving.loop.execute({ [self] in self.serve(fd, info: info, on: serving) }) {
            // That loop has stopped (a shutdown finished meanwhile): the connection is closed unserved.
            close(fd)
            serving.connections.subtract(1, ordering: .relaxed)
            connections.decrement()
        }
    }

    /// Registers an accepted connection on the loop that serves it (that loop's thread).
    func serve(_ fd: Int32, info: ConnectionInfo, on serving: ServingLoop) {
        let loop = serving.loop
        let connection = ServerConnection<Handler>(server: self, serving: serving)
        let channel = loop.addChannel(
            readFD: fd, writeFD: fd, isSocket: true, frameLimit: configuration.maxFrameBytes,
            maxInFlight: configuration.maxInFlightPerConnection, idleTimeout: configuration.idleTimeout,
            handler: connection)
        let channelID = channel.id
        connection.info = info
        connection.dispatcher = ConnectionDispatcher(
            handler: handler, info: info, maxDepth: configuration.maxNestingDepth,
            sendFrame: { bytes in loop.execute { loop.write(channelID, bytes) } },
            complete: { bytes in loop.execute { loop.complete(channelID, response: bytes) } })
        configuration.logger?(.accepted(info))
        // Accepted before a shutdown began but registered after its drain reached this loop: drained now.
        if isShuttingDown { loop.drain(channel) }
    }
}

/// Connection ids, unique per process across every transport (the HTTP listener takes one per request).
public enum ConnectionIDs {
    static let counter = Atomic<UInt64>(0)
    public static func next() -> UInt64 { counter.add(1, ordering: .relaxed).newValue }
}

/// A loop of an `RPCServer` and the socket connections it serves (read on the accepting loop to pick one). Outside
/// the generic server, so that a connection reaching its loop on every answer looks up no generic metadata at run
/// time (as `DispatcherState`).
final class RPCServingLoop: Sendable {
    let loop: EventLoop
    let connections = Atomic<Int>(0)
    init(_ loop: EventLoop) { self.loop = loop }
}

/// The loop-side owner of one server connection.
final class ServerConnection<Handler: RPCHandler>: ChannelHandler {
    let server: RPCServer<Handler>
    let serving: RPCServer<Handler>.ServingLoop
    var dispatcher: ConnectionDispatcher<Handler>?
    var info: ConnectionInfo?

    init(server: RPCServer<Handler>, serving: RPCServer<Handler>.ServingLoop) {
        self.server = server
        self.serving = serving
    }

    func channelFrame(_ frame: [UInt8], channel: Channel) -> Bool {
        guard let dispatcher else { return false }
        switch dispatcher.dispatch(frame) {
        case .started: return true
        case .answered(let response):
            if let response { serving.loop.write(channel) { response.appendFrame(to: &$0) } }
            return false
        case .dropped: return false
        }
    }

    func channelFrameTooLarge(channel: Channel) {
        let response = RPCResponse(id: .null, result: .failure(.frameTooLarge(limit: channel.framer.limit)))
        serving.loop.write(channel, RPCExchange.frame(response))
        if let info { server.configuration.logger?(.frameTooLarge(info)) }
    }

    func channelClosed(channel: Channel, reason: ChannelCloseReason) {
        // Requests still running lose their client: `closed()` cancels them.
        dispatcher?.closed()
        if let info { server.configuration.logger?(.closed(info, reason: reason.rawValue)) }
        serving.connections.subtract(1, ordering: .relaxed)
        server.connections.decrement()
    }
}

/// Process-wide limits that a server with thousands of connections needs.
public enum ProcessLimits {
    /// Raises the soft limit of open file descriptors to `wanted` (capped by the hard limit) and returns the new
    /// soft limit. Each connection costs one descriptor; the default soft limit is often 1,024.
    @discardableResult
    public static func raiseOpenFileLimit(to wanted: Int = 65_536) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return -1 }
        let target = min(rlim_t(max(wanted, 0)), limit.rlim_max)
        if limit.rlim_cur < target {
            limit.rlim_cur = target
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(clamping: limit.rlim_cur)
    }
}
