import Foundation
import Synchronization

/// One value per key, read from the database with concurrent requests coalesced: a request that finds fewer than
/// `maxInFlight` reads running starts one at once (so under light load a request costs one round trip of its own);
/// requests that arrive while every slot is busy wait and go together in the next read, one round trip for all of
/// them (one per tenant among them, side by side). The group-commit shape (`GroupCommitBatcher`) applied to reads: a
/// burst of first questions about many customers costs a few round trips, not one each.
///
/// Used for customers' records (`CustomerCache`, one pipelined read of three statements) and for the customer behind
/// a subscription chain (Retention Messaging's lookup by `originalTransactionId`). `KeyedCache` already shares one
/// load among requests for the same key; this shares round trips among different keys.
final class BatchedReads<Value: Sendable>: Sendable {
    /// Reads the values of `ids` (distinct) of one tenant in one round trip; an id missing from the answer gets
    /// `missing`.
    typealias Read = @Sendable (_ tenant: UUID, _ ids: [String]) async throws -> [String: Value]

    private struct Pending: Sendable {
        let tenant: UUID
        let id: String
        let continuation: CheckedContinuation<Value, any Error>
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
    ///     gateway / PostgreSQL): 4 reads 221-247 / 170-189, 2 reads 173-178 / 100-103, 1 read 156-170 / 68-76. One
    ///     would be cheaper still, but a single slow read (a customer with a long history) would hold up every one.
    ///   - maxBatchSize: most keys one read asks for.
    ///   - missing: the value of an id the read did not answer for.
    init(maxInFlight: Int = 2, maxBatchSize: Int = 256, missing: Value, read: @escaping Read) {
        self.read = read
        self.missing = missing
        self.batches = Mutex(GroupCommitBatcher(maxBatchSize: maxBatchSize, maxInFlight: maxInFlight))
    }

    /// Round trips made and keys read by them (for stats and tests).
    var reads: (roundTrips: Int, keys: Int) { counters.withLock { $0 } }

    /// Requests waiting for the next read (for tests).
    var queued: Int { batches.withLock { $0.queue.count } }

    /// The value of `id` of `tenant`, read in the next round trip.
    func value(tenant: UUID, id: String) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            let action = batches.withLock {
                $0.submit(Pending(tenant: tenant, id: id, continuation: continuation))
            }
            perform(action)
        }
    }

    private func perform(_ action: GroupCommitBatcher<Pending>.Action) {
        guard case .commit(let batch) = action else { return }
        Task { await self.read(batch) }
    }

    /// Reads one batch (one round trip per tenant in it, side by side) and answers every waiter, then starts the
    /// next batch if requests queued meanwhile.
    private func read(_ batch: [Pending]) async {
        let byTenant = Dictionary(grouping: batch, by: \.tenant)
        if byTenant.count == 1, let (tenant, waiting) = byTenant.first {
            // The usual case: no child task.
            await read(tenant: tenant, waiting)
        } else {
            await withTaskGroup(of: Void.self) { group in
                for (tenant, waiting) in byTenant {
                    group.addTask { await self.read(tenant: tenant, waiting) }
                }
            }
        }
        perform(batches.withLock { $0.batchFinished() })
    }

    private func read(tenant: UUID, _ waiting: [Pending]) async {
        var ids: [String] = []
        var seen = Set<String>()
        for pending in waiting where seen.insert(pending.id).inserted { ids.append(pending.id) }
        counters.withLock {
            $0.roundTrips += 1
            $0.keys += ids.count
        }
        do {
            let found = try await read(tenant, ids)
            for pending in waiting { pending.continuation.resume(returning: found[pending.id] ?? missing) }
        } catch {
            for pending in waiting { pending.continuation.resume(throwing: error) }
        }
    }
}
