import Foundation
import OfferCrypto
import OfferDomain
import OfferStore
import Synchronization

/// A cache with invalidation that cannot lose a race: a value loaded while an invalidation of its key (or of
/// everything) happened is returned to the callers that waited for it but not kept, so the next caller loads afresh.
/// Loads are shared: callers that miss the same key while its load is in flight wait for that one load instead of
/// starting their own (no herd of identical queries after a restart or an invalidation). With a capacity, the
/// oldest entries are dropped first once it is reached.
final class KeyedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// A load in flight, shared by every caller that missed its key since it started.
    private struct Flight {
        let id: UInt64
        let task: Task<Value, any Error>
    }

    private struct State {
        var values: [Key: Value] = [:]
        /// The current load of each key being loaded. An invalidation removes it: its result then goes to the
        /// callers already waiting for it, but is not kept, and later callers start a new load.
        var flights: [Key: Flight] = [:]
        var nextFlight: UInt64 = 0
        /// Insertion order, for eviction when a capacity is set (may hold keys already gone).
        var order: [Key] = []
        var orderStart = 0
    }

    private enum Lookup {
        case cached(Value)
        case wait(Task<Value, any Error>)
    }

    private let state = Mutex(State())
    private let capacity: Int?

    init(capacity: Int? = nil) {
        self.capacity = capacity
    }

    /// The cached value, or the result of `load` (shared with concurrent callers of the same key).
    func value(for key: Key, load: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let lookup: Lookup = state.withLock { s in
            if let cached = s.values[key] { return .cached(cached) }
            if let flight = s.flights[key] { return .wait(flight.task) }
            s.nextFlight += 1
            let id = s.nextFlight
            // The task records its result under the lock, so it cannot finish before its flight is registered.
            let task = Task { try await self.fly(key, id, load) }
            s.flights[key] = Flight(id: id, task: task)
            return .wait(task)
        }
        switch lookup {
        case .cached(let value): return value
        case .wait(let task): return try await task.value
        }
    }

    private func fly(_ key: Key, _ id: UInt64, _ load: @Sendable () async throws -> Value) async throws -> Value {
        do {
            let loaded = try await load()
            state.withLock { s in
                guard s.flights[key]?.id == id else { return }  // invalidated meanwhile: not kept
                s.flights[key] = nil
                store(&s, key, loaded)
            }
            return loaded
        } catch {
            state.withLock { s in
                if s.flights[key]?.id == id { s.flights[key] = nil }
            }
            throw error
        }
    }

    private func store(_ s: inout State, _ key: Key, _ value: Value) {
        guard s.values.updateValue(value, forKey: key) == nil, let capacity else { return }
        s.order.append(key)
        while s.values.count > capacity, s.orderStart < s.order.count {
            s.values[s.order[s.orderStart]] = nil
            s.orderStart += 1
        }
        if s.orderStart > 4_096 && s.orderStart * 2 > s.order.count {
            s.order.removeFirst(s.orderStart)
            s.orderStart = 0
        }
    }

    func invalidate(_ key: Key) {
        state.withLock { s in
            s.values[key] = nil
            s.flights[key] = nil
        }
    }

    func invalidateAll() {
        state.withLock { s in
            s.values.removeAll()
            s.flights.removeAll()
            s.order.removeAll()
            s.orderStart = 0
        }
    }

    var count: Int { state.withLock { $0.values.count } }

    /// The value cached for `key`, if any (never loads).
    func cached(_ key: Key) -> Value? { state.withLock { $0.values[key] } }

    /// Caches a value computed elsewhere. Unlike a load, it is kept even if its key was invalidated meanwhile:
    /// only for values that carry their own validity (see `DecisionMemo`).
    func put(_ value: Value, for key: Key) { state.withLock { s in store(&s, key, value) } }
}

/// Per-tenant caches have one entry per tenant and no capacity.
typealias TenantCache<Value: Sendable> = KeyedCache<UUID, Value>

/// A customer of a tenant.
struct CustomerKey: Hashable, Sendable {
    let tenant: UUID
    let customerId: String
}

/// One customer's recorded transactions as loaded at one time. A reference: whoever holds one can tell a reload
/// (a new snapshot) from the same data (`===`), which is how `DecisionMemo` knows a decision's inputs are current.
final class TransactionsSnapshot: Sendable {
    let transactions: [Transaction]

