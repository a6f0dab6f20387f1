import Foundation
import OfferCrypto
import OfferStore

/// The application services of one gateway, one per capability. They own the orchestration (validation of domain
/// inputs, caches, the memo, domain calls, repositories, ledger writes); a JSON-RPC method (and an HTTP route)
/// decodes its params, calls one service, and encodes the result. Services may use one another (the customer
/// service is the one place a customer's history is derived); nothing else reaches a repository or a cache.
struct Services: Sendable {
    let tenants: TenantService
    let keys: KeyService
    let catalog: CatalogService
    let customers: CustomerService
    let offers: OfferService
    let codes: CodeService
    let campaigns: CampaignService
    let system: SystemService
    let apple: AppleDataService
    /// The offer funnel: paywall events and `analytics.funnel`.
    let funnel: FunnelService
    /// Retention Messaging: Apple's question at a subscriber's cancel page.
    let retention: RetentionService
    let caches: GatewayCaches
    /// Group commit of code redemptions (one owner per campaign).
    let redemptions: RedemptionCoordinator
    let clock: @Sendable () -> Date

    init(
        database: OfferDatabase, sealer: KeySealer, options: GatewayOptions, stats: GatewayStats, logger: Logger
    ) {
        let caches = GatewayCaches(database: database, sealer: sealer, options: options)
        let clock = options.clock
        let customers = CustomerService(
            repository: database.subscriptions, apple: database.appleData, caches: caches, clock: clock)
        let redemptions = RedemptionCoordinator(repository: database.campaigns, clock: clock)
        let claims = ClaimCoordinator(repository: database.campaigns, clock: clock)
        self.caches = caches
        self.redemptions = redemptions
        self.clock = clock
        self.customers = customers
        tenants = TenantService(
            repository: database.tenants, caches: caches,
            adminKeyDigest: options.adminKey.flatMap { $0.isEmpty ? nil : SHA256.hash($0) }, logger: logger)
        keys = KeyService(repository: database.signingKeys, sealer: sealer, caches: caches, logger: logger)
        catalog = CatalogService(repository: database.catalog, caches: caches, clock: clock, logger: logger)
        let offers = OfferService(
            customers: customers, caches: caches,
            ledger: LedgerWriter(ledger: database.signatures, metrics: stats.metrics),
            signatures: database.signatures, campaigns: database.campaigns,
            offered: OfferedCounter(
                repository: database.funnel, interval: options.funnelFlushInterval, logger: logger),
            clock: clock, nonce: options.nonce, signed: stats.metrics.signatures)
        self.offers = offers
        funnel = FunnelService(repository: database.funnel, campaigns: database.campaigns, caches: caches, clock: clock)
        codes = CodeService(
            repository: database.campaigns, customers: customers, caches: caches, redemptions: redemptions,
            claims: claims, offers: offers, clock: clock, outcomes: stats.metrics.redemptions)
        campaigns = CampaignService(repository: database.campaigns, caches: caches, clock: clock, logger: logger)
        system = SystemService(database: database, caches: caches, stats: stats, version: options.version)
        apple = AppleDataService(
            repository: database.appleData, caches: caches,
            verifier: options.appleVerifier ?? AppleDataService.builtInVerifier, ingested: stats.metrics.appleIngested)
        retention = RetentionService(
            retention: database.retention, links: RetentionService.links(database.retention), caches: caches,
            apple: apple, offers: offers,
            metrics: stats.metrics, clock: clock, logger: logger)
    }
}
