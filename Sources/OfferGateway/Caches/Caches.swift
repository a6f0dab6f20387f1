import Foundation
import OfferCrypto
import OfferDomain
import OfferStore
import Synchronization

// The caches of one gateway process, each a `KeyedCache` use. `GatewayCaches` holds them all and is the one place
// that drops entries when the store's change feed reports a change (here or in another process).

/// Per-tenant caches have one entry per tenant and no capacity.
typealias TenantCache<Value: Sendable> = KeyedCache<UUID, Value>

/// A customer of a tenant.
struct CustomerKey: Hashable, Sendable {
    let tenant: UUID
    let customerId: String
}

/// Everything stored about one customer (recorded transactions and Apple's verified data) as loaded at one time.
/// A reference: whoever holds one can tell a reload (a new snapshot) from the same data (`===`), and whether it is
/// still the one `CustomerCache` keeps (`residency`), which is how `DecisionMemo` knows a decision's inputs are
/// current.
final class TransactionsSnapshot: Sendable {
    let records: CustomerRecords
    /// Whether `CustomerCache` keeps this very snapshot now.
    let residency = Residency()
    /// The last history derived from these records, once a second one was asked for (see ``derived(over:at:)``).
    private let lastDerived = Mutex(Derivations.none)

    private enum Derivations: Sendable {
        case none
        /// Derived once, not kept: most customers ask once (a first question), and a history kept for each of
        /// them would add ~600 bytes to every cached customer (B4c's 80,000: +47 MB of RSS).
        case once
        case kept(LastDerived)
    }

    /// A reference, so that a snapshot that never keeps one (most) carries one word for it, not the whole value.
    private final class LastDerived: Sendable {
        /// Weak: a customer's snapshot must not keep a replaced catalog in memory (a dropped catalog is a miss).
        weak let catalog: CatalogSnapshot?
        let madeAt: Date
        let derived: DerivedHistory

        init(catalog: CatalogSnapshot, madeAt: Date, derived: DerivedHistory) {
            self.catalog = catalog
            self.madeAt = madeAt
            self.derived = derived
        }
    }

    init(_ records: CustomerRecords) {
        self.records = records
    }

    /// The customer's history over `catalog` at `at`: the one derived last over these records, when it was derived
    /// over this very catalog snapshot at a `madeAt <= at` before its horizon, else a new derivation (kept in its
    /// place from the second derivation on). Exact, not approximate: no history changes between an instant and its
    /// horizon (``DecisionHorizon``), so a customer asked about for every product of a paywall is derived twice,
    /// not once per product, and the horizon is found as often.
    func derived(over catalog: CatalogSnapshot, at: Date) -> DerivedHistory {
        let state = lastDerived.withLock { $0 }
        if case .kept(let last) = state, last.catalog === catalog, last.madeAt <= at,
            last.derived.until.map({ at < $0 }) ?? true
        {
            var history = last.derived.history
            history.at = at
            return DerivedHistory(history: history, until: last.derived.until)
        }
        let derived = Self.derive(records, over: catalog, at: at)
        lastDerived.withLock { state in
            if case .none = state {
                state = .once
            } else {
                state = .kept(LastDerived(catalog: catalog, madeAt: at, derived: derived))
            }
        }
        return derived
    }

    /// A new derivation, not remembered (``CustomerService/history(catalog:transactions:at:remembered:)`` chooses
    /// between this and ``derived(over:at:)``).
    static func derive(_ records: CustomerRecords, over catalog: CatalogSnapshot, at: Date) -> DerivedHistory {
        let effective = records.effective(catalog.policy)
        return DerivedHistory(
            history: CustomerHistory.derive(effective: effective, catalog: catalog.catalog, at: at),
            until: DecisionHorizon.next(after: at, transactions: effective.transactions, catalog: catalog.catalog))
    }
}

/// A customer's history at one instant, and the first later instant at which it (or any decision over it) may
/// differ (nil: never).
struct DerivedHistory: Sendable {
    let history: CustomerHistory
    let until: Date?
}

