import Foundation
import HTTPServer
import JSONRPC
import OfferCrypto
import OfferStore
import Synchronization

/// The running gateway: the JSON-RPC server over the `Gateway` handler, plus the store's change feed that keeps
/// every process's caches fresh. One lifecycle: `start`, serve, `shutdown` (swift-service-lifecycle style).
public final class GatewayService: Sendable {
    public let gateway: Gateway
    public let server: RPCServer<Gateway>
    /// The HTTP listener (`--http`): the routes of `HTTPRoutes` over the same gateway.
    public let http: HTTPServer
    let database: OfferDatabase
    let logger: Logger
    /// What other processes (and this one) change in the store.
    let changeFeed: ChangeFeed
    /// The feed's `run()` and its consumer, started by `start`, cancelled and awaited by `shutdown`.
    private let following = Mutex<Task<Void, Never>?>(nil)
    /// The long-running parts besides the server, each one `run()`: started by `start`, stopped in order by
    /// `shutdown` (after the server, so every request answered had its writes committed).
    private let parts = Mutex<[Part: Task<Void, Never>]>([:])

    private enum Part: Hashable {
        /// The issued-signature ledger's group commit (`LedgerWriter.run`), which records retention answers too.
        case ledger
        /// Re-sealing signing keys under the current master key, when older ones are configured.
        case resealing
        /// Flushing the funnel's in-memory `offered` counts (`OfferedCounter.run`).
        case funnel
        /// Analysing tables PostgreSQL has no statistics of yet (`FirstStatistics.run`), in a fresh database.
        case statistics
    }

    /// `changeFeedBufferSize`: changes the feed holds for a consumer that fell behind before it tells it to drop
    /// every cache instead.
    public init(
        database: OfferDatabase, sealer: KeySealer, options: GatewayOptions, rpc: RPCServerConfiguration,
        logger: Logger, changeFeedBufferSize: Int = ChangeFeed.defaultBufferSize,
        http httpConfiguration: HTTPServerConfiguration? = nil
    ) throws {
        self.database = database
        self.logger = logger
        self.changeFeed = ChangeFeed(database: database, bufferSize: changeFeedBufferSize)
        self.gateway = Gateway(database: database, sealer: sealer, options: options, logger: logger)
        var rpc = rpc
        let rpcLogger = logger
        if rpc.logger == nil {
            rpc.logger = { event in Self.log(event, rpcLogger) }
        }
        self.server = try RPCServer(handler: gateway, configuration: rpc)
        var http = httpConfiguration ?? HTTPServerConfiguration()
        if httpConfiguration == nil { http.maxBodyBytes = rpc.maxFrameBytes }
        if http.logger == nil {
            let httpLogger = logger
            http.logger = { event in Self.log(event, httpLogger) }
        }
        let router = HTTPRouter(gateway: gateway)
        self.http = HTTPServer(
            configuration: http, immediate: { request, respond in router.respondNow(request, respond) },
            handler: { request in await router.respond(request) })
    }

    /// Starts following catalog changes made by any gateway process, then binds `addresses` (JSON-RPC) and `http`
    /// (the HTTP listener). Returns the bound addresses, JSON-RPC ones first (with real ports for `tcp:…:0`).
    public func start(listen addresses: [ListenAddress], http: [ListenAddress] = []) async throws -> [ListenAddress] {
        let feed = changeFeed
        let task = Task { [gateway, logger] in await Self.follow(feed, gateway: gateway, logger: logger) }
        following.withLock { $0 = task }
        do {
            try await feed.waitUntilListening()
        } catch {
            await stopFollowing()
            throw error
        }
        startParts()
        _ = ProcessLimits.raiseOpenFileLimit()
        var bound: [ListenAddress] = []
        for address in addresses {
            bound.append(try server.listen(address))
        }
        for address in http {
            bound.append(try self.http.listen(address))
        }
        return bound
    }

    private func startParts() {
        let ledger = gateway.services.offers.ledger
        let offered = gateway.services.offers.offered
        let resealing = !gateway.sealer.keyring.previous.isEmpty
        let logger = logger
        parts.withLock { parts in
            guard parts.isEmpty else { return }
            parts[.ledger] = Task { await ledger.run() }
            parts[.funnel] = Task { await offered.run() }
            parts[.statistics] = Task { [database] in await FirstStatistics(database: database, logger: logger).run() }
            if resealing {
                parts[.resealing] = Task {
                    do {
                        try await self.resealSigningKeys()
                    } catch {
                        // Stopped by shutdown between rows (CancellationError) or mid-statement (the store's
                        // cancelled failure): not a failure.
                        if Task.isCancelled {
                            logger.info("re-sealing signing keys stopped by shutdown; the next start goes on")
                        } else {
                            logger.error(
                                "re-sealing signing keys failed; the next start retries", ["error": "\(error)"])
                        }
                    }
                }
            }
        }
    }

