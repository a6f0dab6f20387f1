import Foundation
import Synchronization

/// One cache's counters (for `offergate_cache_*`).
struct CacheLookupCount: Sendable {
    let cache: String
    let hits: Int
    let misses: Int
    let entries: Int
}

/// A cache with invalidation that cannot lose a race: a value loaded while an invalidation of its key (or of
/// everything) happened is returned to the callers that waited for it but not kept, so the next caller loads afresh.
/// Loads are shared: callers that miss the same key while its load is in flight wait for that one load instead of
/// starting their own (no herd of identical queries after a restart or an invalidation). With a capacity, the
/// oldest entries are dropped first once it is reached, and the table is sized for it at the start: a dictionary
/// grows by rehashing every entry under the cache's lock, ~57 ms at 98,304 entries, and every lookup (the event
/// loop's included) waited that long (docs/perf/README.md, section 2, session 33).
///
/// With `residency`, the cache says of every value when it becomes the one kept for its key and when it stops being
/// it (replaced, invalidated, dropped for capacity or by `invalidateAll`), under its lock, so a value can carry
/// whether it is the cache's current one (``Residency``) and be checked without a lookup.
final class KeyedCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// Receives a lookup's outcome, once, on whichever thread has it.
    typealias Reply = @Sendable (Result<Value, any Error>) -> Void

    /// A kept value and its place in the insertion order.
    private struct Kept {
        var value: Value
        var serial: UInt64
    }

    /// A key in the insertion order, with the serial it was kept under.
    private typealias OrderEntry = (key: Key, serial: UInt64)

    private struct State {
        var values: [Key: Kept] = [:]
        /// The current load of each key being loaded, by flight id. An invalidation removes it: its result then goes
        /// to the callers already waiting for it (`waiting`), but is not kept, and later callers start a new load.
        var flights: [Key: UInt64] = [:]
        /// The callers of each load in flight, by flight id (kept across an invalidation of its key).
        var waiting: [UInt64: [Reply]] = [:]
        var nextFlight: UInt64 = 0
        /// Insertion order, for eviction when a capacity is set: each key with the serial it was kept under. An
        /// entry whose key was since dropped or kept again (under a new serial) is stale and skipped.
        var order = ChunkedQueue<OrderEntry>()
        var nextSerial: UInt64 = 0
        /// False between `invalidateAll(keepingNew: false)` and the next `invalidateAll()`: loads are still shared
        /// but nothing is kept (nothing loaded meanwhile is provably current).
        var keeping = true

        /// Whether `entry` is its key's current place in the order (not left by a key dropped or kept again since).
        func isCurrent(_ entry: OrderEntry) -> Bool { values[entry.key]?.serial == entry.serial }
    }

    private enum Lookup {
        case cached(Value)
        case waiting
        case start(UInt64)
    }

    private let state = Mutex(State())
    private let capacity: Int?
    /// Sets a value's ``Residency`` (true: now kept), for caches of values that carry one.
    private let residency: (@Sendable (Value, _ kept: Bool) -> Void)?
    /// Lookups answered from memory and loads, for the metrics (`offergate_cache_hits_total`/`_misses_total`).
    let hits = Atomic<Int>(0)
    let misses = Atomic<Int>(0)

    init(capacity: Int? = nil, residency: (@Sendable (Value, _ kept: Bool) -> Void)? = nil) {
        self.capacity = capacity
        self.residency = residency
        // Reserved address space: pages are touched as entries land in them, so a cache that stays small stays small
        // in memory, and a full one takes what it would have grown to anyway.
        if let capacity { state.withLock { $0.values.reserveCapacity(capacity) } }
    }

    /// The cached value, or the result of `load` (shared with concurrent callers of the same key). The load runs on
    /// a task of its own, which cancelling a caller does not cancel: it lands for every caller that waits for it.
    func value(for key: Key, load: @escaping @Sendable () async throws -> Value) async throws -> Value {
        if let cached = cached(key) {
            hits.add(1, ordering: .relaxed)
            return cached
        }
        return try await withCheckedThrowingContinuation { continuation in
            value(
                for: key,
                start: { landed in
                    Task {
                        do { landed(.success(try await load())) } catch { landed(.failure(error)) }
                    }
                },
                reply: { continuation.resume(with: $0) })
        }
    }

    /// `value(for:load:)` without a task: `reply` gets the cached value at once (on the caller's thread), else the
    /// outcome of the key's load in flight, or of the load `start` begins now (its callback, called once on any
    /// thread, lands it). Nothing is awaited, so a caller on a transport's thread can wait for a database read
    /// without a task of its own.
    func value(for key: Key, start: (_ landed: @escaping Reply) -> Void, reply: @escaping Reply) {
        let lookup: Lookup = state.withLock { s in
            if let cached = s.values[key] { return .cached(cached.value) }
            if let id = s.flights[key] {
                s.waiting[id, default: []].append(reply)
                return .waiting
            }
            s.nextFlight += 1
            let id = s.nextFlight
            s.flights[key] = id
            s.waiting[id] = [reply]
            return .start(id)
        }
        switch lookup {
        case .cached(let value):
            hits.add(1, ordering: .relaxed)
            reply(.success(value))
        case .waiting:
            misses.add(1, ordering: .relaxed)
        case .start(let id):
            misses.add(1, ordering: .relaxed)
            start { self.land(key, id, $0) }
        }
    }

    /// A load finished: kept unless its key was invalidated meanwhile, and given to every caller that waited for it.
    private func land(_ key: Key, _ id: UInt64, _ result: Result<Value, any Error>) {
        let replies = state.withLock { s -> [Reply] in
            if s.flights[key] == id {
                s.flights[key] = nil
                if s.keeping, case .success(let loaded) = result { store(&s, key, loaded) }
            }
            return s.waiting.removeValue(forKey: id) ?? []
        }
        for reply in replies { reply(result) }
    }

    /// Keeps `value` for `key`. A value replaced under its key keeps the old one's place in the insertion order.
    private func store(_ s: inout State, _ key: Key, _ value: Value) {
        // One lookup for a new key (the common case while a cache fills); a replaced value's serial is put back.
        s.nextSerial &+= 1
        let replaced = s.values.updateValue(Kept(value: value, serial: s.nextSerial), forKey: key)
        left(replaced?.value)
        residency?(value, true)
        if let replaced {
            s.values[key]?.serial = replaced.serial
            return
        }
        guard let capacity else { return }
        s.order.append((key, s.nextSerial))
        while s.values.count > capacity, let oldest = s.order.popFirst() {
            if s.isCurrent(oldest) { left(s.values.removeValue(forKey: oldest.key)?.value) }
        }
        // Stale entries (keys invalidated, or invalidated and kept again) are popped when the front reaches them; while
        // the cache is under its capacity nothing pops. So, while more than a chunk of entries beyond the kept ones is
        // queued, each insertion also looks at the three at the front: a stale one is dropped, a kept one goes to the
        // back. O(1) per insertion and no pass over the queue under the lock (one took ~170 ms at 100,000 keys); the
        // queue stays within about one and a half times the kept entries plus a chunk, and the order is the insertion
        // order except for entries moved back while stale ones were being cleared.
        var looked = 0
        while looked < 3, s.order.count > s.values.count + ChunkedQueue<OrderEntry>.chunkSize,
            let front = s.order.popFirst()
        {
            looked += 1
            if s.isCurrent(front) { s.order.append(front) }
        }
    }

    /// A value no longer kept (nil: there was none).
    private func left(_ value: Value?) {
        if let value, let residency { residency(value, false) }
    }

    func invalidate(_ key: Key) {
        state.withLock { s in
            left(s.values.removeValue(forKey: key)?.value)
            s.flights[key] = nil
        }
    }

    /// Drops every value and every load in flight. With `keepingNew` false, nothing loaded or put from now on is kept
    /// either, until the next `invalidateAll()` (with `keepingNew` true) drops what was in flight again and resumes.
    func invalidateAll(keepingNew: Bool = true) {
        state.withLock { s in
            if residency != nil {
                for kept in s.values.values { left(kept.value) }
            }
            s.values.removeAll(keepingCapacity: capacity != nil)
            s.flights.removeAll()
            s.order = ChunkedQueue()
            s.keeping = keepingNew
        }
    }

    var count: Int { state.withLock { $0.values.count } }

    /// Entries of the insertion order, stale ones included (for tests: what churn leaves behind).
    var orderEntries: Int { state.withLock { $0.order.count } }

    /// The value cached for `key`, if any (never loads).
    /// Not counted as a hit or miss: callers that use it as a fast path count what it meant (`recordHit`,
    /// `recordMiss`); `value(for:load:)` counts itself.
    func cached(_ key: Key) -> Value? { state.withLock { $0.values[key]?.value } }

    func recordHit() { hits.add(1, ordering: .relaxed) }
    func recordMiss() { misses.add(1, ordering: .relaxed) }

    /// Hits, misses and entries now, for the metrics.
    func lookupCount(_ name: String) -> CacheLookupCount {
        CacheLookupCount(
            cache: name, hits: hits.load(ordering: .relaxed), misses: misses.load(ordering: .relaxed), entries: count)
    }

    /// Caches a value computed elsewhere. Unlike a load, it is kept even if its key was invalidated meanwhile:
    /// only for values that carry their own validity (see `DecisionMemo`).
    func put(_ value: Value, for key: Key) {
        state.withLock { s in
            if s.keeping { store(&s, key, value) }
        }
    }
}

