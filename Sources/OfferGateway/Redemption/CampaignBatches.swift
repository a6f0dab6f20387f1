import Foundation
import Synchronization

/// The group commit of a campaign's writes: one owner per campaign (a `GroupCommitBatcher` behind a `Mutex`)
/// collects the requests that arrive while the previous batch commits, and hands each batch to `commitBatch`, which
/// writes it in ONE transaction and answers every request of it. Every request is answered only after its batch's
/// `COMMIT` succeeded; when the transaction fails, every request of the batch gets the error.
///
/// Redemptions (`RedemptionCoordinator`) and claims of Apple's codes (`ClaimCoordinator`) share it; each brings its
/// own batch transaction. The database stays the arbiter between processes: each batch locks the campaign row.
typealias CampaignBatches<Request: Sendable, Receipt: Sendable> = GroupCommits<CampaignBatchKey, Request, Receipt>

/// Campaigns are owned per tenant and id.
struct CampaignBatchKey: Hashable, Sendable {
    let tenant: UUID
    let campaignId: String
}

/// Group commit per key: one owner per key (a `GroupCommitBatcher` behind a `Mutex`) collects the requests that
/// arrive while its batches commit (at most `maxInFlight` at once), and hands each batch to `commitBatch`, which
/// writes it in ONE transaction and answers every request of it. Campaigns (`CampaignBatches`) and Apple's
/// notifications per tenant (`AppleDataService`) use it.
final class GroupCommits<K: Hashable & Sendable, Request: Sendable, Receipt: Sendable>: Sendable {
    typealias Key = K

    /// Commits one batch; returns one answer per request, in order.
    typealias Commit = @Sendable (Key, [Request]) async throws -> [Result<Receipt, any Error>]

    private struct Pending: Sendable {
        let request: Request
        let continuation: CheckedContinuation<Receipt, any Error>
    }

    private let commitBatch: Commit
    private let maxBatchSize: Int
    private let maxInFlight: Int
    private let linger: Duration?
    private let owners = Mutex<[Key: GroupCommitBatcher<Pending>]>([:])

    /// - Parameters:
    ///   - maxBatchSize: most requests per transaction.
    ///   - maxInFlight: most batches of one key committing at once.
    ///   - linger: an optional window an idle key waits before committing its first batch (nil: commit at
    ///     once; batches then form while the previous one commits).
    init(maxBatchSize: Int, maxInFlight: Int = 1, linger: Duration?, commit: @escaping Commit) {
        self.commitBatch = commit
        self.maxBatchSize = maxBatchSize
        self.maxInFlight = maxInFlight
        self.linger = linger
    }

    /// Joins the key's next batch; returns (or throws) the batch's answer for `request`.
    func submit(_ request: Request, key: Key) async throws -> Receipt {
        try await withCheckedThrowingContinuation { continuation in
            let pending = Pending(request: request, continuation: continuation)
            let action = owners.withLock { owners in
                if owners[key] == nil {
                    owners[key] = GroupCommitBatcher(
                        maxBatchSize: maxBatchSize, maxInFlight: maxInFlight, lingers: linger != nil)
                }
                return owners[key]?.submit(pending) ?? .none
            }
            perform(action, key: key)
        }
    }

    private func perform(_ action: GroupCommitBatcher<Pending>.Action, key: Key) {
        switch action {
        case .none:
            return
        case .startTimer:
            let window = linger ?? .zero
            Task {
                try? await Task.sleep(for: window)
                let next = self.owners.withLock { $0[key]?.timerFired() ?? .none }
                self.perform(next, key: key)
            }
        case .commit(let batch):
            Task { await self.commit(batch, key: key) }
        }
    }

    private func commit(_ batch: [Pending], key: Key) async {
        do {
            let answers = try await commitBatch(key, batch.map(\.request))
            for (index, pending) in batch.enumerated() {
                pending.continuation.resume(
                    with: index < answers.count
                        ? answers[index] : .failure(GatewayError.internal("a batch answered too few requests")))
            }
        } catch {
            for pending in batch { pending.continuation.resume(throwing: error) }
        }
        let next = owners.withLock { owners -> GroupCommitBatcher<Pending>.Action in
            guard var owner = owners[key] else { return .none }
            let action = owner.batchFinished()
            if owner.phase == .idle && owner.queue.isEmpty {
                owners[key] = nil
            } else {
                owners[key] = owner
            }
            return action
        }
        perform(next, key: key)
    }
}
