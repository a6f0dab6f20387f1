import Foundation
import JSONRPC
import OfferCrypto
import OfferStore

/// OfferGate's JSON-RPC handler: authenticates connections, rate-limits tenants, and dispatches each request to its
/// method (a thin adapter over one application service, see `Services`); renders every failure in one place.
public final class Gateway: RPCHandler {
    public typealias Session = GatewaySession

    let database: OfferDatabase
    let sealer: KeySealer
    let options: GatewayOptions
    let logger: Logger
    let limiter: RateLimiter
    /// Summarises storms of -32050 failures (a failover) instead of logging each.
    let outages = OutageLog()
    /// One service per capability; the methods call these and nothing else.
    let services: Services
    /// Every Prometheus metric of this process (`/metrics`).
    public let metrics: GatewayMetrics
    public let stats: GatewayStats
    /// The method table, each method with its counts (found once here, not per answer).
    private let methods: [String: (spec: MethodSpec, counted: GatewayStats.Method)]
    /// `rpc.discover`'s answer, generated once from `allMethods`.
    let openRPCDocument: JSONValue

    /// Group commit of code redemptions (for stats and tests).
    var redemptions: RedemptionCoordinator { services.redemptions }

    public init(database: OfferDatabase, sealer: KeySealer, options: GatewayOptions, logger: Logger) {
        self.database = database
        self.sealer = sealer
        self.options = options
        self.logger = logger
        self.limiter = RateLimiter(rate: options.rateLimit, burst: max(options.rateBurst, options.rateLimit))
        let metrics = GatewayMetrics()
        self.metrics = metrics
        self.stats = GatewayStats(metrics: metrics)
        self.services = Services(database: database, sealer: sealer, options: options, stats: stats, logger: logger)
        metrics.attach(pool: { database.stats() }, caches: services.caches)
        var table: [String: (spec: MethodSpec, counted: GatewayStats.Method)] = [:]
        for spec in Self.allMethods {
            table[spec.name] = (spec, stats.method(spec.name))
        }
        self.methods = table
        self.openRPCDocument = OpenRPCDocument.make(methods: Self.allMethods, version: options.version)
    }

    static var allMethods: [MethodSpec] {
        SystemMethods.all + SessionMethods.all + TenantMethods.all + AppleMethods.all + KeyMethods.all
            + CatalogMethods.all
            + CustomerMethods.all + OfferMethods.all + CampaignMethods.all + CodeMethods.all + FunnelMethods.all
            + DiscoverMethods.all + RetentionMethods.all
    }

    public func makeSession(_ info: ConnectionInfo) -> GatewaySession {
        GatewaySession(connection: info)
    }

    public func handle(_ request: RPCRequest, session: GatewaySession, context: RPCContext) async
        -> Result<JSONValue, RPCError>
    {
        let started = ContinuousClock.now
        guard let entry = methods[request.method] else {
            let call = Call(request: request, session: session, tenant: nil, started: started, counted: stats.unknown)
            return finished(call, .failure(.methodNotFound(request.method)))
        }
        let method = entry.spec
        let principal = session.principal
        let call = Call(
            request: request, session: session, tenant: principal.tenantSlug, started: started, counted: entry.counted)
        do {
            try admit(method, principal: principal)
            let context = MethodContext(
                request: request, session: session, principal: principal, rpc: context, gateway: self)
            return finished(call, .success(try await method.run(context)))
        } catch {
            return finished(call, error: error)
        }
    }