/// Customers' records, served from memory (bounded; oldest dropped first), dropped on every change to a customer's
/// recorded transactions or Apple data, here or in another process (NOTIFY `offergate_customer`). A customer with
/// nothing stored is remembered too (an empty snapshot), so asking again about an unknown customer costs no query
/// until a change to that customer is announced.
final class CustomerCache: Sendable {
    private let loader: CustomerRecordsLoader
    private let cache: KeyedCache<CustomerKey, TransactionsSnapshot>
    var lookupCount: CacheLookupCount { cache.lookupCount("customers") }
    func recordHit() { cache.recordHit() }
    /// The batched reads of records made so far, and the customers they read (÷: how well misses coalesce).
    var reads: (roundTrips: Int, keys: Int) { loader.reads }

    init(repository: CustomerRecordsRepository, capacity: Int) {
        self.loader = CustomerRecordsLoader(repository: repository)
        self.cache = KeyedCache(capacity: max(capacity, 1), residency: { $0.residency.set($1) })
    }

    func snapshot(_ tenant: UUID, _ customerId: String) async throws -> TransactionsSnapshot {
        try await withCheckedThrowingContinuation { continuation in
            snapshot(tenant, customerId) { continuation.resume(with: $0) }
        }
    }

    /// `snapshot` to `reply`: at once when in memory, else after the batched read that loads it, on the thread that
    /// finished that read (no task per caller).
    func snapshot(
        _ tenant: UUID, _ customerId: String, reply: @escaping KeyedCache<CustomerKey, TransactionsSnapshot>.Reply
    ) {
        let key = CustomerKey(tenant: tenant, customerId: customerId)
        let loader = loader
        cache.value(
            for: key,
            start: { landed in loader.records(key) { landed($0.map(TransactionsSnapshot.init)) } },
            reply: reply)
    }

    /// The snapshot in memory, if any (no database access).
    func cachedSnapshot(_ tenant: UUID, _ customerId: String) -> TransactionsSnapshot? {
        cache.cached(CustomerKey(tenant: tenant, customerId: customerId))
    }

    func invalidate(_ tenant: UUID, _ customerId: String) {
        cache.invalidate(CustomerKey(tenant: tenant, customerId: customerId))
    }

    func invalidateAll(keepingNew: Bool = true) { cache.invalidateAll(keepingNew: keepingNew) }
}

/// A tenant's catalog as loaded at one time (a reference, like ``TransactionsSnapshot``), with its best-offer
/// ranking computed once per load, and the tenant's settings as stored at that time (`tenants.update` announces
/// itself like a catalog change, so a snapshot's settings are as current as its catalog).
final class CatalogSnapshot: Sendable {
    let ranked: RankedCatalog
    /// Whether `CatalogCache` keeps this very snapshot now.
    let residency = Residency()
    /// The tenant as stored when the catalog was loaded (nil only for a tenant that does not exist).
    let tenant: TenantRecord?
    var catalog: Catalog { ranked.catalog }

    init(_ catalog: Catalog, tenant: TenantRecord? = nil) {
        self.ranked = RankedCatalog(catalog)
        self.tenant = tenant
    }

    /// Which non-Production environments decisions may use for this tenant.
    var policy: EnvironmentPolicy {
        EnvironmentPolicy(allowSandbox: tenant?.allowSandbox ?? false, allowXcode: tenant?.allowXcode ?? false)
    }
}

/// Each tenant's catalog (and current settings), served from memory.
final class CatalogCache: Sendable {
    private let repository: CatalogRepository
    private let tenants: TenantRepository
    private let cache = TenantCache<CatalogSnapshot>(residency: { $0.residency.set($1) })
    var lookupCount: CacheLookupCount { cache.lookupCount("catalogs") }
    func recordHit() { cache.recordHit() }

    init(repository: CatalogRepository, tenants: TenantRepository) {
        self.repository = repository
        self.tenants = tenants
    }

    func snapshot(_ tenant: UUID) async throws -> CatalogSnapshot {
        let (repository, tenants) = (repository, tenants)
        return try await cache.value(for: tenant) {
            // The settings are read first: a change between the two reads invalidates this entry again.
            let record = try await tenants.find(id: tenant)
            return CatalogSnapshot(try await repository.load(tenant: tenant), tenant: record)
        }
    }

    /// The snapshot in memory, if any (no database access).
    func cachedSnapshot(_ tenant: UUID) -> CatalogSnapshot? { cache.cached(tenant) }

    func catalog(_ tenant: UUID) async throws -> Catalog { try await snapshot(tenant).catalog }