    init(_ transactions: [Transaction]) {
        self.transactions = transactions
    }
}

/// Customers' recorded transactions, served from memory (bounded; oldest dropped first), dropped on every change
/// to a customer's transactions, here or in another process (NOTIFY `offergate_customer`).
final class CustomerCache: Sendable {
    private let repository: SubscriptionRepository
    private let cache: KeyedCache<CustomerKey, TransactionsSnapshot>

    init(repository: SubscriptionRepository, capacity: Int) {
        self.repository = repository
        self.cache = KeyedCache(capacity: max(capacity, 1))
    }

    func snapshot(_ tenant: UUID, _ customerId: String) async throws -> TransactionsSnapshot {
        let repository = repository
        return try await cache.value(for: CustomerKey(tenant: tenant, customerId: customerId)) {
            TransactionsSnapshot(try await repository.transactions(tenant: tenant, customerId: customerId))
        }
    }

    /// The snapshot in memory, if any (no database access).
    func cachedSnapshot(_ tenant: UUID, _ customerId: String) -> TransactionsSnapshot? {
        cache.cached(CustomerKey(tenant: tenant, customerId: customerId))
    }

    func invalidate(_ tenant: UUID, _ customerId: String) {
        cache.invalidate(CustomerKey(tenant: tenant, customerId: customerId))
    }

    func invalidateAll() { cache.invalidateAll() }
}

/// A tenant's catalog as loaded at one time (a reference, like ``TransactionsSnapshot``), with its best-offer
/// ranking computed once per load.
final class CatalogSnapshot: Sendable {
    let ranked: RankedCatalog
    var catalog: Catalog { ranked.catalog }

    init(_ catalog: Catalog) {
        self.ranked = RankedCatalog(catalog)
    }
}

/// Each tenant's catalog, served from memory.
final class CatalogCache: Sendable {
    private let repository: CatalogRepository
    private let cache = TenantCache<CatalogSnapshot>()

    init(repository: CatalogRepository) {
        self.repository = repository
    }

    func snapshot(_ tenant: UUID) async throws -> CatalogSnapshot {
        let repository = repository
        return try await cache.value(for: tenant) { CatalogSnapshot(try await repository.load(tenant: tenant)) }
    }

    /// The snapshot in memory, if any (no database access).
    func cachedSnapshot(_ tenant: UUID) -> CatalogSnapshot? { cache.cached(tenant) }

    func catalog(_ tenant: UUID) async throws -> Catalog { try await snapshot(tenant).catalog }

    func invalidate(_ tenant: UUID) { cache.invalidate(tenant) }
    func invalidateAll() { cache.invalidateAll() }
    var count: Int { cache.count }
}

/// A tenant's active signing key, unsealed and parsed once.
struct ActiveSigner: Sendable {
    let keyId: String
    let issuerId: String?
    let key: SigningKey
}

/// Each tenant's active signer (or the fact that there is none), served from memory.
final class SignerCache: Sendable {
    private let repository: SigningKeyRepository
    private let sealer: KeySealer
    private let cache = TenantCache<ActiveSigner?>()

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

    func invalidate(_ tenant: UUID) { cache.invalidate(tenant) }
    func invalidateAll() { cache.invalidateAll() }
}

/// Tenants by slug. Tenants are never renamed or deleted, so found tenants are kept.
final class TenantDirectory: Sendable {
    private let repository: TenantRepository
    private let bySlug = Mutex<[String: TenantRecord]>([:])

    init(repository: TenantRepository) {
        self.repository = repository
    }

    func find(slug: String) async throws -> TenantRecord {
        if let known = bySlug.withLock({ $0[slug] }) { return known }
        // Only a well-formed slug goes to the database: libpq would cut "acme\0x" down to "acme".
        guard TenantRecord.isWellFormed(slug: slug), let tenant = try await repository.find(slug: slug) else {
            throw GatewayError.notFound("no tenant '\(Self.printable(slug))'", reason: "unknown_tenant")
        }
        bySlug.withLock { $0[slug] = tenant }
        return tenant
    }

    /// A client-sent name, shortened and stripped of control characters, for messages.
    static func printable(_ text: String) -> String {
        let cleaned = String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(64).map(Character.init))
        return text.unicodeScalars.count > 64 ? cleaned + "…" : cleaned
    }
}