    /// A request the method can answer without a task (`MethodSpec.now`): from memory (a ping, a remembered best
    /// offer), answered on the transport's thread with no hand-off to the cooperative pool and back; or later, from
    /// the thread that has the answer (a customer's first best offer, after the batched read of their records). The
    /// same checks, limits, stats and log as `handle`; nil when the method cannot (then `handle` answers it).
    public func answerNow(_ request: RPCRequest, session: GatewaySession, context: RPCContext) -> RPCNowAnswer? {
        guard let entry = methods[request.method], let now = entry.spec.now else { return nil }
        let started = ContinuousClock.now
        // Read once: the session's principal sits behind a lock, and every check of this request uses this copy.
        let principal = session.principal
        let call = Call(
            request: request, session: session, tenant: principal.tenantSlug, started: started, counted: entry.counted)
        do {
            let limited = try admit(entry.spec, principal: principal)
            let context = MethodContext(
                request: request, session: session, principal: principal, rpc: context, gateway: self)
            switch try now(context) {
            case nil:
                // `handle` takes the token again when it answers.
                if let limited { limiter.giveBack(tenant: limited) }
                return nil
            case .now(let value):
                return .answered(finished(call, .success(value), atOnce: true))
            case .later(let start):
                return .later { reply in
                    start { outcome in
                        switch outcome {
                        case .success(let value): reply(self.finished(call, .success(value)))
                        case .failure(let error): reply(self.finished(call, error: error))
                        }
                    }
                }
            }
        } catch {
            return .answered(finished(call, error: error, atOnce: true))
        }
    }

    /// Authorizes the call and takes the tenant's rate-limit token; the tenant whose token was taken, if one was.
    @discardableResult
    private func admit(_ method: MethodSpec, principal: Principal) throws -> String? {
        try authorize(method, principal: principal)
        guard method.access != .open, case .tenant(let tenant) = principal else { return nil }
        if case .limited(let wait) = limiter.take(tenant: tenant.slug) {
            throw GatewayError.rateLimited(retryAfterMs: wait)
        }
        return tenant.slug
    }

    /// One request as it is answered: what its stats and log line need, whichever path answers it.
    private struct Call: Sendable {
        let request: RPCRequest
        let session: GatewaySession
        /// The tenant the connection spoke for when the request arrived (nil: none, or no such method).
        let tenant: String?
        let started: ContinuousClock.Instant
        /// The method's counts (`stats.unknown` when there is no such method).
        let counted: GatewayStats.Method
    }

    private func finished(_ call: Call, error: any Error, atOnce: Bool = false) -> Result<JSONValue, RPCError> {
        let rendered = renderedError(error)
        return finished(call, .failure(rendered.rpc), detail: rendered.failureDetail, atOnce: atOnce)
    }

    /// Every answer's stats and log line, whichever path gave it.
    private func finished(
        _ call: Call, _ outcome: Result<JSONValue, RPCError>, detail: String? = nil, atOnce: Bool = false
    ) -> Result<JSONValue, RPCError> {
        let elapsed = ContinuousClock.now - call.started
        let micros = Int(elapsed / .microseconds(1))
        let code: Int? = if case .failure(let error) = outcome { error.code } else { nil }
        stats.record(call.counted, micros: micros, errorCode: code, atOnce: atOnce)
        log(
            request: call.request, session: call.session, tenant: call.tenant, micros: micros, code: code,
            detail: detail)
        return outcome
    }

    private func authorize(_ method: MethodSpec, principal: Principal) throws {
        switch (method.access, principal) {
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
        if let detail, code == GatewayError.unavailableCode {
            guard logFailureOfOutage(detail) else { return }
        } else if code != GatewayError.unavailableCode, let summary = outages.succeeded() {
            logger.warning(summary.message, summary.metadata)
        }
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

    /// For a -32050 failure with a detail (the database is unavailable): whether to log it in full now (see
    /// `OutageLog`); logs the count of those not logged since the last line first.
    func logFailureOfOutage(_ detail: String) -> Bool {
        let (log, summary) = outages.failed(detail: detail)
        if let summary { logger.warning(summary.message, summary.metadata) }
        return log
    }

    /// Drops cached data of one tenant (after a change here, or one the change feed reports from another process).
    public func invalidate(tenant: UUID) {
        services.caches.invalidate(tenant: tenant)
    }

    /// Drops the cached history of one customer (after subscriptions.record here or in another process).
    public func invalidate(tenant: UUID, customerId: String) {
        services.caches.invalidate(tenant: tenant, customerId: customerId)
    }

    /// Drops every cached value that can change (after the change feed may have missed events). With `keepingNew`
    /// false (the feed lost its connection) nothing new is kept until the next `invalidateAll()` either.
    public func invalidateAll(keepingNew: Bool = true) {
        services.caches.invalidateAll(keepingNew: keepingNew)
    }
}
