import Foundation
import JSONRPC
import OfferCrypto
import OfferDomain
import OfferStore
import Synchronization

/// Group commit of code redemptions: the campaign's owner (`CampaignBatches`) collects the redemptions that arrive
/// while the previous batch commits, and each batch is written in ONE transaction
/// (`CampaignRepository.commitRedemptionBatch`). Every request is answered only after its batch's `COMMIT`
/// succeeded; when the transaction fails, every request of the batch gets the error (-32050 when the database is
/// unreachable: the outcome of a failed `COMMIT` is unknown, so clients retry with their idempotency key).
///
/// The database stays the arbiter between processes: each batch locks the campaign row and re-reads the counters
/// before deciding, and the counter update is conditional on the limit.
final class RedemptionCoordinator: Sendable {
    /// A waiting request.
    struct Pending: Sendable {
        let attempt: RedemptionAttempt
        /// What is returned on success (and stored for the idempotency key).
        let receipt: RedemptionReceipt
    }

    private let repository: CampaignRepository
    private let clock: @Sendable () -> Date
    /// Batches and redemptions committed by this process.
    private final class Counters: Sendable {
        let value = Mutex<(batches: Int, redemptions: Int)>((0, 0))
    }

    private let counters: Counters
    private let batches: CampaignBatches<Pending, RedemptionReceipt>

    /// - Parameters:
    ///   - maxBatchSize: most redemptions per transaction.
    ///   - linger: an optional window an idle campaign waits before committing its first batch (nil: commit at
    ///     once; batches then form while the previous one commits).
    init(
        repository: CampaignRepository, clock: @escaping @Sendable () -> Date, maxBatchSize: Int = 512,
        linger: Duration? = nil
    ) {
        self.repository = repository
        self.clock = clock
        let counters = Counters()
        self.counters = counters
        batches = CampaignBatches(maxBatchSize: maxBatchSize, linger: linger) { key, batch, reply in
            Self.commit(batch, key: key, repository: repository, at: clock()) { committed in
                reply(
                    committed.mapError { $0 as any Error }.map { verdicts in
                        let accepted = verdicts.filter { $0 == .accepted }.count
                        counters.value.withLock {
                            $0.batches += 1
                            $0.redemptions += accepted
                        }
                        return batch.indices.map { Self.answer($0, verdicts: verdicts, batch: batch) }
                    })
            }
        }
    }

    /// Batches committed and redemptions written by this process (for stats and tests).
    var committed: (batches: Int, redemptions: Int) { counters.value.withLock { $0 } }

    /// The idempotency hash of a redemption request: method and normalised params.
    static func requestHash(code: String, customerId: String) -> String {
        SHA256.hex("codes.redeem\u{0}\(code)\u{0}\(customerId)")
    }

    /// Redeems through the campaign's batch: returns the receipt once its batch committed, or throws the refusal
    /// (`GatewayError.refused`), a key conflict, or what the database said. `productId` is the product of the
    /// campaign's offer; `eligible` whether the customer is in the campaign's eligibility.
    func redeem(
        tenant: UUID, lookup: CodeLookup, productId: String, customerId: String, eligible: Bool,
        idempotencyKey: String?
    ) async throws -> RedemptionReceipt {
        try await withCheckedThrowingContinuation { continuation in
            redeem(
                tenant: tenant, lookup: lookup, productId: productId, customerId: customerId, eligible: eligible,
                idempotencyKey: idempotencyKey
            ) { continuation.resume(with: $0) }
        }
    }

    /// The same, returning at once: `done` is told the receipt or the error once the batch committed, from the
    /// thread that finished it.
    func redeem(
        tenant: UUID, lookup: CodeLookup, productId: String, customerId: String, eligible: Bool,
        idempotencyKey: String?, done: @escaping @Sendable (Result<RedemptionReceipt, any Error>) -> Void
    ) {
        let campaign = lookup.record.campaign
        let attempt = RedemptionAttempt(
            customerId: customerId, code: lookup.code, oneTime: lookup.oneTime, eligible: eligible,
            idempotencyKey: idempotencyKey, requestHash: Self.requestHash(code: lookup.code, customerId: customerId),
            redemptionId: UUID.timeOrdered())
        let receipt = RedemptionReceipt(
            redemptionId: attempt.redemptionId.lowercasedString, campaignId: campaign.id,
            offerId: campaign.offerId, productId: productId, replayed: false)
        batches.submit(
            Pending(attempt: attempt, receipt: receipt), key: .init(tenant: tenant, campaignId: campaign.id), done: done
        )
    }