    func invalidate(_ tenant: UUID) { cache.invalidate(tenant) }
    func invalidateAll(keepingNew: Bool = true) { cache.invalidateAll(keepingNew: keepingNew) }
    var count: Int { cache.count }
}

/// A tenant's active signing key, unsealed and parsed once.
struct ActiveSigner: Sendable {
    let keyId: String
    let issuerId: String?
    let key: SigningKey
    private let made = MadeSigner()

    /// The last signer made, for its app: a signer's JWS header and V1 prefix are built when it is made, and a
    /// tenant signs for one app, so every signature after the first reuses them (6 allocations fewer each).
    private final class MadeSigner: Sendable {
        let last = Mutex<OfferSigner?>(nil)
    }

    /// The signer for one app (a value over the shared, parsed key).
    func offerSigner(bundleId: String) -> OfferSigner {
        made.last.withLock { last in
            if let last, last.bundleId == bundleId { return last }
            let signer = OfferSigner(key: key, keyId: keyId, issuerId: issuerId ?? "", bundleId: bundleId)
            last = signer
            return signer
        }
    }
}

/// Each tenant's active signer (or the fact that there is none), served from memory.
final class SignerCache: Sendable {
    private let repository: SigningKeyRepository
    private let sealer: KeySealer
    private let cache = TenantCache<ActiveSigner?>()
    var lookupCount: CacheLookupCount { cache.lookupCount("signers") }

    init(repository: SigningKeyRepository, sealer: KeySealer) {
        self.repository = repository
        self.sealer = sealer
    }

    func signer(_ tenant: UUID) async throws -> ActiveSigner? {
        let (repository, sealer) = (repository, sealer)
        return try await cache.value(for: tenant) {
            guard let record = try await repository.active(tenant: tenant) else { return nil }
            do {
                let sealed = try SealedKey(bytes: record.sealedPrivateKey)
                let key = try sealer.openSigningKey(sealed, tenant: tenant.uuidString.lowercased(), keyId: record.keyId)
                return ActiveSigner(keyId: record.keyId, issuerId: record.issuerId, key: key)
            } catch {
                throw GatewayError.internal("cannot open signing key \(record.keyId): \(error)")
            }
        }
    }

    /// The active signer when it is in memory, counted as a hit; nil when it is not loaded or the tenant has none
    /// (no database access).
    func cachedSigner(_ tenant: UUID) -> ActiveSigner? {
        guard case let signer?? = cache.cached(tenant) else { return nil }
        cache.recordHit()
        return signer
    }

    func invalidate(_ tenant: UUID) { cache.invalidate(tenant) }
    func invalidateAll(keepingNew: Bool = true) { cache.invalidateAll(keepingNew: keepingNew) }
}

/// Tenants by slug. Tenants are never renamed or deleted, so found tenants are kept until their settings change
/// (`tenants.update`, announced on the change feed as a catalog change of the tenant).
final class TenantDirectory: Sendable {
    private let repository: TenantRepository
    /// By slug. A `KeyedCache`, so a change announced while a tenant is being loaded is not lost.
    private let bySlug = KeyedCache<String, TenantRecord>()
    var lookupCount: CacheLookupCount { bySlug.lookupCount("tenants") }

    init(repository: TenantRepository) {
        self.repository = repository
    }

    func find(slug: String) async throws -> TenantRecord {
        let repository = repository
        return try await bySlug.value(for: slug) {
            // Only a well-formed slug goes to the database: libpq would cut "acme\0x" down to "acme".
            guard TenantRecord.isWellFormed(slug: slug), let tenant = try await repository.find(slug: slug) else {
                throw GatewayError.notFound("no tenant '\(Validate.printable(slug))'", reason: "unknown_tenant")
            }
            return tenant
        }
    }

    /// Forgets a tenant (its settings changed, here or in another process). Changes are rare and carry the id, not
    /// the slug, so every tenant is forgotten: the next request of each reloads its own.
    func invalidate(_ tenant: UUID) {
        bySlug.invalidateAll()
    }

    func invalidateAll(keepingNew: Bool = true) { bySlug.invalidateAll(keepingNew: keepingNew) }
}