/// Whether a value is the one its `KeyedCache` keeps for its key now: set when the cache keeps it, cleared when the
/// cache stops keeping it, whatever the reason. A value made once and never kept is not resident. What was derived
/// from a value that is still resident was derived from current data (see `DecisionMemo`), checked with one atomic
/// load instead of a lookup. Noncopyable, so it sits inside the value's own object: a remembered answer checks two
/// of them per request, and a flag of its own would be one more object to reach.
struct Residency: ~Copyable, Sendable {
    private let resident = Atomic<Bool>(false)

    var isResident: Bool { resident.load(ordering: .acquiring) }

    /// Called by the cache only (see `KeyedCache.init(capacity:residency:)`).
    func set(_ kept: Bool) { resident.store(kept, ordering: .releasing) }
}

/// A first-in, first-out queue in chunks of `chunkSize` elements: appending and popping are O(1) and never move the
/// elements already queued (an array popped from the front moved every element left, ~3 ms per 100,000 under the
/// cache's lock; one grown by doubling copied them all).
struct ChunkedQueue<Element> {
    static var chunkSize: Int { 4_096 }
    /// Full chunks, then the one being filled; the first one's elements before `head` are popped.
    private var chunks: [[Element]] = []
    private var head = 0
    private(set) var count = 0

    mutating func append(_ element: Element) {
        if chunks.isEmpty || chunks[chunks.count - 1].count == Self.chunkSize {
            var chunk: [Element] = []
            chunk.reserveCapacity(Self.chunkSize)
            chunks.append(chunk)
        }
        chunks[chunks.count - 1].append(element)
        count += 1
    }

    mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = chunks[0][head]
        head += 1
        count -= 1
        if count == 0 {
            chunks.removeAll()
            head = 0
        } else if head == Self.chunkSize {
            chunks.removeFirst()
            head = 0
        }
        return element
    }
}
