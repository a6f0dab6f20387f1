import Foundation
import OfferStore
import Synchronization

/// Writes the issued-signature ledger with group commit: signatures that arrive while every slot is committing form
/// the next batch (one INSERT, one commit). Each `offers.sign` caller is answered only after its row committed, so
/// no signature leaves the gateway unrecorded; under load the ledger costs one fsync per batch, not per signature.
/// Ledger rows never conflict, so a few batches commit at once: with one, a lone early signature took the slot
/// and the rest of a burst waited a whole commit behind it.
final class LedgerWriter: Sendable {
    private struct Pending: Sendable {
        let tenant: UUID
        let signature: IssuedSignature
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let ledger: SignatureLedger
    private let batcher: Mutex<GroupCommitBatcher<Pending>>

    init(ledger: SignatureLedger, maxBatchSize: Int = 1_024, maxInFlight: Int = 4) {
        self.ledger = ledger
        self.batcher = Mutex(GroupCommitBatcher(maxBatchSize: maxBatchSize, maxInFlight: maxInFlight))
    }

    /// Returns once the row is committed (or throws what the database said).
    func record(tenant: UUID, _ signature: IssuedSignature) async throws {
        try await withCheckedThrowingContinuation { continuation in
            let action = batcher.withLock {
                $0.submit(Pending(tenant: tenant, signature: signature, continuation: continuation))
            }
            perform(action)
        }
    }

    private func perform(_ action: GroupCommitBatcher<Pending>.Action) {
        guard case .commit(let batch) = action else { return }
        Task {
            do {
                try await ledger.recordBatch(batch.map { ($0.tenant, $0.signature) })
                for pending in batch { pending.continuation.resume() }
            } catch {
                for pending in batch { pending.continuation.resume(throwing: error) }
            }
            perform(batcher.withLock { $0.batchFinished() })
        }
    }
}
