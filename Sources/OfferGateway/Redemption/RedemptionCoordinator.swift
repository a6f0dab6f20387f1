import Foundation
import JSONRPC
import OfferCrypto
import OfferDomain
import OfferStore
import Synchronization

/// Group commit of code redemptions: one owner per campaign (a `GroupCommitBatcher` behind a `Mutex`) collects the
/// redemptions that arrive while the previous batch commits, and writes each batch in ONE transaction
/// (`CampaignRepository.commitRedemptionBatch`). Every request is answered only after its batch's `COMMIT`
/// succeeded; when the transaction fails, every request of the batch gets the error (-32050 when the database is
/// unreachable: the outcome of a failed `COMMIT` is unknown, so clients retry with their idempotency key).
///
/// The database stays the arbiter between processes: each batch locks the campaign row and re-reads the counters
/// before deciding, and the counter update is conditional on the limit.
final class RedemptionCoordinator: Sendable {
    /// Campaigns are owned per tenant and id.
    struct Key: Hashable, Sendable {
        let tenant: UUID
        let campaignId: String
    }

    /// A waiting request.
    struct Pending: Sendable {
        let attempt: RedemptionAttempt
        /// The result JSON to return (and store for the idempotency key), without `replayed`.
        let response: JSONValue
        let continuation: CheckedContinuation<JSONValue, any Error>
    }

    private let repository: CampaignRepository
    private let clock: @Sendable () -> Date
    private let maxBatchSize: Int
    private let linger: Duration?
    private let owners = Mutex<[Key: GroupCommitBatcher<Pending>]>([:])
    private let customCodes = Mutex<[CodeKey: CodeLookup]>([:])
    private let counters = Mutex<(batches: Int, redemptions: Int)>((0, 0))

    private struct CodeKey: Hashable, Sendable {
        let tenant: UUID
        let code: String
    }

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
        self.maxBatchSize = maxBatchSize
        self.linger = linger
    }

    /// Batches committed and redemptions written by this process (for stats and tests).
    var committed: (batches: Int, redemptions: Int) { counters.withLock { $0 } }

    /// The campaign behind a normalised code. Custom codes are cached (a code never changes campaign, and the parts
    /// of a campaign that can change, its deactivation and counters, are re-read under lock by every batch).
    func lookup(tenant: UUID, code: String) async throws -> CodeLookup? {
        let key = CodeKey(tenant: tenant, code: code)
        if let cached = customCodes.withLock({ $0[key] }) { return cached }
        let found = try await repository.lookup(tenant: tenant, code: code)
        if let found, !found.oneTime {
            customCodes.withLock { cache in
                if cache.count > 10_000 { cache.removeAll() }
                cache[key] = found
            }
        }
        return found
    }

    /// The idempotency hash of a redemption request: method and normalised params.
    static func requestHash(code: String, customerId: String) -> String {
        SHA256.hex("codes.redeem\u{0}\(code)\u{0}\(customerId)")
    }

    /// Redeems through the campaign's batch and returns the JSON result (or throws the `GatewayError` of a
    /// refusal). `productId` is the product of the campaign's offer.
    func redeem(tenant: UUID, lookup: CodeLookup, productId: String, customerId: String, idempotencyKey: String?)
        async throws -> JSONValue
    {
        let campaign = lookup.record.campaign
        let attempt = RedemptionAttempt(
            customerId: customerId, code: lookup.code, oneTime: lookup.oneTime, idempotencyKey: idempotencyKey,
            requestHash: Self.requestHash(code: lookup.code, customerId: customerId), redemptionId: UUID.secureRandom())
        let response: JSONValue = [
            "redemptionId": .string(attempt.redemptionId.uuidString.lowercased()), "campaignId": .string(campaign.id),
            "offerId": .string(campaign.offerId), "productId": .string(productId),
        ]
        let key = Key(tenant: tenant, campaignId: campaign.id)
        return try await withCheckedThrowingContinuation { continuation in
            let pending = Pending(attempt: attempt, response: response, continuation: continuation)
            let action = owners.withLock { owners in
                if owners[key] == nil {
                    owners[key] = GroupCommitBatcher(maxBatchSize: maxBatchSize, lingers: linger != nil)
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
        let attempts = batch.map(\.attempt)
        // Stored outcomes are needed only for attempts with an idempotency key.
        let responses = batch.map {
            $0.attempt.idempotencyKey == nil
                ? "" : String(decoding: JSONSerializer.serialize($0.response), as: UTF8.self)
        }
        let at = clock()
        let customers = Array(Set(attempts.map(\.customerId)))
        let codes = Array(Set(attempts.filter(\.oneTime).map(\.code)))
        let keys = Array(Set(attempts.compactMap(\.idempotencyKey)))
        do {
            let verdicts = try await repository.commitRedemptionBatch(
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
            }
            let accepted = verdicts.filter { $0 == .accepted }.count
            counters.withLock {
                $0.batches += 1
                $0.redemptions += accepted
            }
            for (index, pending) in batch.enumerated() {
                pending.continuation.resume(with: Self.answer(index, verdicts: verdicts, batch: batch))
            }
        } catch {
            let failure = Self.gatewayError(error)
            for pending in batch { pending.continuation.resume(throwing: failure) }
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

    /// The answer to attempt `index` of a committed batch.
    static func answer(_ index: Int, verdicts: [RedemptionVerdict], batch: [Pending]) -> Result<JSONValue, any Error> {
        switch verdicts[index] {
        case .accepted:
            return .success(with(batch[index].response, replayed: false))
        case .refused(let refusal):
            return .failure(refusalError(refusal))
        case .replay(let stored):
            guard let value = try? JSONParsing.parse(stored) else {
                return .failure(GatewayError.internal("stored idempotency outcome is not JSON"))
            }
            return .success(with(value, replayed: true))
        case .sameAs(let first):
            return answer(first, verdicts: verdicts, batch: batch).map { with($0, replayed: true) }
        case .keyConflict:
            return .failure(keyConflict())
        }
    }

    static func with(_ value: JSONValue, replayed: Bool) -> JSONValue {
        guard var object = value.objectValue else { return value }
        object["replayed"] = .bool(replayed)
        return .object(object)
    }

    static func keyConflict() -> GatewayError {
        .conflict("the idempotency key was used with other params", reason: "idempotency_key_reused")
    }

    /// The API error of a refusal (API.md §4 codes.redeem).
    static func refusalError(_ refusal: Campaign.Refusal) -> GatewayError {
        switch refusal {
        case .codeExhausted:
            return .code(
                refusal.rpcCode, "the code is exhausted (limit reached or one-time code used)", reason: refusal.rawValue
            )
        case .customerLimitReached:
            return .code(refusal.rpcCode, "the customer reached this campaign's limit", reason: refusal.rawValue)
        case .campaignNotStarted:
            return .code(refusal.rpcCode, "the campaign has not started", reason: refusal.rawValue)
        case .campaignExpired:
            return .code(refusal.rpcCode, "the campaign has expired", reason: refusal.rawValue)
        case .campaignDeactivated:
            return .code(refusal.rpcCode, "the campaign was deactivated", reason: refusal.rawValue)
        case .notInCampaignEligibility:
            return .notEligible("the customer is not in the campaign's eligibility", reasons: [refusal.rawValue])
        }
    }

    static func gatewayError(_ error: any Error) -> GatewayError {
        switch error {
        case let error as GatewayError: return error
        case let error as StoreError: return GatewayError(error)
        default: return .internal("\(error)")
        }
    }
}
