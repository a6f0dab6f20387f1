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
    /// Lookups answered from memory and loads, for the metrics (`offergate_cache_hits_total`/`_misses_total`).
    let hits = Atomic<Int>(0)
    let misses = Atomic<Int>(0)

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
        case .cached(let value):
            hits.add(1, ordering: .relaxed)
            return value
        case .wait(let task):
            misses.add(1, ordering: .relaxed)
            return try await task.value
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
    /// Not counted as a hit or miss: callers that use it as a fast path count what it meant (`recordHit`,
    /// `recordMiss`); `value(for:load:)` counts itself.
    func cached(_ key: Key) -> Value? { state.withLock { $0.values[key] } }

    func recordHit() { hits.add(1, ordering: .relaxed) }
    func recordMiss() { misses.add(1, ordering: .relaxed) }

    /// Hits, misses and entries now, for the metrics.
    func lookupCount(_ name: String) -> CacheLookupCount {
        CacheLookupCount(
            cache: name, hits: hits.load(ordering: .relaxed), misses: misses.load(ordering: .relaxed), entries: count)
    }

    /// Caches a value computed elsewhere. Unlike a load, it is kept even if its key was invalidated meanwhile:
    /// only for values that carry their own validity (see `DecisionMemo`).
    func put(_ value: Value, for key: Key) { state.withLock { s in store(&s, key, value) } }
}
