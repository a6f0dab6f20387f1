import Foundation
import OfferStore
import Synchronization

/// The issued-signature ledger: signatures that arrive while every slot is committing form the next batch (one
/// INSERT, one commit). Each `offers.sign` caller is answered only after its row committed, so no signature leaves
/// the gateway unrecorded; under load the ledger costs one fsync per batch, not per signature. Ledger rows never
/// conflict, so two batches commit at once: with one, a lone early signature took the slot and the rest of a burst
/// waited a whole commit behind it; with four, batches were small and PostgreSQL's cost per row (the insert, its
/// indexes, the foreign key and funnel triggers, the commit) rose by a third (docs/perf/b5-sign.md). Retention Messaging answers are recorded through the same writer, after
/// they are given: each rides in the batch of signatures committing next (one statement for both tables), instead of
/// a second writer's commit of its own.
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
    convenience init(ledger: SignatureLedger) {
        self.init(maxInFlight: 2) { entries in
            var signatures: [(tenant: UUID, signature: IssuedSignature)] = []
            var answers: [(tenant: UUID, answer: RetentionAnswerRecord)] = []
            for entry in entries {
                switch entry {
                case .signature(let row): signatures.append((row.tenant, row.signature))
                case .retentionAnswer(let row): answers.append((row.tenant, row.answer))
                }
            }
            try await ledger.recordBatch(signatures, retentionAnswers: answers)
        }
    }

    /// Returns once the row is committed (or throws what the database said).
    func record(tenant: UUID, _ signature: IssuedSignature) async throws {
        try await write(.signature(LedgerRow(tenant: tenant, signature: signature)))
    }

    /// Queues an answer's record, to be committed with the batch of signatures it joins; `failed` is told if it
    /// could not be.
    func record(_ answer: RetentionAnswerRow, failed: @escaping @Sendable (any Error) -> Void) {
        submit(.retentionAnswer(answer)) { result in
            if case .failure(let error) = result { failed(error) }
        }
    }
}

/// Writes rows with group commit (the ledger, the retention answers): rows that arrive while every slot is
/// committing form the next batch, committed by one call of `commit`.
///
/// A long-running part with one `run()` (started and stopped by `GatewayService`): batches are committed by child
/// tasks of `run`, which returns once `finish()` was called and every batch handed to it is committed. A row
/// written after `finish()` fails as unavailable (retryable) instead of waiting for a writer that is gone.
final class GroupCommitWriter<Row: Sendable>: Sendable {
    private struct Pending: Sendable {
        let row: Row
        /// Told once the row's batch committed, or what went wrong.
        let done: @Sendable (Result<Void, any Error>) -> Void
    }

    private struct State {
        var batcher: GroupCommitBatcher<Pending>
        var finished = false
    }

    private let commitRows: @Sendable ([Row]) async throws -> Void
    private let state: Mutex<State>
    private let batches: AsyncStream<[Pending]>
    private let batchesIn: AsyncStream<[Pending]>.Continuation

    init(maxBatchSize: Int = 1_024, maxInFlight: Int = 4, commit: @escaping @Sendable ([Row]) async throws -> Void) {
        self.commitRows = commit
        self.state = Mutex(State(batcher: GroupCommitBatcher(maxBatchSize: maxBatchSize, maxInFlight: maxInFlight)))
        (batches, batchesIn) = AsyncStream.makeStream(of: [Pending].self)
    }

    /// Returns once the row is committed (or throws what the database said).
    func write(_ row: Row) async throws {
        try await withCheckedThrowingContinuation { continuation in
            submit(row) { continuation.resume(with: $0) }
        }
    }

    /// Queues the row and returns at once; `done` is told once it is committed, or what went wrong (for rows whose
    /// writer need not wait, without a task of their own).
    func submit(_ row: Row, done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let pending = Pending(row: row, done: done)
        let action = state.withLock { state -> GroupCommitBatcher<Pending>.Action? in
            guard !state.finished else { return nil }
            return state.batcher.submit(pending)
        }
        guard let action else {
            done(.failure(Self.stopped))
            return
        }
        hand(action)
    }

    /// Commits the batches handed to it, at most `maxInFlight` at once, until `finish()` and the last batch.
    func run() async {
        await withDiscardingTaskGroup { group in
            for await batch in batches {
                group.addTask { await self.commit(batch) }
            }
        }
    }

    /// No new signatures; `run` returns once the batches already formed are committed.
    func finish() {
        let idle = state.withLock { state -> Bool in
            state.finished = true
            return state.batcher.phase == .idle && state.batcher.queue.isEmpty
        }
        if idle { batchesIn.finish() }
    }

    private func commit(_ batch: [Pending]) async {
        do {
            try await commitRows(batch.map(\.row))
            for pending in batch { pending.done(.success(())) }
        } catch {
            for pending in batch { pending.done(.failure(error)) }
        }
        let (next, drained) = state.withLock { state in
            let next = state.batcher.batchFinished()
            return (next, state.finished && state.batcher.phase == .idle && state.batcher.queue.isEmpty)
        }
        hand(next)
        if drained { batchesIn.finish() }
    }

    private func hand(_ action: GroupCommitBatcher<Pending>.Action) {
        guard case .commit(let batch) = action else { return }
        if case .terminated = batchesIn.yield(batch) {
            for pending in batch { pending.done(.failure(Self.stopped)) }
        }
    }

    private static var stopped: GatewayError {
        GatewayError.unavailable("the gateway is shutting down; retry on another")
    }
}
