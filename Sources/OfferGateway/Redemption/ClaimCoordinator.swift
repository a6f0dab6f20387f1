import Foundation
import OfferCrypto
import OfferDomain
import OfferStore

/// One `codes.claim` request on its way into a batch (customer already normalised).
struct ClaimAttempt: Sendable, Hashable {
    var customerId: String
    /// Whether the customer is in the campaign's eligibility (decided from their history before the attempt joins
    /// a batch; always true for a campaign open to everyone).
    var eligible: Bool
    var idempotencyKey: String?
    /// Hex SHA-256 of the method and the normalised params (see `ClaimCoordinator.requestHash`).
    var requestHash: String
    /// The id this attempt's claim gets if it is accepted.
    var claimId: UUID
}

/// What a claim batch decided for one attempt.
enum ClaimVerdict: Sendable, Hashable {
    /// A new claim of this free code (written in the batch's transaction).
    case accepted(code: String)
    /// The customer holds this claim already: it is answered again.
    case replay(StoredClaim)
    /// The same customer (or the same key and params) as attempt `index` of this batch: its outcome, replayed.
    case sameAs(Int)
    /// Refused for this reason (nothing written); `codeExhausted` when no code is left.
    case refused(Campaign.Refusal)
    /// The idempotency key was used with other params (-32009).
    case keyConflict
}

/// The pure decision of a claim batch, made inside the transaction after the campaign row is locked.
enum ClaimDecider {
    /// Decides `attempts` in arrival order. Per attempt: a known idempotency key with other params conflicts; a
    /// customer who holds a claim gets it again (whatever the campaign's state now: the code is theirs); otherwise
    /// the domain's refusal order (`Campaign.refusal`, as for redemptions, over the claims counted so far) decides,
    /// and an accepted attempt takes the next free code, or is refused `codeExhausted` when none is left.
    static func decide(
        _ attempts: [ClaimAttempt], campaign: Campaign, at: Date, claimed: Int, claims: [String: StoredClaim],
        freeCodes: [String], records: [String: IdempotencyRecord]
    ) -> [ClaimVerdict] {
        var total = claimed
        var nextCode = 0
        var firstByKey: [String: Int] = [:]
        var acceptedByCustomer: [String: Int] = [:]
        var verdicts: [ClaimVerdict] = []
        verdicts.reserveCapacity(attempts.count)
        for (index, attempt) in attempts.enumerated() {
            if let key = attempt.idempotencyKey {
                if let record = records[key], record.requestHash != attempt.requestHash {
                    verdicts.append(.keyConflict)
                    continue
                }
                if let first = firstByKey[key], attempts[first].requestHash != attempt.requestHash {
                    verdicts.append(.keyConflict)
                    continue
                }
                if firstByKey[key] == nil { firstByKey[key] = index }
            }
            if let held = claims[attempt.customerId] {
                verdicts.append(.replay(held))
                continue
            }
            if let first = acceptedByCustomer[attempt.customerId] {
                verdicts.append(.sameAs(first))
                continue
            }
            let facts = RedemptionFacts(
                at: at, customerEligible: attempt.eligible, oneTimeCodeUsed: false, redeemed: total,
                customerRedeemed: 0)
            if let refusal = campaign.refusal(facts) {
                verdicts.append(.refused(refusal))
                continue
            }
            guard nextCode < freeCodes.count else {
                verdicts.append(.refused(.codeExhausted))
                continue
            }
            verdicts.append(.accepted(code: freeCodes[nextCode]))
            nextCode += 1
            total += 1
            acceptedByCustomer[attempt.customerId] = index
        }
        return verdicts
    }
}

/// A code handed to a customer, as `codes.claim` returns it. The code is a secret: this type is never logged.
struct ClaimReceipt: Sendable, Hashable {
    let claimId: String
    let code: String
    let campaignId: String
    let offerId: String
    let productId: String
    let replayed: Bool

    func asReplay() -> ClaimReceipt {
        ClaimReceipt(
            claimId: claimId, code: code, campaignId: campaignId, offerId: offerId, productId: productId,
            replayed: true)
    }
}

/// Group commit of claims of Apple's one-time codes: the same per-campaign owner as redemptions
/// (`CampaignBatches`), with `CampaignRepository.commitClaimBatch` as the batch transaction.
///
/// Why group commit rather than one `UPDATE … FOR UPDATE SKIP LOCKED` statement per claim: limits, windows and
/// eligibility must be decided by the same rule as redemptions (`Campaign.refusal`) against counters read under
/// the campaign row's lock, and a total limit needs a counter in that row; with one statement per claim every claim
/// would lock and fsync that hot row on its own (B1's plain baseline), while a batch locks and commits it once for
/// up to `maxBatchSize` claims. SKIP LOCKED buys nothing inside the lock: only one batch of a campaign runs at a
/// time, in every process.
final class ClaimCoordinator: Sendable {
    struct Pending: Sendable {
        let attempt: ClaimAttempt
        let campaignId: String
        let offerId: String
        let productId: String
    }

