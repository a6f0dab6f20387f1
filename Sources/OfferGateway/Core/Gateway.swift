import Foundation
import JSONRPC
import OfferCrypto
import OfferDomain
import OfferStore

/// Settings of the application layer (transports are configured separately).
public struct GatewayOptions: Sendable {
    /// The operators' API key (`OFFERGATE_ADMIN_KEY`); nil turns admin methods off.
    public var adminKey: String?
    /// Requests a second per tenant (0 = unlimited), and the burst allowed after a quiet period.
    public var rateLimit: Double = 0
    public var rateBurst: Double = 0
    /// How many customers' transaction histories each process keeps in memory.
    public var customerCacheSize: Int = 100_000
    /// How many `offers.best` answers each process remembers (see `DecisionMemo`); 0 turns the memo off.
    public var decisionMemoSize: Int = 20_000
    /// Log every request at info level (otherwise at debug).
    public var logRequests: Bool = true
    public var version: String = OfferGateVersion.current
    /// The clock for decisions without an explicit `at` and for signature timestamps.
    public var clock: @Sendable () -> Date = { Date() }
    /// Where nonces come from (by default a fresh v4 UUID from OpenSSL's CSPRNG, buffered per thread: Foundation's
    /// `UUID()` opens `/dev/urandom` on every call on Linux).
    public var nonce: @Sendable () -> UUID = { UUID.secureRandom() }

    public init(adminKey: String? = nil) {
        self.adminKey = adminKey
    }
}

/// The version reported by `system.health`.
public enum OfferGateVersion {
    public static let current = "0.1.0"
}

/// OfferGate's JSON-RPC handler: authenticates connections, scopes every call to a tenant, and runs the methods of
/// the API over the store, the domain rules and the signer.
public final class Gateway: RPCHandler {
    public typealias Session = GatewaySession

    let database: OfferDatabase
    let sealer: KeySealer
    let options: GatewayOptions
    let logger: Logger
    let limiter: RateLimiter
    let adminKeyDigest: [UInt8]?
    let tenants: TenantDirectory
    let catalogs: CatalogCache
    let signers: SignerCache
    let customers: CustomerCache
    /// Group commit of the issued-signature ledger.
    let ledger: LedgerWriter
    let displayTexts = DisplayTextCache()
    /// Remembered `offers.best` answers, exact until their inputs change or their horizon passes.
    let decisions: DecisionMemo
    /// Group commit of code redemptions (one owner per campaign).
    let redemptions: RedemptionCoordinator
    public let stats = GatewayStats()
    private let methods: [String: MethodSpec]

    public init(database: OfferDatabase, sealer: KeySealer, options: GatewayOptions, logger: Logger) {
        self.database = database
        self.sealer = sealer
        self.options = options
        self.logger = logger
        self.limiter = RateLimiter(rate: options.rateLimit, burst: max(options.rateBurst, options.rateLimit))
        self.adminKeyDigest = options.adminKey.flatMap { $0.isEmpty ? nil : SHA256.hash($0) }
        self.tenants = TenantDirectory(repository: database.tenants)
        self.catalogs = CatalogCache(repository: database.catalog)
        self.signers = SignerCache(repository: database.signingKeys, sealer: sealer)
        self.customers = CustomerCache(repository: database.subscriptions, capacity: options.customerCacheSize)
        self.ledger = LedgerWriter(ledger: database.signatures)
        self.decisions = DecisionMemo(capacity: options.decisionMemoSize)
        self.redemptions = RedemptionCoordinator(repository: database.campaigns, clock: options.clock)
        var table: [String: MethodSpec] = [:]
        for spec in Self.allMethods {
            table[spec.name] = spec
        }
        self.methods = table
    }

    static var allMethods: [MethodSpec] {
        SystemMethods.all + SessionMethods.all + TenantAdminMethods.all + KeyMethods.all + CatalogMethods.all
            + CustomerMethods.all + OfferMethods.all + CampaignMethods.all + CodeMethods.all
    }

