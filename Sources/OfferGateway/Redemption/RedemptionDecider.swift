import Foundation
import OfferDomain
import OfferStore

/// One `codes.redeem` request on its way into a batch (code and customer already normalised).
struct RedemptionAttempt: Sendable, Hashable {
    var customerId: String
    var code: String
    var oneTime: Bool
    /// Whether the customer is in the campaign's eligibility (decided from their history before the attempt joins
    /// a batch; always true for a campaign open to everyone).
    var eligible: Bool
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
    /// Per attempt: a known idempotency key replays (same params) or conflicts (other params); otherwise the one
    /// refusal order of the domain (`Campaign.refusal`, the same rule `codes.validate` applies) decides, over the
    /// stored counts plus the attempts this batch accepted before it.
    static func decide(
        _ attempts: [RedemptionAttempt], campaign: Campaign, at: Date, redeemed: Int, perCustomer: [String: Int],
        usedCodes: Set<String>, records: [String: IdempotencyRecord]
    ) -> [RedemptionVerdict] {
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
            let facts = RedemptionFacts(
                at: at, customerEligible: attempt.eligible,
                oneTimeCodeUsed: attempt.oneTime && used.contains(attempt.code),
                redeemed: total, customerRedeemed: counts[attempt.customerId, default: 0])
            if let refusal = campaign.refusal(facts) {
                verdicts.append(.refused(refusal))
                continue
            }
            total += 1
            counts[attempt.customerId, default: 0] += 1
            if attempt.oneTime { used.insert(attempt.code) }
            verdicts.append(.accepted)
        }
        return verdicts
    }
}