    private let repository: CampaignRepository
    private let batches: CampaignBatches<Pending, ClaimReceipt>

    init(
        repository: CampaignRepository, clock: @escaping @Sendable () -> Date, maxBatchSize: Int = 512,
        linger: Duration? = nil
    ) {
        self.repository = repository
        batches = CampaignBatches(maxBatchSize: maxBatchSize, linger: linger) { key, batch, reply in
            Self.commit(batch, key: key, repository: repository, at: clock()) { committed in
                reply(
                    committed.mapError { $0 as any Error }.map { verdicts in
                        batch.indices.map { Self.answer($0, verdicts: verdicts, batch: batch) }
                    })
            }
        }
    }

    /// The idempotency hash of a claim request: method and normalised params.
    static func requestHash(campaignId: String, customerId: String) -> String {
        SHA256.hex("codes.claim\u{0}\(campaignId)\u{0}\(customerId)")
    }

    /// Claims a code through the campaign's batch: returns it once its batch committed, or throws the refusal
    /// (`GatewayError.refused`), a key conflict, or what the database said.
    func claim(
        tenant: UUID, campaign: Campaign, productId: String, customerId: String, eligible: Bool,
        idempotencyKey: String?
    ) async throws -> ClaimReceipt {
        let attempt = ClaimAttempt(
            customerId: customerId, eligible: eligible, idempotencyKey: idempotencyKey,
            requestHash: Self.requestHash(campaignId: campaign.id, customerId: customerId),
            claimId: UUID.timeOrdered())
        return try await batches.submit(
            Pending(attempt: attempt, campaignId: campaign.id, offerId: campaign.offerId, productId: productId),
            key: .init(tenant: tenant, campaignId: campaign.id))
    }

    /// Commits one batch without a task (`CampaignRepository.commitClaimBatch(…reply:)`): `reply` is called on the
    /// connection's queue, where the campaign's next batch then starts.
    private static func commit(
        _ batch: [Pending], key: CampaignBatches<Pending, ClaimReceipt>.Key, repository: CampaignRepository, at: Date,
        reply: @escaping @Sendable (Result<[ClaimVerdict], StoreError>) -> Void
    ) {
        let attempts = batch.map(\.attempt)
        repository.commitClaimBatch(
            tenant: key.tenant, campaignId: key.campaignId, customers: Array(Set(attempts.map(\.customerId))),
            keys: Array(Set(attempts.compactMap(\.idempotencyKey))), wanted: attempts.count, at: at
        ) { snapshot in
            let verdicts = ClaimDecider.decide(
                attempts, campaign: snapshot.record.campaign, at: at, claimed: snapshot.record.redeemed,
                claims: snapshot.claims, freeCodes: snapshot.freeCodes, records: snapshot.idempotency)
            var writes = ClaimWrites(claims: [], idempotency: [])
            for (index, verdict) in verdicts.enumerated() {
                guard case .accepted(let code) = verdict else { continue }
                let attempt = attempts[index]
                writes.claims.append(
                    (
                        StoredClaim(claimId: attempt.claimId, code: code, customerId: attempt.customerId),
                        attempt.idempotencyKey
                    ))
                if let idempotencyKey = attempt.idempotencyKey {
                    let stored = "{\"claimId\":\"\(attempt.claimId.lowercasedString)\"}"
                    writes.idempotency.append(
                        (idempotencyKey, IdempotencyRecord(requestHash: attempt.requestHash, responseJSON: stored)))
                }
            }
            return (writes, verdicts)
        } reply: {
            reply($0)
        }
    }

    static func answer(_ index: Int, verdicts: [ClaimVerdict], batch: [Pending]) -> Result<ClaimReceipt, any Error> {
        let pending = batch[index]
        func receipt(_ claimId: UUID, _ code: String, replayed: Bool) -> ClaimReceipt {
            ClaimReceipt(
                claimId: claimId.lowercasedString, code: code, campaignId: pending.campaignId,
                offerId: pending.offerId, productId: pending.productId, replayed: replayed)
        }
        switch verdicts[index] {
        case .accepted(let code):
            return .success(receipt(pending.attempt.claimId, code, replayed: false))
        case .replay(let claim):
            return .success(receipt(claim.claimId, claim.code, replayed: true))
        case .sameAs(let first):
            return answer(first, verdicts: verdicts, batch: batch).map { $0.asReplay() }
        case .refused(let refusal):
            return .failure(GatewayError.refused(refusal))
        case .keyConflict:
            return .failure(
                GatewayError.conflict(
                    "the idempotency key was used with other params", reason: "idempotency_key_reused"))
        }
    }
}
