import Foundation

/// What the database says about one campaign after a run.
public struct CampaignFacts: Sendable, Equatable, Codable {
    public let campaignId: String
    /// The campaign's total limit; nil for unlimited.
    public let totalLimit: Int?
    /// Successful, not rolled back redemptions recorded before the run (0 for a fresh campaign).
    public let recordedBefore: Int
    /// Successful, not rolled back redemptions recorded after the run.
    public let recordedAfter: Int
    /// The ids of the redemptions recorded after the run, when they were read (nil skips the "missing" check).
    public let recordedIds: Set<String>?

    public init(
        campaignId: String, totalLimit: Int?, recordedBefore: Int = 0, recordedAfter: Int,
        recordedIds: Set<String>? = nil
    ) {
        self.campaignId = campaignId
        self.totalLimit = totalLimit
        self.recordedBefore = recordedBefore
        self.recordedAfter = recordedAfter
        self.recordedIds = recordedIds
    }
}

/// The facts gathered after a redemption run: what the gateway acknowledged, and what the admin API and the
/// database recorded.
public struct RedemptionLedger: Sendable, Equatable {
    /// Every acknowledged redemption of the run (``RunResult/redemptions``).
    public var acknowledged: [AcknowledgedRedemption]
    /// One entry per campaign the run touched.
    public var campaigns: [CampaignFacts]
    /// How many (not rolled back) redemptions each one-time code has; codes absent have 0.
    public var oneTimeCodeRedemptions: [String: Int]
    /// How many redemptions each idempotency key of the run produced; keys absent have 0.
    public var idempotencyKeyRedemptions: [String: Int]

    public init(
        acknowledged: [AcknowledgedRedemption], campaigns: [CampaignFacts],
        oneTimeCodeRedemptions: [String: Int] = [:], idempotencyKeyRedemptions: [String: Int] = [:]
    ) {
        self.acknowledged = acknowledged
        self.campaigns = campaigns
        self.oneTimeCodeRedemptions = oneTimeCodeRedemptions
        self.idempotencyKeyRedemptions = idempotencyKeyRedemptions
    }

    /// Checks every invariant and lists every breach (not only the first).
    public func check() -> InvariantReport {
        var breaches: [InvariantBreach] = []
        // Distinct acknowledged redemptions per campaign: replays answer with the first redemption's id.
        var seen: [String: Set<String>] = [:]
        for ack in acknowledged { seen[ack.campaignId, default: []].insert(ack.redemptionId) }
        let known = Set(campaigns.map(\.campaignId))
        for campaign in seen.keys.sorted() where !known.contains(campaign) {
            breaches.append(.unknownCampaign(campaignId: campaign, acknowledged: seen[campaign]?.count ?? 0))
        }
        for facts in campaigns.sorted(by: { $0.campaignId < $1.campaignId }) {
            let ids = seen[facts.campaignId] ?? []
            let expected = facts.recordedBefore + ids.count
            if expected != facts.recordedAfter {
                breaches.append(
                    .successCountMismatch(
                        campaignId: facts.campaignId, acknowledged: ids.count, recordedBefore: facts.recordedBefore,
                        recordedAfter: facts.recordedAfter))
            }
            if let limit = facts.totalLimit, facts.recordedAfter > limit {
                breaches.append(.overLimit(campaignId: facts.campaignId, limit: limit, recorded: facts.recordedAfter))
            }
            if let limit = facts.totalLimit, facts.recordedBefore + ids.count > limit {
                // Acknowledged more than the limit allows, whatever the database says.
                breaches.append(
                    .acknowledgedOverLimit(
                        campaignId: facts.campaignId, limit: limit, acknowledged: facts.recordedBefore + ids.count))
            }
            if let recordedIds = facts.recordedIds {
                let missing = ids.subtracting(recordedIds).sorted()
                if !missing.isEmpty {
                    breaches.append(
                        .acknowledgedButMissing(
                            campaignId: facts.campaignId, count: missing.count, examples: Array(missing.prefix(5))))
                }
            }
        }
        let doubleCodes = oneTimeCodeRedemptions.filter { $0.value > 1 }
        if !doubleCodes.isEmpty {
            // Codes are bulk secrets: report how many, never which.
            breaches.append(
                .oneTimeCodeRedeemedTwice(codes: doubleCodes.count, worst: doubleCodes.values.max() ?? 0))
        }
        let doubleKeys = idempotencyKeyRedemptions.filter { $0.value > 1 }.sorted { $0.key < $1.key }
        if !doubleKeys.isEmpty {
            breaches.append(
                .idempotencyKeyRedeemedTwice(
                    keys: doubleKeys.count, examples: Array(doubleKeys.prefix(5).map { "\($0.key)×\($0.value)" })))
        }
        let checked = [
            "successes acknowledged == redemptions recorded", "recorded never above the limit",
            "acknowledged never above the limit", "every acknowledged redemption recorded",
            "no one-time code redeemed twice", "no idempotency key with two redemptions",
        ]
        return InvariantReport(checked: checked, breaches: breaches)
    }
}