    public func makeSession(_ info: ConnectionInfo) -> GatewaySession {
        GatewaySession(connection: info)
    }

    public func handle(_ request: RPCRequest, session: GatewaySession, context: RPCContext) async
        -> Result<JSONValue, RPCError>
    {
        let started = ContinuousClock.now
        let outcome: Result<JSONValue, RPCError>
        var tenantSlug: String?
        var logDetail: String?
        if let method = methods[request.method] {
            do {
                try authorize(method, session: session)
                if case .tenant(let tenant) = session.principal {
                    tenantSlug = tenant.slug
                    if method.access != .open, case .limited(let wait) = limiter.take(tenant: tenant.slug) {
                        throw GatewayError.rateLimited(retryAfterMs: wait)
                    }
                }
                let context = MethodContext(request: request, session: session, rpc: context, gateway: self)
                outcome = .success(try await method.run(context))
            } catch let error as GatewayError {
                if case .internal = error { logDetail = error.logDescription }
                if case .unavailable = error { logDetail = error.logDescription }
                outcome = .failure(error.rpcError)
            } catch let error as RPCError {
                outcome = .failure(error)
            } catch let error as StoreError {
                // Logged as a failure only when it is the gateway's or the database's, like GatewayErrors above:
                // a conflict or a miss is the client's doing.
                let mapped = GatewayError(error)
                if case .internal = mapped { logDetail = "\(error)" }
                if case .unavailable = mapped { logDetail = "\(error)" }
                outcome = .failure(mapped.rpcError)
            } catch {
                logDetail = "unexpected: \(error)"
                outcome = .failure(GatewayError.internal("\(error)").rpcError)
            }
        } else {
            outcome = .failure(.methodNotFound(request.method))
        }
        let elapsed = ContinuousClock.now - started
        let micros = Int(elapsed.components.seconds) * 1_000_000 + Int(elapsed.components.attoseconds / 1_000_000_000_000)
        let code: Int? = if case .failure(let error) = outcome { error.code } else { nil }
        stats.record(method: methods[request.method] != nil ? request.method : "(unknown)", micros: micros, errorCode: code)
        log(request: request, session: session, tenant: tenantSlug, micros: micros, code: code, detail: logDetail)
        return outcome
    }

    private func authorize(_ method: MethodSpec, session: GatewaySession) throws {
        switch (method.access, session.principal) {
        case (.open, _): return
        case (_, .anonymous): throw GatewayError.unauthenticated()
        case (.tenant, _): return
        case (.admin, .admin): return
        case (.admin, .tenant):
            throw GatewayError.forbidden("this method needs the admin key", reason: "admin_only")
        }
    }

    private func log(
        request: RPCRequest, session: GatewaySession, tenant: String?, micros: Int, code: Int?, detail: String?
    ) {
        let level: LogLevel = detail != nil ? .error : (options.logRequests ? .info : .debug)
        guard logger.isEnabled(level) else { return }
        var meta: [String: String] = [
            "rpc.method": request.method, "latency_us": String(micros),
            "conn": String(session.connection.id),
        ]
        if let id = request.id { meta["request.id"] = id.description }
        if let tenant { meta["tenant"] = tenant }
        if let code { meta["rpc.error"] = String(code) }
        if let detail { meta["error.detail"] = detail }
        logger.log(level, detail != nil ? "request failed" : "request", meta)
    }

    /// The decision time: the `at` param if given, else now.
    func now() -> Date { options.clock() }

    /// Drops cached data of one tenant (after a change here, or a NOTIFY from another process).
    public func invalidate(tenant: UUID) {
        catalogs.invalidate(tenant)
        signers.invalidate(tenant)
    }

    /// Drops the cached history of one customer (after subscriptions.record here or in another process).
    public func invalidate(tenant: UUID, customerId: String) {
        customers.invalidate(tenant, customerId)
    }

    /// Drops every cached catalog, key and history (after the notification channel was interrupted).
    public func invalidateAll() {
        catalogs.invalidateAll()
        signers.invalidateAll()
        customers.invalidateAll()
    }
}
