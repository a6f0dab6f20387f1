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
    /// The batch's answers (one per request, in order), or the error every request of it gets.
    typealias Answers = Result<[Result<Receipt, any Error>], any Error>
    /// Commits one batch without a task and calls its reply once, from the thread that finished the batch.
    typealias CommitWithReply = @Sendable (Key, [Request], @escaping @Sendable (Answers) -> Void) -> Void

    private struct Pending: Sendable {
        let request: Request
        /// Told once, with the batch's answer for `request`.
        let done: @Sendable (Result<Receipt, any Error>) -> Void
    }

    private let commitBatch: CommitWithReply
    /// Whether `commitBatch` runs each batch on a task of its own (the `Commit` form) and replies from it.
    private let commitsOnTasks: Bool
    private let maxBatchSize: Int
    private let maxInFlight: Int
    private let linger: Duration?
    private let burstRatio: Int
    private let owners = Mutex<[Key: GroupCommitBatcher<Pending>]>([:])

    /// - Parameters:
    ///   - maxBatchSize: most requests per transaction.
    ///   - maxInFlight: most batches of one key committing at once.
    ///   - linger: an optional window an idle key waits before committing its first batch (nil: commit at
    ///     once; batches then form while the previous one commits).
    ///   - burstRatio: how many times the last batch's size must wait before a further batch starts while one
    ///     commits (`GroupCommitBatcher`).
    convenience init(
        maxBatchSize: Int, maxInFlight: Int = 1, linger: Duration?, burstRatio: Int = 2, commit: @escaping Commit
    ) {
        self.init(
            maxBatchSize: maxBatchSize, maxInFlight: maxInFlight, linger: linger, burstRatio: burstRatio,
            commitsOnTasks: true
        ) { key, batch, reply in
            Task {
                let answers: Answers
                do {
                    answers = .success(try await commit(key, batch))
                } catch {
                    answers = .failure(error)
                }
                reply(answers)
            }
        }
    }

    /// The same with a commit that replies from the thread that finished it (a connection's queue), where the next
    /// batch then starts: no task, so no hop through the cooperative pool between one batch and the next.
    convenience init(
        maxBatchSize: Int, maxInFlight: Int = 1, linger: Duration?, burstRatio: Int = 2,
        committing: @escaping CommitWithReply
    ) {
        self.init(
            maxBatchSize: maxBatchSize, maxInFlight: maxInFlight, linger: linger, burstRatio: burstRatio,
            commitsOnTasks: false, committing: committing)
    }

    private init(
        maxBatchSize: Int, maxInFlight: Int, linger: Duration?, burstRatio: Int, commitsOnTasks: Bool,
        committing: @escaping CommitWithReply
    ) {
        self.commitBatch = committing
        self.commitsOnTasks = commitsOnTasks
        self.maxBatchSize = maxBatchSize
        self.maxInFlight = maxInFlight
        self.linger = linger
        self.burstRatio = burstRatio
    }

    /// Joins the key's next batch; returns (or throws) the batch's answer for `request`.
    func submit(_ request: Request, key: Key) async throws -> Receipt {
        try await withCheckedThrowingContinuation { continuation in
            submit(request, key: key) { continuation.resume(with: $0) }
        }
    }

    /// Joins the key's next batch and returns at once; `done` is told the batch's answer for `request`, from the
    /// thread that finished the batch (for callers without a task of their own, decision 011).
    func submit(_ request: Request, key: Key, done: @escaping @Sendable (Result<Receipt, any Error>) -> Void) {
        let pending = Pending(request: request, done: done)
        let action = owners.withLock { owners in
            if owners[key] == nil {
                owners[key] = GroupCommitBatcher(
                    maxBatchSize: maxBatchSize, maxInFlight: maxInFlight, lingers: linger != nil,
                    burstRatio: burstRatio)
            }
            return owners[key]?.submit(pending) ?? .none
        }
        perform(action, key: key)
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
            commitBatch(key, batch.map(\.request)) { answers in self.finished(batch, key: key, answers: answers) }
        }
    }

    private func finished(_ batch: [Pending], key: Key, answers: Answers) {
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
        // The next batch starts before this one's callers are told (their `done` may encode and send an answer), so
        // the database works on it meanwhile: the campaign's row lock makes its batches one serial chain. A commit
        // without a task replies on a connection's queue, where the next batch is likely queued behind this reply
        // (the pool hands out the connection just given back): then the callers are told from another thread.
        perform(next, key: key)
        if case .commit = next, !commitsOnTasks {
            DispatchQueue.global().async { Self.tell(batch, answers) }
        } else {
            Self.tell(batch, answers)
        }
    }

    private static func tell(_ batch: [Pending], _ answers: Answers) {
        switch answers {
        case .success(let answers):
            for (index, pending) in batch.enumerated() {
                pending.done(
                    index < answers.count
                        ? answers[index] : .failure(GatewayError.internal("a batch answered too few requests")))
            }
        case .failure(let error):
            for pending in batch { pending.done(.failure(error)) }
        }
    }
}
