import Foundation
import OfferStore
import Synchronization

/// Writes the issued-signature ledger with group commit: signatures that arrive while every slot is committing form
/// the next batch (one INSERT, one commit). Each `offers.sign` caller is answered only after its row committed, so
/// no signature leaves the gateway unrecorded; under load the ledger costs one fsync per batch, not per signature.
/// Ledger rows never conflict, so a few batches commit at once: with one, a lone early signature took the slot
/// and the rest of a burst waited a whole commit behind it.
///
/// A long-running part with one `run()` (started and stopped by `GatewayService`): batches are committed by child
/// tasks of `run`, which returns once `finish()` was called and every batch handed to it is committed. A
/// signature asked for after `finish()` fails as unavailable (retryable) instead of waiting for a writer that is gone.
final class LedgerWriter: Sendable {
    private struct Pending: Sendable {
        let tenant: UUID
        let signature: IssuedSignature
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var batcher: GroupCommitBatcher<Pending>
        var finished = false
    }

    private let ledger: SignatureLedger
    private let state: Mutex<State>
    private let batches: AsyncStream<[Pending]>
    private let batchesIn: AsyncStream<[Pending]>.Continuation

    init(ledger: SignatureLedger, maxBatchSize: Int = 1_024, maxInFlight: Int = 4) {
        self.ledger = ledger
        self.state = Mutex(State(batcher: GroupCommitBatcher(maxBatchSize: maxBatchSize, maxInFlight: maxInFlight)))
        (batches, batchesIn) = AsyncStream.makeStream(of: [Pending].self)
    }

    /// Returns once the row is committed (or throws what the database said).
    func record(tenant: UUID, _ signature: IssuedSignature) async throws {
        try await withCheckedThrowingContinuation { continuation in
            let pending = Pending(tenant: tenant, signature: signature, continuation: continuation)
            let action = state.withLock { state -> GroupCommitBatcher<Pending>.Action? in
                guard !state.finished else { return nil }
                return state.batcher.submit(pending)
            }
            guard let action else {
                continuation.resume(throwing: Self.stopped)
                return
            }
            hand(action)
        }
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
            try await ledger.recordBatch(batch.map { ($0.tenant, $0.signature) })
            for pending in batch { pending.continuation.resume() }
        } catch {
            for pending in batch { pending.continuation.resume(throwing: error) }
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
            for pending in batch { pending.continuation.resume(throwing: Self.stopped) }
        }
    }

    private static let stopped = GatewayError.unavailable("the gateway is shutting down; retry on another")
}