    /// Re-seals every signing key still sealed under an older master key (after `OFFERGATE_MASTER_KEY` was rotated
    /// and the old key listed in `OFFERGATE_PREVIOUS_MASTER_KEYS`). Keys stay usable throughout: each row is
    /// replaced in one statement, only if no other process re-sealed it first. Returns how many this call moved.
    @discardableResult
    public func resealSigningKeys() async throws -> Int {
        let sealer = gateway.sealer
        let current = sealer.keyring.current.idHex
        var moved = 0
        for record in try await database.signingKeys.sealedUnder(otherThan: current) {
            try Task.checkCancellation()
            let tenant = record.tenantId.uuidString.lowercased()
            let sealed = try SealedKey(bytes: record.sealedPrivateKey)
            let resealed = try sealer.reseal(sealed, tenant: tenant, keyId: record.keyId)
            if try await database.signingKeys.reseal(
                tenant: record.tenantId, keyId: record.keyId, expectedMasterKeyId: record.masterKeyId,
                sealedPrivateKey: resealed.bytes, masterKeyId: current)
            {
                moved += 1
            }
        }
        if moved > 0 { logger.info("signing keys re-sealed under the current master key", ["count": String(moved)]) }
        return moved
    }

    /// Serves stdin/stdout until EOF (then finishes in-flight requests) or shutdown.
    public func serveStdio() async {
        await server.serveStdio()
    }

    /// Waits until the socket server has shut down.
    public func run() async {
        await server.run()
    }

    /// Stops accepting, lets in-flight requests finish within `gracePeriod`, then stops the change feed and closes
    /// the database pool.
    public func shutdown(gracePeriod: Duration) async {
        // Both listeners stop accepting at once and share the grace period.
        async let rpcStopped: Void = server.shutdown(gracePeriod: gracePeriod)
        async let httpStopped: Void = http.shutdown(gracePeriod: gracePeriod)
        _ = await (rpcStopped, httpStopped)
        let running = parts.withLock { parts in
            defer { parts.removeAll() }
            return parts
        }
        for part in [Part.resealing, .statistics] {
            running[part]?.cancel()
            await running[part]?.value
        }
        gateway.services.offers.ledger.finish()
        await running[.ledger]?.value
        // No request counts any more: the last counts go in now.
        running[.funnel]?.cancel()
        await running[.funnel]?.value
        await gateway.services.offers.offered.flush()
        await stopFollowing()
        await database.close()
    }

    /// Runs the change feed and applies its changes to the caches until cancelled. Neither half outlives the
    /// other: when the feed stops (its first connect failed, or it was cancelled) `changes` ends, and so does the
    /// consumer.
    static func follow(_ feed: ChangeFeed, gateway: Gateway, logger: Logger) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await feed.run()
                } catch {
                    logger.error("change feed stopped: \(error)")
                }
            }
            group.addTask {
                for await change in feed.changes {
                    apply(change, to: gateway, logger: logger)
                }
            }
        }
    }

    static func apply(_ change: StoreChange, to gateway: Gateway, logger: Logger) {
        switch change {
        case .catalogOrSigningKeys(let tenant):
            gateway.invalidate(tenant: tenant)
            gateway.metrics.changeFeedChanges.increment(["catalog"])
        case .customer(let tenant, let customerId):
            gateway.invalidate(tenant: tenant, customerId: customerId)
            gateway.metrics.changeFeedChanges.increment(["customer"])
        case .mayHaveMissedChanges(let reason):
            defer { gateway.metrics.changeFeedChanges.increment(["resync"]) }
            switch reason {
            case .started: break
            case .connectionLost:
                logger.warning("change feed lost its connection; serving nothing from caches until it is back")
                gateway.invalidateAll(keepingNew: false)
                return
            case .reconnected: logger.warning("change feed reconnected; dropping every cache")
            case .overflow: logger.warning("change feed overflowed (caches fell behind); dropping every cache")
            case .unrecognised: logger.warning("change feed carried an unrecognised change; dropping every cache")
            }
            gateway.invalidateAll()
        }
    }

    private func stopFollowing() async {
        let task = following.withLock { t in
            defer { t = nil }
            return t
        }
        task?.cancel()
        await task?.value
    }

    static func log(_ event: HTTPLogEvent, _ logger: Logger) {
        switch event {
        case .listening(let address): logger.info("listening", ["http": "\(address)"])
        case .refused(let status, let reason):
            logger.info("http request refused", ["http.status": String(status), "reason": reason])
        case .requestTimedOut: logger.info("http request timed out: connection shut down")
        case .shutdownStarted: logger.info("http: no new connections, finishing requests in flight")
        case .shutdownFinished(let forced): logger.info("http shut down", ["forced_requests": String(forced)])
        }
    }

    static func log(_ event: RPCLogEvent, _ logger: Logger) {
        switch event {
        case .listening(let address): logger.info("listening", ["listen": "\(address)"])
        case .accepted(let info):
            logger.debug("connection opened", ["conn": String(info.id), "transport": info.transport.rawValue])
        case .closed(let info, let reason):
            logger.debug("connection closed", ["conn": String(info.id), "reason": reason])
        case .refused(let address, let reason):
            logger.warning("connection refused", ["listen": "\(address)", "reason": reason])
        case .frameTooLarge(let info): logger.warning("frame too large", ["conn": String(info.id)])
        case .shutdownStarted: logger.info("shutting down: no new connections, finishing requests in flight")
        case .shutdownFinished(let forced): logger.info("shut down", ["forced_connections": String(forced)])
        }
    }
}
