import Foundation
import OfferStore
import Synchronization

/// The issued-signature ledger: signatures that arrive while every slot is committing form the next batch (one
/// INSERT, one commit). Each `offers.sign` caller is answered only after its row committed, so no signature leaves
/// the gateway unrecorded; under load the ledger costs one fsync per batch, not per signature. Ledger rows never
/// conflict, so two batches may commit at once: with one, a lone early signature took the slot and the rest of a
/// burst waited a whole commit behind it. The second slot opens for bursts only (`GroupCommitBatcher`): opened
/// whenever free, it halved the batches, and PostgreSQL's cost per row (the insert, its indexes, the key and funnel
/// triggers, the commit) is mostly per statement (docs/perf/b5-sign.md, docs/perf/b9-retention.md round 4).
/// Retention Messaging answers are recorded through the same writer, after they are given: each rides in the next
/// batch started for signatures (one statement for both tables), instead of a commit of its own; only when no
/// signature comes within the deferral window (100 ms) do the waiting answers go alone.
typealias LedgerWriter = GroupCommitWriter<LedgerEntry>

/// One ledger row: a signature and its tenant.
struct LedgerRow: Sendable {
    let tenant: UUID
    let signature: IssuedSignature
}

/// What the ledger's group commit writes: a signature, or the record of a retention answer.
enum LedgerEntry: Sendable {
    case signature(LedgerRow)
    case retentionAnswer(RetentionAnswerRow)
}

extension GroupCommitWriter where Row == LedgerEntry {
    /// Each batch's commit is timed and its rows counted in `metrics` (`offergate_ledger_*`).
    convenience init(ledger: SignatureLedger, metrics: GatewayMetrics) {
        self.init(maxInFlight: 2) { entries, committed in
            var signatures: [(tenant: UUID, signature: IssuedSignature)] = []
            var answers: [(tenant: UUID, answer: RetentionAnswerRecord)] = []
            for entry in entries {
                switch entry {
                case .signature(let row): signatures.append((row.tenant, row.signature))
                case .retentionAnswer(let row): answers.append((row.tenant, row.answer))
                }
            }
            let started = ContinuousClock.now
            ledger.recordBatch(signatures, retentionAnswers: answers) { result in
                let ok = if case .success = result { true } else { false }
                metrics.recordLedgerCommit(
                    rows: entries.count, seconds: (ContinuousClock.now - started) / .seconds(1), committed: ok)
                committed(result.mapError { $0 })
            }
        }
    }

    /// Returns once the row is committed (or throws what the database said).
    func record(tenant: UUID, _ signature: IssuedSignature) async throws {
        try await write(.signature(LedgerRow(tenant: tenant, signature: signature)))
    }

    /// Queues an answer's record, to be committed with the batch of signatures it joins (deferrable: it starts no
    /// commit of its own unless no signature comes within the writer's deferral window); `failed` is told if it could
    /// not be.
    func record(_ answer: RetentionAnswerRow, failed: @escaping @Sendable (any Error) -> Void) {
        submit(.retentionAnswer(answer), deferrable: true) { result in
            if case .failure(let error) = result { failed(error) }
        }
    }
}

/// Writes rows with group commit (the ledger, the retention answers): rows that arrive while every slot is
/// committing form the next batch, committed by one call of `commit`.
///
/// No task carries a batch (decision 011): a batch that can start starts on the thread that formed it, `commit`
/// tells its outcome on the thread that finished the commit (a database connection's queue), and that thread
/// starts the next batch and tells the batch's callers. `run()` only marks the writer's life for `GatewayService`:
/// it returns once `finish()` was called and every batch formed is committed. A row written after `finish()` fails
/// as unavailable (retryable) instead of waiting for a writer that is gone.
final class GroupCommitWriter<Row: Sendable>: Sendable {
    /// Commits one batch and tells `committed` once, from any thread.
    typealias Commit =
        @Sendable (_ rows: [Row], _ committed: @escaping @Sendable (Result<Void, any Error>) -> Void)
        -> Void

    private struct Pending: Sendable {
        let row: Row
        /// Told once the row's batch committed, or what went wrong.
        let done: @Sendable (Result<Void, any Error>) -> Void
    }

    private struct State {
        var batcher: GroupCommitBatcher<Pending>
        var finished = false

        var drained: Bool { finished && batcher.phase == .idle && batcher.queue.isEmpty }
    }

    private let commitRows: Commit
    /// How long a deferrable row waits for a batch to ride in before it starts one.
    private let deferral: Duration
    private let state: Mutex<State>
    /// Finished once the writer is finished and drained (what `run()` waits for); it never yields.
    private let drained: AsyncStream<Never>
    private let drainedIn: AsyncStream<Never>.Continuation

    init(
        maxBatchSize: Int = 1_024, maxInFlight: Int = 4, deferral: Duration = .milliseconds(100),
        commit: @escaping Commit
    ) {
        self.commitRows = commit
        self.deferral = deferral
        self.state = Mutex(State(batcher: GroupCommitBatcher(maxBatchSize: maxBatchSize, maxInFlight: maxInFlight)))
        (drained, drainedIn) = AsyncStream.makeStream(of: Never.self)
    }

    /// Returns once the row is committed (or throws what the database said).
    func write(_ row: Row) async throws {
        try await withCheckedThrowingContinuation { continuation in
            submit(row) { continuation.resume(with: $0) }
        }
    }

    /// Queues the row and returns at once; `done` is told once it is committed, or what went wrong (for rows whose
    /// writer need not wait, without a task of their own). A `deferrable` row (nobody waits for it) rides in the next
    /// batch that starts for another row, or starts one after the writer's deferral window.
    func submit(
        _ row: Row, deferrable: Bool = false, done: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        let pending = Pending(row: row, done: done)
        let action = state.withLock { state -> GroupCommitBatcher<Pending>.Action? in
            guard !state.finished else { return nil }
            return state.batcher.submit(pending, deferrable: deferrable)
        }
        guard let action else {
            done(.failure(Self.stopped))
            return
        }
        hand(action)
    }

    /// Returns once `finish()` was called and the last batch formed before it is committed.
    func run() async {
        for await _ in drained {}
    }

    /// No new rows; `run` returns once the rows already queued (deferred ones too) are committed.
    func finish() {
        let (action, drained) = state.withLock { state in
            state.finished = true
            return (state.batcher.flush(), state.drained)
        }
        hand(action)
        if drained { drainedIn.finish() }
    }

    private func hand(_ action: GroupCommitBatcher<Pending>.Action) {
        switch action {
        case .none:
            return
        case .startTimer:
            DeadlineTimer.shared.schedule(at: .now + deferral) {
                self.hand(self.state.withLock { $0.batcher.timerFired() })
            }
        case .commit(let batch):
            commit(batch)
        }
    }

    private func commit(_ batch: [Pending]) {
        commitRows(batch.map(\.row)) { result in
            // The slot is free: the next batch starts before this one's callers are told, so the database works on
            // it meanwhile.
            let (next, drained) = self.state.withLock { state in (state.batcher.batchFinished(), state.drained) }
            self.hand(next)
            for pending in batch { pending.done(result) }
            // After finish() no row joins, so the state read with the slot's release still holds.
            if drained { self.drainedIn.finish() }
        }
    }

    private static var stopped: GatewayError {
        GatewayError.unavailable("the gateway is shutting down; retry on another")
    }
}