/// Live tenant API keys by their lookup (the public middle of `og_<lookup>_<secret>`): the tenant each speaks for and
/// the key's SHA-256, never the key. A request authenticated on its own (HTTP's `Authorization: Bearer`) then costs
/// no query once its key was seen, and still compares the presented key's hash in constant time. Only keys found
/// live are kept (an unknown or revoked lookup is asked again each time, so made-up keys cannot fill the cache);
/// any change to a tenant's keys or settings, here or in another process (announced like a catalog change,
/// migration 0013), forgets every key, as `TenantDirectory` forgets every tenant.
final class ApiKeyDirectory: Sendable {
    struct Entry: Sendable {
        /// The tenant as stored when the key was read (its settings are as current as `TenantDirectory`'s).
        let tenant: TenantRecord
        /// SHA-256 of the whole key.
        let hash: [UInt8]
    }

    private let repository: TenantRepository
    private let byLookup = KeyedCache<String, Entry>(capacity: 10_000)
    var lookupCount: CacheLookupCount { byLookup.lookupCount("api_keys") }

    init(repository: TenantRepository) {
        self.repository = repository
    }

    /// The live key with this lookup, from memory or the database; nil when there is none.
    func find(lookup: String) async throws -> Entry? {
        let repository = repository
        do {
            return try await byLookup.value(for: lookup) {
                guard let found = try await repository.findApiKey(lookup: lookup) else { throw NoLiveKey() }
                return Entry(tenant: found.tenant, hash: found.hash)
            }
        } catch is NoLiveKey {
            return nil
        }
    }

    /// The live key with this lookup when it is in memory (counted as a hit), without waiting; nil otherwise.
    func cached(lookup: String) -> Entry? {
        guard let entry = byLookup.cached(lookup) else { return nil }
        byLookup.recordHit()
        return entry
    }

    /// A load's outcome for a lookup with no live key: thrown so that `KeyedCache` does not keep it.
    private struct NoLiveKey: Error {}

    func invalidateAll(keepingNew: Bool = true) { byLookup.invalidateAll(keepingNew: keepingNew) }
}

/// The campaign behind each custom (vanity) code. A code never changes campaign, and the parts of a campaign that
/// can change, its deactivation and counters, are re-read under lock by every redemption batch; one-time codes are
/// never kept (each is redeemed once, so a cached lookup would rarely be asked again).
final class CustomCodeCache: Sendable {
    private struct Key: Hashable, Sendable {
        let tenant: UUID
        let code: String
    }

    private let cache = KeyedCache<Key, CodeLookup>(capacity: 10_000)
    var lookupCount: CacheLookupCount { cache.lookupCount("custom_codes") }

    /// The cached lookup, else the repository's (kept when it is a custom code).
    func lookup(tenant: UUID, code: String, load: @Sendable () async throws -> CodeLookup?) async throws
        -> CodeLookup?
    {
        if let cached = cachedLookup(tenant: tenant, code: code) {
            cache.recordHit()
            return cached
        }
        cache.recordMiss()
        let found = try await load()
        if let found, !found.oneTime { cache.put(found, for: Key(tenant: tenant, code: code)) }
        return found
    }

    /// The lookup if it is in memory, else nil; not counted (the caller that uses it calls `recordHit()`).
    func cachedLookup(tenant: UUID, code: String) -> CodeLookup? { cache.cached(Key(tenant: tenant, code: code)) }

    func recordHit() { cache.recordHit() }

    func invalidateAll(keepingNew: Bool = true) { cache.invalidateAll(keepingNew: keepingNew) }
}

/// appleOneTime campaigns by id, for `codes.claim`. Like `CustomCodeCache`: what a claim reads before its batch
/// (kind, offer, eligibility) never changes, and what can change (deactivation, counters) is re-read under lock by
/// every claim batch. Campaigns of other kinds and unknown ids are not kept.
final class ClaimedCampaignCache: Sendable {
    private struct Key: Hashable, Sendable {
        let tenant: UUID
        let campaignId: String
    }

    private let cache = KeyedCache<Key, CampaignRecord>(capacity: 10_000)

    func campaign(tenant: UUID, campaignId: String, load: @Sendable () async throws -> CampaignRecord?) async throws
        -> CampaignRecord?
    {
        let key = Key(tenant: tenant, campaignId: campaignId)
        if let cached = cache.cached(key) { return cached }
        let found = try await load()
        if let found, found.campaign.kind.isClaimed { cache.put(found, for: key) }
        return found
    }

