import Foundation
import JSONRPC
import OfferCrypto
import OfferStore
import Postgres
import Synchronization

/// The running gateway: the JSON-RPC server over the `Gateway` handler, plus the listener that keeps every
/// process's caches fresh. One `run()`-style lifecycle: `start`, serve, `shutdown` (swift-service-lifecycle style).
public final class GatewayService: Sendable {
    public let gateway: Gateway
    public let server: RPCServer<Gateway>
    let database: OfferDatabase
    let logger: Logger
    private let listener = Mutex<PostgresListener?>(nil)
    /// The long-running parts besides the server, each one `run()`: started by `start`, stopped in order by
    /// `shutdown` (after the server, so every request answered had its writes committed).
    private let parts = Mutex<[Part: Task<Void, Never>]>([:])

    private enum Part: Hashable {
        /// The issued-signature ledger's group commit (`LedgerWriter.run`).
        case ledger
        /// Re-sealing signing keys under the current master key, when older ones are configured.
        case resealing
    }

    /// The notification channel catalog and key changes are announced on (see migrations/0001_initial.sql).
    public static let catalogChannel = "offergate_catalog"
    /// The channel changes to a customer's transactions are announced on (migrations/0002_customer_notify.sql).
    public static let customerChannel = "offergate_customer"

    public init(
        database: OfferDatabase, sealer: KeySealer, options: GatewayOptions, rpc: RPCServerConfiguration,
        logger: Logger
    ) throws {
        self.database = database
        self.logger = logger
        self.gateway = Gateway(database: database, sealer: sealer, options: options, logger: logger)
        var rpc = rpc
        let rpcLogger = logger
        if rpc.logger == nil {
            rpc.logger = { event in Self.log(event, rpcLogger) }
        }
        self.server = try RPCServer(handler: gateway, configuration: rpc)
    }

    /// Starts following catalog changes made by any gateway process, then binds `addresses`. Returns the bound
    /// addresses (with real ports for `tcp:…:0`).
    public func start(listen addresses: [ListenAddress]) async throws -> [ListenAddress] {
        let listener = try await PostgresListener.start(
            configuration: database.pool.configuration, channels: [Self.catalogChannel, Self.customerChannel])
        self.listener.withLock { $0 = listener }
        let gateway = self.gateway
        let logger = self.logger
        Task.detached {
            for await event in listener.events {
                switch event {
                case .notification(let note) where note.channel == Self.customerChannel:
                    // "<tenant uuid>:<customer id>": a UUID has no ':', the customer id may.
                    let parts = note.payload.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                    guard parts.count == 2, let tenant = UUID(uuidString: String(parts[0])) else { continue }
                    gateway.invalidate(tenant: tenant, customerId: String(parts[1]))
                case .notification(let note):
                    if let tenant = UUID(uuidString: note.payload) { gateway.invalidate(tenant: tenant) }
                case .reconnected:
                    logger.warning("catalog change feed reconnected; dropping every cached catalog")
                    gateway.invalidateAll()
                }
            }
        }
        startParts()
        _ = ProcessLimits.raiseOpenFileLimit()
        var bound: [ListenAddress] = []
        for address in addresses {
            bound.append(try server.listen(address))
        }
        return bound
    }

    private func startParts() {
        let ledger = gateway.services.offers.ledger
        let resealing = !gateway.sealer.keyring.previous.isEmpty
        let logger = logger
        parts.withLock { parts in
            guard parts.isEmpty else { return }
            parts[.ledger] = Task { await ledger.run() }
            if resealing {
                parts[.resealing] = Task {
                    do {
                        try await self.resealSigningKeys()
                    } catch is CancellationError {
                        logger.info("re-sealing signing keys stopped by shutdown; the next start goes on")
                    } catch {
                        logger.error("re-sealing signing keys failed; the next start retries", ["error": "\(error)"])
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
        await server.shutdown(gracePeriod: gracePeriod)
        let running = parts.withLock { parts in
            defer { parts.removeAll() }
            return parts
        }
        running[.resealing]?.cancel()
        await running[.resealing]?.value
        gateway.services.offers.ledger.finish()
        await running[.ledger]?.value
        listener.withLock { $0?.stop() }
        await database.pool.close()
    }

    static func log(_ event: RPCLogEvent, _ logger: Logger) {
        switch event {
        case .listening(let address): logger.info("listening", ["listen": "\(address)"])
        case .accepted(let info): logger.debug("connection opened", ["conn": String(info.id), "transport": info.transport.rawValue])
        case .closed(let info, let reason): logger.debug("connection closed", ["conn": String(info.id), "reason": reason])
        case .refused(let address, let reason): logger.warning("connection refused", ["listen": "\(address)", "reason": reason])
        case .frameTooLarge(let info): logger.warning("frame too large", ["conn": String(info.id)])
        case .shutdownStarted: logger.info("shutting down: no new connections, finishing requests in flight")
        case .shutdownFinished(let forced): logger.info("shut down", ["forced_connections": String(forced)])
        }
    }
}