/// One broken invariant.
public enum InvariantBreach: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Distinct successes acknowledged plus the redemptions recorded before ≠ redemptions recorded after.
    case successCountMismatch(campaignId: String, acknowledged: Int, recordedBefore: Int, recordedAfter: Int)
    /// The database holds more redemptions than the campaign's limit.
    case overLimit(campaignId: String, limit: Int, recorded: Int)
    /// The gateway acknowledged more successes than the limit allows.
    case acknowledgedOverLimit(campaignId: String, limit: Int, acknowledged: Int)
    /// Acknowledged redemption ids absent from the database (a success that was not durable).
    case acknowledgedButMissing(campaignId: String, count: Int, examples: [String])
    /// One-time codes with more than one redemption (how many codes, and the most redemptions of one).
    case oneTimeCodeRedeemedTwice(codes: Int, worst: Int)
    /// Idempotency keys with more than one redemption.
    case idempotencyKeyRedeemedTwice(keys: Int, examples: [String])
    /// A success acknowledged for a campaign the check has no facts about.
    case unknownCampaign(campaignId: String, acknowledged: Int)
    /// Acknowledged redemptions whose idempotency key, sent again after the run, did not answer the same
    /// redemption as a replay.
    case replayMismatch(count: Int, examples: [String])
    /// Signatures answered during the run that the issued-signature ledger does not hold.
    case signatureNotRecorded(count: Int)

    /// A stable snake_case name of the invariant.
    public var name: String {
        switch self {
        case .successCountMismatch: "success_count_mismatch"
        case .overLimit: "over_limit"
        case .acknowledgedOverLimit: "acknowledged_over_limit"
        case .acknowledgedButMissing: "acknowledged_but_missing"
        case .oneTimeCodeRedeemedTwice: "one_time_code_redeemed_twice"
        case .idempotencyKeyRedeemedTwice: "idempotency_key_redeemed_twice"
        case .unknownCampaign: "unknown_campaign"
        case .replayMismatch: "replay_mismatch"
        case .signatureNotRecorded: "signature_not_recorded"
        }
    }

    public var description: String {
        switch self {
        case .successCountMismatch(let c, let ack, let before, let after):
            "campaign \(c): \(ack) successes acknowledged + \(before) recorded before, but \(after) recorded after"
        case .overLimit(let c, let limit, let recorded):
            "campaign \(c): \(recorded) redemptions recorded, above its limit of \(limit)"
        case .acknowledgedOverLimit(let c, let limit, let ack):
            "campaign \(c): \(ack) successes acknowledged (with earlier ones), above its limit of \(limit)"
        case .acknowledgedButMissing(let c, let count, let examples):
            "campaign \(c): \(count) acknowledged redemptions missing from the database (e.g. "
                + examples.joined(separator: ", ") + ")"
        case .oneTimeCodeRedeemedTwice(let codes, let worst):
            "\(codes) one-time codes redeemed more than once (up to \(worst) times)"
        case .idempotencyKeyRedeemedTwice(let keys, let examples):
            "\(keys) idempotency keys with more than one redemption (e.g. " + examples.joined(separator: ", ") + ")"
        case .unknownCampaign(let c, let ack):
            "\(ack) successes acknowledged for campaign \(c), which the check has no facts about"
        case .replayMismatch(let count, let examples):
            "\(count) acknowledged redemptions did not replay with their idempotency key (e.g. "
                + examples.joined(separator: ", ") + ")"
        case .signatureNotRecorded(let count):
            "\(count) answered signatures missing from the issued-signature ledger"
        }
    }
}

/// The outcome of the invariant check: what was checked and every breach.
public struct InvariantReport: Sendable, Equatable, Codable {
    /// The invariants checked, in words.
    public let checked: [String]
    /// Every breach found; empty when all hold.
    public let breaches: [InvariantBreach]

    public init(checked: [String], breaches: [InvariantBreach]) {
        self.checked = checked
        self.breaches = breaches
    }

    public var passed: Bool { breaches.isEmpty }

    /// This report with more invariants checked and their breaches.
    public func adding(checked more: [String], breaches found: [InvariantBreach]) -> InvariantReport {
        InvariantReport(checked: checked + more, breaches: breaches + found)
    }

    /// The process exit status this report calls for: 0 when every invariant holds, 2 on any breach.
    public var exitStatus: Int32 { breaches.isEmpty ? 0 : 2 }
}