    /// Commits one batch without a task (`CampaignRepository.commitRedemptionBatch(…reply:)`): `reply` is called on
    /// the connection's queue, where the campaign's next batch then starts.
    private static func commit(
        _ batch: [Pending], key: CampaignBatches<Pending, RedemptionReceipt>.Key, repository: CampaignRepository,
        at: Date, reply: @escaping @Sendable (Result<[RedemptionVerdict], StoreError>) -> Void
    ) {
        let attempts = batch.map(\.attempt)
        // Stored outcomes are needed only for attempts with an idempotency key.
        let responses = batch.map { $0.attempt.idempotencyKey == nil ? "" : $0.receipt.storedJSON }
        let customers = Array(Set(attempts.map(\.customerId)))
        let codes = Array(Set(attempts.filter(\.oneTime).map(\.code)))
        let keys = Array(Set(attempts.compactMap(\.idempotencyKey)))
        repository.commitRedemptionBatch(
            tenant: key.tenant, campaignId: key.campaignId, customers: customers, oneTimeCodes: codes, keys: keys
        ) { snapshot in
            let verdicts = RedemptionDecider.decide(
                attempts, campaign: snapshot.record.campaign, at: at, redeemed: snapshot.record.redeemed,
                perCustomer: snapshot.perCustomer, usedCodes: snapshot.usedCodes, records: snapshot.idempotency)
            var writes = RedemptionWrites(redemptions: [], idempotency: [])
            for (index, verdict) in verdicts.enumerated() where verdict == .accepted {
                let attempt = attempts[index]
                writes.redemptions.append(
                    NewRedemption(
                        redemptionId: attempt.redemptionId, code: attempt.code, oneTime: attempt.oneTime,
                        customerId: attempt.customerId, idempotencyKey: attempt.idempotencyKey))
                if let idempotencyKey = attempt.idempotencyKey {
                    writes.idempotency.append(
                        (
                            idempotencyKey,
                            IdempotencyRecord(requestHash: attempt.requestHash, responseJSON: responses[index])
                        ))
                }
            }
            return (writes, verdicts)
        } reply: {
            reply($0)
        }
    }

    /// The answer to attempt `index` of a committed batch.
    static func answer(_ index: Int, verdicts: [RedemptionVerdict], batch: [Pending])
        -> Result<RedemptionReceipt, any Error>
    {
        switch verdicts[index] {
        case .accepted:
            return .success(batch[index].receipt)
        case .refused(let refusal):
            return .failure(GatewayError.refused(refusal))
        case .replay(let stored):
            guard let receipt = RedemptionReceipt(storedJSON: stored) else {
                return .failure(GatewayError.internal("stored idempotency outcome is not a redemption"))
            }
            return .success(receipt)
        case .sameAs(let first):
            return answer(first, verdicts: verdicts, batch: batch).map { $0.asReplay() }
        case .keyConflict:
            return .failure(
                GatewayError.conflict(
                    "the idempotency key was used with other params", reason: "idempotency_key_reused"))
        }
    }
}

/// A successful redemption as `codes.redeem` returns it. The same four ids are stored as JSON under an idempotency
/// key (the format every version reads back), and a replay returns them with `replayed: true`.
struct RedemptionReceipt: Sendable, Hashable {
    let redemptionId: String
    let campaignId: String
    let offerId: String
    let productId: String
    let replayed: Bool

    init(redemptionId: String, campaignId: String, offerId: String, productId: String, replayed: Bool) {
        self.redemptionId = redemptionId
        self.campaignId = campaignId
        self.offerId = offerId
        self.productId = productId
        self.replayed = replayed
    }

    /// A stored outcome, replayed; nil when it is not one.
    init?(storedJSON: String) {
        guard let object = (try? JSONParsing.parse(storedJSON))?.objectValue,
            let redemptionId = object["redemptionId"]?.stringValue, let campaignId = object["campaignId"]?.stringValue,
            let offerId = object["offerId"]?.stringValue, let productId = object["productId"]?.stringValue
        else { return nil }
        self.init(
            redemptionId: redemptionId, campaignId: campaignId, offerId: offerId, productId: productId, replayed: true)
    }

    /// What is stored under the idempotency key (without `replayed`).
    var storedJSON: String {
        let object: JSONValue = [
            "redemptionId": .string(redemptionId), "campaignId": .string(campaignId), "offerId": .string(offerId),
            "productId": .string(productId),
        ]
        return String(decoding: JSONSerializer.serialize(object), as: UTF8.self)
    }

    func asReplay() -> RedemptionReceipt {
        RedemptionReceipt(
            redemptionId: redemptionId, campaignId: campaignId, offerId: offerId, productId: productId, replayed: true)
    }
}
