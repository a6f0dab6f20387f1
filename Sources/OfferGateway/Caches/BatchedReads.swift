import Foundation
import Synchronization

/// One value per key, read from the database with concurrent requests coalesced: a request that finds no read
/// running starts one at once (so under light load a request costs one round trip of its own); requests that arrive
/// while a read runs wait and go together in the next read, one round trip for all of them (one per tenant among
/// them, side by side). The group-commit shape (`GroupCommitBatcher`) applied to reads: a burst of first questions
/// about many customers costs a few round trips, not one each.
///
/// Used for customers' records (`CustomerCache`, one pipelined read of three statements) and for the customer behind
/// a subscription chain (Retention Messaging's lookup by `originalTransactionId`). `KeyedCache` already shares one
/// load among requests for the same key; this shares round trips among different keys.
final class BatchedReads<Value: Sendable>: Sendable {
    /// Receives one id's value (or the read's error), once, on the thread that finished the read.
    typealias Reply = @Sendable (Result<Value, any Error>) -> Void
    /// Reads the values of `ids` (distinct) of one tenant in one round trip and calls `done` once, on whichever
    /// thread finished it; an id missing from the answer gets `missing`.
    typealias Read =
        @Sendable (
            _ tenant: UUID, _ ids: [String], _ done: @escaping @Sendable (Result<[String: Value], any Error>) -> Void
        ) -> Void

    private struct Pending: Sendable {
        let tenant: UUID
        let id: String
        let reply: Reply
    }

    private let read: Read
    private let missing: Value
    private let batches: Mutex<GroupCommitBatcher<Pending>>
    private let counters = Mutex<(roundTrips: Int, keys: Int)>((0, 0))

    /// - Parameters:
    ///   - maxInFlight: reads running at once (each holds one pooled connection while it runs). Two, not more:
    ///     PostgreSQL's cost per key falls steeply with the batch (pgbench on B4c's tables: 204 µs of server CPU
    ///     for a records read of one customer, 34 µs per customer in a read of eight), and every read in flight
    ///     splits the waiting requests further. Side by side on B4c's shape (ms of CPU per 1,000 cold answers,
    ///     gateway / PostgreSQL): 4 reads 221-247 / 170-189, 2 reads 173-178 / 100-103, 1 read 156-170 / 68-76.
    ///     The second slot opens for bursts and slow reads only (twice as many waiting as the last read carried:
    ///     `GroupCommitBatcher`), so a steady stream is read as by one slot while a single slow read (a customer
    ///     with a long history) holds up no one for long: 9 customers per read on B4c's closed loop, not 4.
    ///   - maxBatchSize: most keys one read asks for.
    ///   - missing: the value of an id the read did not answer for.
    ///   - read: one round trip, answered through its callback (no task per batch when the store can answer
    ///     that way: `CustomerRecordsRepository.records(tenant:customerIds:reply:)`).
    init(maxInFlight: Int = 2, maxBatchSize: Int = 256, missing: Value, read: @escaping Read) {
        self.read = read
        self.missing = missing
        self.batches = Mutex(GroupCommitBatcher(maxBatchSize: maxBatchSize, maxInFlight: maxInFlight))
    }

    /// For a read that is `async`: each batch runs it on a task of its own.
    convenience init(
        maxInFlight: Int = 2, maxBatchSize: Int = 256, missing: Value,
        asyncRead: @escaping @Sendable (_ tenant: UUID, _ ids: [String]) async throws -> [String: Value]
    ) {
        self.init(maxInFlight: maxInFlight, maxBatchSize: maxBatchSize, missing: missing) { tenant, ids, done in
            Task {
                do { done(.success(try await asyncRead(tenant, ids))) } catch { done(.failure(error)) }
            }
        }
    }

    /// Round trips made and keys read by them (for stats and tests).
    var reads: (roundTrips: Int, keys: Int) { counters.withLock { $0 } }

    /// Requests waiting for the next read (for tests).
    var queued: Int { batches.withLock { $0.queue.count } }

    /// The value of `id` of `tenant`, read in the next round trip.
    func value(tenant: UUID, id: String) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            value(tenant: tenant, id: id) { continuation.resume(with: $0) }
        }
    }

    /// The value of `id` of `tenant`, read in the next round trip, to `reply` (on the thread that finished the read,
    /// after its round trip; no task per caller). A read that can start now starts on the caller's thread: it only
    /// hands the round trip to a database connection.
    func value(tenant: UUID, id: String, reply: @escaping Reply) {
        perform(batches.withLock { $0.submit(Pending(tenant: tenant, id: id, reply: reply)) })
    }

    private func perform(_ action: GroupCommitBatcher<Pending>.Action) {
        guard case .commit(let batch) = action else { return }
        read(batch)
    }

    /// Reads one batch (one round trip per tenant in it, side by side) and answers every waiter, then starts the
    /// next batch if requests queued meanwhile.
    private func read(_ batch: [Pending]) {
        let byTenant = Dictionary(grouping: batch, by: \.tenant)
        let left = Countdown(byTenant.count)
        for (tenant, waiting) in byTenant {
            read(tenant: tenant, waiting) {
                guard left.done() else { return }
                self.perform(self.batches.withLock { $0.batchFinished() })
            }
        }
    }

    private func read(tenant: UUID, _ waiting: [Pending], then finished: @escaping @Sendable () -> Void) {
        var ids: [String] = []
        var seen = Set<String>()
        for pending in waiting where seen.insert(pending.id).inserted { ids.append(pending.id) }
        counters.withLock {
            $0.roundTrips += 1
            $0.keys += ids.count
        }
        let missing = missing
        read(tenant, ids) { outcome in
            switch outcome {
            case .success(let found):
                for pending in waiting { pending.reply(.success(found[pending.id] ?? missing)) }
            case .failure(let error):
                for pending in waiting { pending.reply(.failure(error)) }
            }
            finished()
        }
    }
}

/// Counts the parts of one batch down to the last.
private final class Countdown: Sendable {
    private let left: Atomic<Int>

    init(_ parts: Int) { left = Atomic(parts) }

    /// One part finished; true for the last.
    func done() -> Bool { left.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 }
}
