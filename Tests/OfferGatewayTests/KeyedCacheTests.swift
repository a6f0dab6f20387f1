import Foundation
import OfferTestSupport
import Synchronization
import Testing

@testable import OfferGateway

@Suite struct KeyedCacheTests {
    final class Counter: Sendable {
        let loads = Mutex(0)
        func next() -> Int {
            loads.withLock {
                $0 += 1
                return $0
            }
        }
    }

    /// Holds loads until opened (any number of waiters), and counts who arrived, so a test waits for the event
    /// "the load has started" instead of for time.
    final class Gate: Sendable {
        private struct State {
            var isOpen = false
            var arrived = 0
            var waiting: [CheckedContinuation<Void, Never>] = []
        }
        private let state = Mutex(State())

        func open() {
            let waiting = state.withLock { state in
                state.isOpen = true
                defer { state.waiting.removeAll() }
                return state.waiting
            }
            for continuation in waiting { continuation.resume() }
        }

        func wait() async {
            await withCheckedContinuation { continuation in
                let open = state.withLock { state in
                    state.arrived += 1
                    if !state.isOpen { state.waiting.append(continuation) }
                    return state.isOpen
                }
                if open { continuation.resume() }
            }
        }

        var arrived: Int { state.withLock { $0.arrived } }
    }

    @Test func aHitDoesNotLoadAndAnInvalidationLoadsAfresh() async throws {
        let cache = KeyedCache<String, Int>()
        let counter = Counter()
        #expect(try await cache.value(for: "a") { counter.next() } == 1)
        #expect(try await cache.value(for: "a") { counter.next() } == 1)
        cache.invalidate("a")
        #expect(try await cache.value(for: "a") { counter.next() } == 2)
        cache.invalidateAll()
        #expect(try await cache.value(for: "a") { counter.next() } == 3)
    }

    @Test func whileSuspendedNothingIsKeptAndALoadInFlightAtResumeIsNotKeptEither() async throws {
        let cache = KeyedCache<String, Int>()
        let counter = Counter()
        #expect(try await cache.value(for: "a") { counter.next() } == 1)
        // The change feed lost its connection: drop everything, keep nothing loaded or put meanwhile.
        cache.invalidateAll(keepingNew: false)
        #expect(cache.cached("a") == nil)
        #expect(try await cache.value(for: "a") { counter.next() } == 2)
        #expect(try await cache.value(for: "a") { counter.next() } == 3)
        cache.put(9, for: "b")
        #expect(cache.count == 0)
        // A load that started while suspended and ends after the feed is back was read before it listened again.
        let late = try await cache.value(for: "a") {
            cache.invalidateAll()
            return counter.next()
        }
        #expect(late == 4)
        #expect(cache.count == 0)
        // Back to normal: loads are kept again.
        #expect(try await cache.value(for: "a") { counter.next() } == 5)
        #expect(try await cache.value(for: "a") { counter.next() } == 5)
        cache.put(9, for: "b")
        #expect(cache.cached("b") == 9)
    }

    @Test func aValueLoadedAcrossAnInvalidationIsReturnedButNotKept() async throws {
        let cache = KeyedCache<String, Int>()
        // The invalidation lands while the load is in flight (e.g. a NOTIFY for a change the load may have missed).
        let stale = try await cache.value(for: "k") {
            cache.invalidate("k")
            return 1
        }
        #expect(stale == 1)
        #expect(cache.count == 0)
        #expect(try await cache.value(for: "k") { 2 } == 2)
        #expect(cache.count == 1)
        // Likewise for invalidateAll.
        cache.invalidate("k")
        _ = try await cache.value(for: "k") {
            cache.invalidateAll()
            return 3
        }
        #expect(cache.count == 0)
    }

    @Test func aFailedLoadKeepsNothingAndLeavesNoBookkeepingBehind() async throws {
        struct Boom: Error {}
        let cache = KeyedCache<String, Int>()
        await #expect(throws: Boom.self) { try await cache.value(for: "x") { throw Boom() } }
        #expect(cache.count == 0)
        #expect(try await cache.value(for: "x") { 5 } == 5)
        #expect(cache.count == 1)
    }

