import Foundation
import OfferTestSupport
import Synchronization
import Testing

@testable import OfferGateway

/// `BatchedReads` without a database: a read held open while requests arrive, so what shares a round trip is known.
@Suite("Batched reads")
struct BatchedReadsTests {
    /// A read that answers `id` → "v-id" for ids not starting with "x", holding the first call until `release()`.
    final class GatedRead: Sendable {
        private let state = Mutex<(calls: [[String]], gate: CheckedContinuation<Void, Never>?, open: Bool)>(
            ([], nil, false))

        var calls: [[String]] { state.withLock { $0.calls } }

        func read(_ ids: [String]) async throws -> [String: String?] {
            let first = state.withLock { s in
                s.calls.append(ids.sorted())
                return s.calls.count == 1
            }
            if first {
                await withCheckedContinuation { continuation in
                    let open = state.withLock { s in
                        if !s.open { s.gate = continuation }
                        return s.open
                    }
                    if open { continuation.resume() }
                }
            }
            if ids.contains("boom") { throw CancellationError() }
            return Dictionary(uniqueKeysWithValues: ids.filter { !$0.hasPrefix("x") }.map { ($0, "v-\($0)") })
        }

        func release() {
            let gate = state.withLock { s in
                s.open = true
                return s.gate.take()
            }
            gate?.resume()
        }
    }

    @Test("Requests arriving while the only read runs go together in the next one, each answered with its own value")
    func coalesces() async throws {
        let gated = GatedRead()
        let reads = BatchedReads<String?>(maxInFlight: 1, missing: nil) { _, ids in try await gated.read(ids) }
        let tenant = UUID()
        async let first = reads.value(tenant: tenant, id: "a")
        #expect(await eventually(timeout: .seconds(30)) { gated.calls.count == 1 })
        let ids = ["b", "c", "x1", "d", "c", "x2", "e", "f"]
        let later = Task {
            try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                for (i, id) in ids.enumerated() {
                    group.addTask { (i, try await reads.value(tenant: tenant, id: id)) }
                }
                return try await group.reduce(into: [Int: String?]()) { $0[$1.0] = $1.1 }
            }
        }
        #expect(await eventually(timeout: .seconds(30)) { reads.queued == ids.count })
        gated.release()
        #expect(try await first == "v-a")
        let answers = try await later.value
        for (i, id) in ids.enumerated() {
            #expect(answers[i] == .some(id.hasPrefix("x") ? nil : "v-\(id)"), "\(id)")
        }
        // Two round trips: the first request's, then every later one (duplicates asked once).
        #expect(gated.calls == [["a"], ["b", "c", "d", "e", "f", "x1", "x2"]])
        #expect(reads.reads == (roundTrips: 2, keys: 8))
    }

    @Test("A read that fails fails every request it carried, and the next read is made afresh")
    func failureReachesEveryWaiter() async throws {
        let gated = GatedRead()
        gated.release()
        let reads = BatchedReads<String?>(maxInFlight: 1, missing: nil) { _, ids in try await gated.read(ids) }
        let tenant = UUID()
        await #expect(throws: CancellationError.self) { try await reads.value(tenant: tenant, id: "boom") }
        #expect(try await reads.value(tenant: tenant, id: "a") == "v-a")
    }
}

/// The process's deadline heap, on a timer of its own.
@Suite("Deadline timer")
struct DeadlineTimerTests {
    @Test("Actions run in deadline order, a cancelled one never, and no entry is left behind")
    func runsInOrder() async throws {
        let timer = DeadlineTimer()
        let fired = Mutex<[Int]>([])
        let now = ContinuousClock.now
        timer.schedule(at: now + .milliseconds(300)) { fired.withLock { $0.append(3) } }
        timer.schedule(at: now + .milliseconds(100)) { fired.withLock { $0.append(1) } }
        let cancelled = timer.schedule(at: now + .milliseconds(200)) { fired.withLock { $0.append(2) } }
        timer.schedule(at: now - .seconds(1)) { fired.withLock { $0.append(0) } }
        #expect(cancelled.cancel())
        #expect(await eventually(timeout: .seconds(30)) { fired.withLock { $0.count } == 3 })
        #expect(fired.withLock { $0 } == [0, 1, 3])
        #expect(!cancelled.cancel(), "cancelled once only")
        #expect(timer.count == 0)
    }

    @Test("An entry cancelled before its deadline is dropped when its deadline comes, without running")
    func cancelledEntriesAreDropped() async throws {
        let timer = DeadlineTimer()
        let ran = Mutex(false)
        let entry = timer.schedule(at: .now + .milliseconds(50)) { ran.withLock { $0 = true } }
        entry.cancel()
        #expect(timer.count == 1)
        #expect(await eventually(timeout: .seconds(30)) { timer.count == 0 })
        #expect(!ran.withLock { $0 })
    }
}
