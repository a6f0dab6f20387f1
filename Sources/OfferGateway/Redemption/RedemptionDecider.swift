import Foundation
import OfferDomain
import OfferStore

/// One `codes.redeem` request on its way into a batch (code and customer already normalised).
struct RedemptionAttempt: Sendable, Hashable {
    var customerId: String
    var code: String
    var oneTime: Bool
    var idempotencyKey: String?
    /// Hex SHA-256 of the method and the normalised params (see `RedemptionCoordinator.requestHash`).
    var requestHash: String
    /// The id this attempt's redemption gets if it is accepted.
    var redemptionId: UUID
}

/// What a batch decided for one attempt.
enum RedemptionVerdict: Sendable, Hashable {
    /// A new redemption (written in the batch's transaction).
    case accepted
    /// Refused for this reason (nothing written).
    case refused(Campaign.Refusal)
    /// The idempotency key has a stored outcome for the same params: replay it (stored JSON).
    case replay(String)
    /// Same key and params as attempt `index` of this batch: that attempt's outcome, replayed.
    case sameAs(Int)
    /// The idempotency key was used with other params (-32009).
    case keyConflict
}

/// The pure decision of a redemption batch, made inside the transaction after the campaign row is locked.
enum RedemptionDecider {
    /// Decides `attempts` in arrival order against the locked campaign row.
    ///
    /// Per attempt: a known idempotency key replays (same params) or conflicts (other params); then the campaign
    /// must be active at `at`; a one-time code already redeemed (before, or earlier in this batch) is exhausted;
    /// then `CampaignLimits.decide` applies the customer's limit and the total limit, counting the batch's own
    /// accepted attempts. Eligibility (new/existing/expired) is checked before an attempt joins a batch.
    static func decide(
        _ attempts: [RedemptionAttempt], campaign: Campaign, at: Date, redeemed: Int, perCustomer: [String: Int],
        usedCodes: Set<String>, records: [String: IdempotencyRecord]
    ) -> [RedemptionVerdict] {
        let stateRefusal = campaign.stateRefusal(at: at)
        var total = redeemed
        var counts = perCustomer
        var used = usedCodes
        var firstByKey: [String: Int] = [:]
        var verdicts: [RedemptionVerdict] = []
        verdicts.reserveCapacity(attempts.count)
        for (index, attempt) in attempts.enumerated() {
            if let key = attempt.idempotencyKey {
                if let record = records[key] {
                    verdicts.append(
                        record.requestHash == attempt.requestHash ? .replay(record.responseJSON) : .keyConflict)
                    continue
                }
                if let first = firstByKey[key] {
                    verdicts.append(attempts[first].requestHash == attempt.requestHash ? .sameAs(first) : .keyConflict)
                    continue
                }
                firstByKey[key] = index
            }
            if let stateRefusal {
                verdicts.append(.refused(stateRefusal))
                continue
            }
            if attempt.oneTime && used.contains(attempt.code) {
                verdicts.append(.refused(.codeExhausted))
                continue
            }
            let customer = attempt.customerId
            switch campaign.limits.decide(redeemed: total, customerRedeemed: counts[customer, default: 0]) {
            case .accepted:
                total += 1
                counts[customer, default: 0] += 1
                if attempt.oneTime { used.insert(attempt.code) }
                verdicts.append(.accepted)
            case .customerLimitReached:
                verdicts.append(.refused(.customerLimitReached))
            case .exhausted:
                verdicts.append(.refused(.codeExhausted))
            }
        }
        return verdicts
    }
}