    func invalidateAll(keepingNew: Bool = true) { cache.invalidateAll(keepingNew: keepingNew) }
}

/// Every cache of one gateway process, and the one place that drops their entries after a change.
final class GatewayCaches: Sendable {
    let tenants: TenantDirectory
    let apiKeys: ApiKeyDirectory
    let catalogs: CatalogCache
    let signers: SignerCache
    let customers: CustomerCache
    /// Remembered `offers.best` answers, exact until their inputs change or their horizon passes.
    let decisions: DecisionMemo
    let displayTexts = DisplayTextCache()
    let customCodes = CustomCodeCache()
    let claimedCampaigns = ClaimedCampaignCache()
    /// Retention Messaging settings per tenant.
    let retention: RetentionSettingsCache

    init(database: OfferDatabase, sealer: KeySealer, options: GatewayOptions) {
        tenants = TenantDirectory(repository: database.tenants)
        apiKeys = ApiKeyDirectory(repository: database.tenants)
        catalogs = CatalogCache(repository: database.catalog, tenants: database.tenants)
        signers = SignerCache(repository: database.signingKeys, sealer: sealer)
        customers = CustomerCache(repository: database.customerRecords, capacity: options.customerCacheSize)
        decisions = DecisionMemo(capacity: options.decisionMemoSize)
        retention = RetentionSettingsCache(repository: database.retention)
    }

    /// The tenant's catalog and the customer's transactions, from memory when both are there (the usual case: no
    /// child tasks), else loaded side by side.
    func inputs(tenant: UUID, customerId: String) async throws -> (CatalogSnapshot, TransactionsSnapshot) {
        if let cached = cachedInputs(tenant: tenant, customerId: customerId) {
            recordInputsHit()
            return cached
        }
        async let catalog = catalogs.snapshot(tenant)
        async let transactions = customers.snapshot(tenant, customerId)
        return try await (catalog, transactions)
    }

    /// Both inputs of a decision when both are in memory (no hit counted: `recordInputsHit` once they are used).
    func cachedInputs(tenant: UUID, customerId: String) -> (CatalogSnapshot, TransactionsSnapshot)? {
        guard let catalog = catalogs.cachedSnapshot(tenant),
            let transactions = customers.cachedSnapshot(tenant, customerId)
        else { return nil }
        return (catalog, transactions)
    }

    func recordInputsHit() {
        catalogs.recordHit()
        customers.recordHit()
    }

    /// Every cache's hits, misses and entries (for the metrics).
    var lookupCounts: [CacheLookupCount] {
        [
            tenants.lookupCount, apiKeys.lookupCount, catalogs.lookupCount, signers.lookupCount,
            customers.lookupCount, decisions.lookupCount, customCodes.lookupCount,
        ]
    }

    /// Drops one tenant's catalog, settings, signer and API keys (remembered answers over the old catalog are never
    /// served again). Keys are kept by lookup, not by tenant, and change rarely: every tenant's are dropped.
    func invalidate(tenant: UUID) {
        tenants.invalidate(tenant)
        apiKeys.invalidateAll()
        catalogs.invalidate(tenant)
        signers.invalidate(tenant)
        retention.invalidate(tenant)
    }

    /// Drops one customer's transactions.
    func invalidate(tenant: UUID, customerId: String) {
        customers.invalidate(tenant, customerId)
    }

    /// Drops everything that can change (after the change feed may have missed events). With `keepingNew` false
    /// (the feed lost its connection) nothing is kept from then on either, until the next `invalidateAll()`: while
    /// no announcement can reach this process, no cached value is provably current, so every request reads the
    /// database (and gets -32050 while it is unreachable). Remembered `offers.best` answers need the very snapshots
    /// they were made from, so none is served meanwhile either.
    func invalidateAll(keepingNew: Bool = true) {
        tenants.invalidateAll(keepingNew: keepingNew)
        apiKeys.invalidateAll(keepingNew: keepingNew)
        catalogs.invalidateAll(keepingNew: keepingNew)
        signers.invalidateAll(keepingNew: keepingNew)
        customers.invalidateAll(keepingNew: keepingNew)
        customCodes.invalidateAll(keepingNew: keepingNew)
        claimedCampaigns.invalidateAll(keepingNew: keepingNew)
        retention.invalidateAll(keepingNew: keepingNew)
    }
}
