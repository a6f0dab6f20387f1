import Foundation
import OfferDomain
import OfferStore
import Synchronization

/// Reads customers' records for `CustomerCache`, coalescing concurrent misses: a miss that finds fewer than
/// `maxInFlight` reads running starts one at once (so under light load a miss costs one round trip of its own);
/// misses that arrive while every slot is busy wait and go together in the next read, one round trip for all of
/// them. The group-commit shape (`GroupCommitBatcher`) applied to reads: a paywall's first questions about many
/// customers cost a few round trips, not one each. `KeyedCache` already shares one load among misses of the same
/// customer; this shares round trips among different customers.
final class CustomerRecordsLoader: Sendable {
    private struct Pending: Sendable {
        let key: CustomerKey
        let continuation: CheckedContinuation<CustomerRecords, any Error>
    }

    private let repository: CustomerRecordsRepository
    private let batches: Mutex<GroupCommitBatcher<Pending>>
    private let counters = Mutex<(roundTrips: Int, customers: Int)>((0, 0))

    /// - Parameters:
    ///   - maxInFlight: reads running at once (each holds one pooled connection while it runs). Two, not more:
    ///     PostgreSQL's cost per customer falls steeply with the batch (pgbench on B4c's tables: 204 µs of server
    ///     CPU for a read of one customer, 34 µs per customer in a read of eight), and every read in flight splits
    ///     the waiting misses further. Side by side on B4c's shape (ms of CPU per 1,000 cold answers, gateway /
    ///     PostgreSQL): 4 reads 221-247 / 170-189, 2 reads 173-178 / 100-103, 1 read 156-170 / 68-76. One would be
    ///     cheaper still, but a single slow read (a customer with a long history) would hold up every miss.
    ///   - maxBatchSize: most customers one read asks for.
    init(repository: CustomerRecordsRepository, maxInFlight: Int = 2, maxBatchSize: Int = 256) {
        self.repository = repository
        self.batches = Mutex(GroupCommitBatcher(maxBatchSize: maxBatchSize, maxInFlight: maxInFlight))
    }

    /// Round trips made and customers read by them (for stats and tests).
    var reads: (roundTrips: Int, customers: Int) { counters.withLock { $0 } }

    /// The customer's records, read in the next round trip.
    func records(_ key: CustomerKey) async throws -> CustomerRecords {
        try await withCheckedThrowingContinuation { continuation in
            let action = batches.withLock { $0.submit(Pending(key: key, continuation: continuation)) }
            perform(action)
        }
    }

    private func perform(_ action: GroupCommitBatcher<Pending>.Action) {
        guard case .commit(let batch) = action else { return }
        Task { await self.read(batch) }
    }

    /// Reads one batch (one round trip per tenant in it, side by side) and answers every waiter, then starts the
    /// next batch if misses queued meanwhile.
    private func read(_ batch: [Pending]) async {
        await withTaskGroup(of: Void.self) { group in
            for (tenant, waiting) in Dictionary(grouping: batch, by: \.key.tenant) {
                group.addTask { await self.read(tenant: tenant, waiting) }
            }
        }
        perform(batches.withLock { $0.batchFinished() })
    }

    private func read(tenant: UUID, _ waiting: [Pending]) async {
        counters.withLock {
            $0.roundTrips += 1
            $0.customers += waiting.count
        }
        do {
            let found = try await repository.records(tenant: tenant, customerIds: waiting.map(\.key.customerId))
            for pending in waiting {
                pending.continuation.resume(returning: found[pending.key.customerId] ?? CustomerRecords(recorded: []))
            }
        } catch {
            for pending in waiting { pending.continuation.resume(throwing: error) }
        }
    }
}