    @Test func concurrentMissesShareOneLoad() async throws {
        let cache = KeyedCache<String, Int>()
        let counter = Counter()
        let gate = Gate()
        // 50 callers miss "k" while its load is held open: one load, and all 50 get its value.
        let values = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    try await cache.value(for: "k") {
                        await gate.wait()
                        return counter.next()
                    }
                }
            }
            // The one load has started (callers arriving later join it, or find its value kept).
            #expect(await eventually { gate.arrived == 1 })
            gate.open()
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(values == Array(repeating: 1, count: 50))
        #expect(counter.loads.withLock { $0 } == 1)
        #expect(cache.count == 1)
    }

    @Test func aCallerAfterAnInvalidationDoesNotJoinTheStaleLoad() async throws {
        let cache = KeyedCache<String, Int>()
        let gate = Gate()
        let stale = Task {
            try await cache.value(for: "k") {
                await gate.wait()
                return 1
            }
        }
        #expect(await eventually { gate.arrived == 1 })
        cache.invalidate("k")  // the data changed while the first load was in flight
        #expect(try await cache.value(for: "k") { 2 } == 2)
        gate.open()
        #expect(try await stale.value == 1)
        #expect(try await cache.value(for: "k") { 3 } == 2)  // the fresh value is kept, the stale one is not
    }

    /// The callback form (no task): callers of one key share the load `start` began; a value loaded across an
    /// invalidation reaches them but is not kept; a cached value is replied at once, on the caller's thread.
    @Test func theCallbackFormSharesALoadAndLosesNoInvalidation() async throws {
        let cache = KeyedCache<String, Int>()
        let replies = Mutex<[Result<Int, any Error>]>([])
        let landing = Mutex<(@Sendable (Result<Int, any Error>) -> Void)?>(nil)
        let starts = Counter()
        func ask() {
            cache.value(
                for: "k",
                start: { landed in
                    _ = starts.next()
                    landing.withLock { $0 = landed }
                },
                reply: { result in replies.withLock { $0.append(result) } })
        }
        ask()
        ask()
        #expect(starts.loads.withLock { $0 } == 1)
        #expect(replies.withLock { $0.count } == 0)
        cache.invalidate("k")
        let land = try #require(landing.withLock { $0 })
        land(.success(7))
        #expect(replies.withLock { $0.compactMap { try? $0.get() } } == [7, 7])
        #expect(cache.cached("k") == nil)
        // The next caller loads afresh, and that load is kept.
        ask()
        #expect(starts.loads.withLock { $0 } == 2)
        let landAgain = try #require(landing.withLock { $0 })
        landAgain(.success(8))
        #expect(cache.cached("k") == 8)
        ask()
        #expect(starts.loads.withLock { $0 } == 2)
        #expect(replies.withLock { $0.compactMap { try? $0.get() } } == [7, 7, 8, 8])
        #expect(cache.lookupCount("t").hits == 1)
        #expect(cache.lookupCount("t").misses == 3)
    }

    @Test func aCapacityDropsTheOldestEntriesFirst() async throws {
        let cache = KeyedCache<Int, Int>(capacity: 3)
        for key in 1...5 { _ = try await cache.value(for: key) { key * 10 } }
        #expect(cache.count == 3)
        let counter = Counter()
        // 1 and 2 were evicted (they load again); 3, 4 and 5 are still cached.
        #expect(try await cache.value(for: 5) { counter.next() } == 50)
        #expect(try await cache.value(for: 3) { counter.next() } == 30)
        #expect(try await cache.value(for: 1) { counter.next() } == 1)
        #expect(cache.count == 3)
    }

    /// A key dropped and kept again is as new as its last insertion: its first entry in the insertion order is stale
    /// and evicts nothing (it used to evict the key's new value in place of the oldest).
    @Test func aKeyKeptAgainIsEvictedByItsNewPlace() async throws {
        let cache = KeyedCache<Int, Int>(capacity: 3)
        for key in 1...3 { _ = try await cache.value(for: key) { key * 10 } }
        cache.invalidate(1)
        _ = try await cache.value(for: 1) { 11 }
        _ = try await cache.value(for: 4) { 40 }
        #expect(cache.count == 3)
        let counter = Counter()
        #expect(try await cache.value(for: 1) { counter.next() } == 11)
        #expect(try await cache.value(for: 3) { counter.next() } == 30)
        #expect(try await cache.value(for: 4) { counter.next() } == 40)
        // 2 was the oldest.
        #expect(try await cache.value(for: 2) { counter.next() } == 1)
    }

    /// A value replaced under its key (`put`) keeps the key's place: it is still the oldest when the capacity is reached.
    @Test func aReplacedValueKeepsItsKeysPlace() {
        let cache = KeyedCache<Int, Int>(capacity: 2)
        cache.put(10, for: 1)
        cache.put(20, for: 2)
        cache.put(11, for: 1)
        cache.put(30, for: 3)
        #expect(cache.cached(1) == nil)
        #expect(cache.cached(2) == 20)
        #expect(cache.cached(3) == 30)
        #expect(cache.orderEntries == 2)
    }

    /// Churn under the capacity (a customer's snapshot invalidated by every change and read again) pops nothing, so
    /// each insertion also clears stale entries from the front: the order stays bounded by the kept entries plus a
    /// chunk, not by the churn, and no insertion pays for more than a few entries.
    @Test func churnUnderTheCapacityLeavesABoundedOrder() async throws {
        let cache = KeyedCache<Int, Int>(capacity: 1_000)
        for key in 0..<100 { cache.put(key, for: key) }
        var largest = 0
        for round in 0..<50_000 {
            cache.invalidate(round % 100)
            cache.put(round, for: round % 100)
            largest = max(largest, cache.orderEntries)
        }
        #expect(cache.count == 100)
        #expect(largest <= 2 * 100 + ChunkedQueue<Int>.chunkSize + 1)
        // Still a cache of its capacity: filling it and one more evicts one of the churned keys, and keeps the newest.
        for key in 100...1_000 { cache.put(key, for: key) }
        #expect(cache.count == 1_000)
        #expect(cache.cached(1_000) == 1_000)
        #expect(cache.cached(49_999 % 100) == 49_999)
    }

    @Test func aChunkedQueueIsFirstInFirstOutAcrossChunks() {
        var queue = ChunkedQueue<Int>()
        var expected: [Int] = []
        var next = 0
        // Bursts of appends and pops of every size around a chunk's.
        for burst in [1, 4_095, 4_096, 4_097, 10_000, 3] {
            for _ in 0..<burst {
                queue.append(next)
                expected.append(next)
                next += 1
            }
            for _ in 0..<(burst / 2 + 1) {
                #expect(queue.popFirst() == expected.removeFirst())
            }
            #expect(queue.count == expected.count)
        }
        var drained: [Int] = []
        while let element = queue.popFirst() { drained.append(element) }
        #expect(drained == expected)
        #expect(queue.popFirst() == nil)
        queue.append(7)
        #expect(queue.popFirst() == 7)
    }

    /// A value that carries its residency, as the catalog and customer snapshots do.
    final class Value: Sendable {
        let id: Int
        let residency = Residency()
        init(_ id: Int) { self.id = id }
        var isResident: Bool { residency.isResident }
    }

    /// Every way a value stops being the one kept for its key clears its residency, and only a kept value has it:
    /// `DecisionMemo` serves an answer only while both of its inputs are resident.
    @Test func residencyFollowsWhatTheCacheKeeps() async throws {
        let cache = KeyedCache<Int, Value>(capacity: 2, residency: { $0.residency.set($1) })
        let one = try await cache.value(for: 1) { Value(1) }
        #expect(one.isResident)
        // Invalidated.
        cache.invalidate(1)
        #expect(!one.isResident)
        // Dropped for capacity (the oldest first).
        let two = try await cache.value(for: 2) { Value(2) }
        let three = try await cache.value(for: 3) { Value(3) }
        let four = try await cache.value(for: 4) { Value(4) }
        #expect(!two.isResident)
        #expect(three.isResident && four.isResident)
        // Replaced under its key.
        let newThree = Value(3)
        cache.put(newThree, for: 3)
        #expect(!three.isResident && newThree.isResident)
        // Everything dropped; and while nothing is kept, nothing loaded becomes resident.
        cache.invalidateAll(keepingNew: false)
        #expect(!newThree.isResident && !four.isResident)
        let unkept = try await cache.value(for: 5) { Value(5) }
        #expect(!unkept.isResident)
        cache.invalidateAll()
        #expect(try await cache.value(for: 5) { Value(50) }.isResident)
    }

    /// A load that lands after its key was invalidated reaches its callers but is not kept, so it is not resident.
    @Test func aLoadOvertakenByAnInvalidationIsNeverResident() async throws {
        let cache = KeyedCache<Int, Value>(residency: { $0.residency.set($1) })
        let gate = Gate()
        let load = Task {
            try await cache.value(for: 1) {
                await gate.wait()
                return Value(1)
            }
        }
        #expect(await eventually { gate.arrived == 1 })
        cache.invalidate(1)
        gate.open()
        let landed = try await load.value
        #expect(!landed.isResident)
    }
}
