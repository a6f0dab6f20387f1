import Foundation

/// Which customers a campaign admits, decided from their state in the offer's group.
public enum CampaignAudience: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    /// Never subscribed in the group.
    case new
    /// Currently subscribed: active, in billing retry or in a grace period.
    case existing
    /// Lapsed: expired, or revoked (a refunded customer counts as lapsed).
    case expired

    /// The audience a group state falls in.
    public init(_ state: GroupState) {
        switch state {
        case .never: self = .new
        case .active, .billingRetry, .gracePeriod: self = .existing
        case .expired, .revoked: self = .expired
        }
    }

    /// Orders `new`, `existing`, `expired`.
    public static func < (lhs: CampaignAudience, rhs: CampaignAudience) -> Bool {
        let order: [CampaignAudience] = [.new, .existing, .expired]
        return (order.firstIndex(of: lhs) ?? 0) < (order.firstIndex(of: rhs) ?? 0)
    }
}

/// A campaign's state at an instant.
public enum CampaignState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Before `startsAt`.
    case notStarted
    /// Redeemable.
    case active
    /// At or after `expiresAt`.
    case expired
    /// Deactivated by an admin (wins over every other state).
    case deactivated

    /// The state at `at`: deactivated if `deactivatedAt <= at`, else not started if `at < startsAt`, else expired
    /// if `at >= expiresAt`, else active.
    public static func at(_ at: Date, startsAt: Date?, expiresAt: Date?, deactivatedAt: Date?) -> CampaignState {
        if let deactivatedAt, deactivatedAt <= at { return .deactivated }
        if let startsAt, at < startsAt { return .notStarted }
        if let expiresAt, at >= expiresAt { return .expired }
        return .active
    }
}

/// One-time generated codes, or one vanity code.
public enum CampaignKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// Generated codes, each redeemable once.
    case oneTime
    /// One custom (vanity) code with an optional total limit.
    case custom
}

/// The limit arithmetic of a campaign: a total capacity (or unlimited) and a per-customer limit.
public struct CampaignLimits: Sendable, Hashable, Codable {
    /// Decision for one redemption request.
    public enum Decision: String, Sendable, Hashable, Codable {
        /// Fits.
        case accepted
        /// The campaign's total limit is reached.
        case exhausted
        /// This customer's limit is reached.
        case customerLimitReached
    }

    /// Total successful redemptions allowed; `nil` = unlimited.
    public var totalLimit: Int?
    /// Redemptions allowed per customer (default 1).
    public var perCustomerLimit: Int

    /// Creates limits.
    public init(totalLimit: Int?, perCustomerLimit: Int = 1) {
        self.totalLimit = totalLimit
        self.perCustomerLimit = perCustomerLimit
    }

    /// Capacity left after `redeemed` successful, not-rolled-back redemptions; `nil` = unlimited. Never negative.
    public func remaining(redeemed: Int) -> Int? {
        totalLimit.map { max(0, $0 - redeemed) }
    }

    /// Decides one request: refused for the customer's own limit first, then for the total limit.
    /// `redeemed` is the campaign's current count, `customerRedeemed` the customer's.
    public func decide(redeemed: Int, customerRedeemed: Int) -> Decision {
        if customerRedeemed >= perCustomerLimit { return .customerLimitReached }
        if let totalLimit, redeemed >= totalLimit { return .exhausted }
        return .accepted
    }
}

/// A code campaign's definition (pure part of `campaigns.create`).
public struct Campaign: Sendable, Hashable, Codable {
    /// Why a redemption is refused (the raw values are the API's `reason` codes; the gateway owns the wire codes).
    public enum Refusal: String, Sendable, Hashable, Codable, CaseIterable {
        case campaignNotStarted = "campaign_not_started"
        case campaignExpired = "campaign_expired"
        case campaignDeactivated = "campaign_deactivated"
        case notInCampaignEligibility = "not_in_campaign_eligibility"
        case codeExhausted = "code_exhausted"
        case customerLimitReached = "customer_limit_reached"
    }

    /// Apple's cap on one app's code redemptions per quarter.
    public static let appleQuarterlyRedemptionCap = 1_000_000
    /// Apple's cap on one-time code validity, in months.
    public static let appleOneTimeValidityMonths = 6

    /// Campaign id.
    public var id: String
    /// The offer it grants.
    public var offerId: String
    /// One-time or custom.
    public var kind: CampaignKind
    /// The normalised vanity code (custom campaigns only).
    public var code: String?
    /// The limits.
    public var limits: CampaignLimits
    /// Start (inclusive), if any.
    public var startsAt: Date?
    /// Expiry (exclusive), if any.
    public var expiresAt: Date?
    /// Which customers it admits (default all three).
    public var eligibility: Set<CampaignAudience>
    /// When it was deactivated, if it was.
    public var deactivatedAt: Date?

    /// Validates and creates a campaign; a custom code is normalised.
    /// - Throws: `invalid_campaign` or `invalid_code` naming the field.
    public init(
        id: String, offerId: String, kind: CampaignKind, code: String? = nil, totalLimit: Int? = nil,
        perCustomerLimit: Int = 1, startsAt: Date? = nil, expiresAt: Date? = nil,
        eligibility: Set<CampaignAudience> = Set(CampaignAudience.allCases), deactivatedAt: Date? = nil
    ) throws(OfferDomainError) {
        guard !id.isEmpty else { throw OfferDomainError(.invalidCampaign, field: "campaignId", "empty id") }
        switch (kind, code) {
        case (.custom, let code?):
            self.code = try CodeNormalizer.normalize(code)
        case (.custom, nil):
            throw OfferDomainError(.invalidCampaign, field: "code", "a custom campaign needs its code")
        case (.oneTime, nil):
            self.code = nil
        case (.oneTime, _?):
            throw OfferDomainError(.invalidCampaign, field: "code", "a oneTime campaign generates its codes")
        }
        if let totalLimit, totalLimit < 1 {
            throw OfferDomainError(.invalidCampaign, field: "totalLimit", "totalLimit must be at least 1 or null")
        }
        guard perCustomerLimit >= 1 else {
            throw OfferDomainError(.invalidCampaign, field: "perCustomerLimit", "perCustomerLimit must be at least 1")
        }
        if let startsAt, let expiresAt, expiresAt <= startsAt {
            throw OfferDomainError(.invalidCampaign, field: "expiresAt", "expiresAt must be after startsAt")
        }
        guard !eligibility.isEmpty else {
            throw OfferDomainError(.invalidCampaign, field: "eligibility", "eligibility must not be empty")
        }
        self.id = id
        self.offerId = offerId
        self.kind = kind
        self.limits = CampaignLimits(totalLimit: totalLimit, perCustomerLimit: perCustomerLimit)
        self.startsAt = startsAt
        self.expiresAt = expiresAt
        self.eligibility = eligibility
        self.deactivatedAt = deactivatedAt
    }

    /// The state at `at`.
    public func state(at: Date) -> CampaignState {
        CampaignState.at(at, startsAt: startsAt, expiresAt: expiresAt, deactivatedAt: deactivatedAt)
    }

    /// Whether a customer in `state` in the offer's group is in the eligibility set.
    public func admits(_ state: GroupState) -> Bool {
        eligibility.contains(CampaignAudience(state))
    }

    /// Whether the campaign admits every audience (then no customer history is needed to decide).
    public var admitsEveryone: Bool { eligibility.count == CampaignAudience.allCases.count }

    /// Why no redemption may proceed at `at` because of the campaign itself (not started, expired, deactivated),
    /// or `nil` while it is active.
    public func stateRefusal(at: Date) -> Refusal? {
        switch state(at: at) {
        case .notStarted: .campaignNotStarted
        case .expired: .campaignExpired
        case .deactivated: .campaignDeactivated
        case .active: nil
        }
    }

    /// Why a redemption would be refused, or `nil` if it may proceed: the one refusal order, used by `codes.validate`
    /// (read-only) and by every `codes.redeem` batch (under the campaign lock), so the two always agree:
    ///
    /// 1. the campaign itself: not started, expired, deactivated;
    /// 2. the customer is not in the campaign's eligibility;
    /// 3. this one-time code was redeemed already (`codeExhausted`);
    /// 4. the customer's own limit (checked before the total, so a refused request never uses capacity);
    /// 5. the total limit (`codeExhausted`).
    public func refusal(_ facts: RedemptionFacts) -> Refusal? {
        if let refusal = stateRefusal(at: facts.at) { return refusal }
        if !facts.customerEligible { return .notInCampaignEligibility }
        if facts.oneTimeCodeUsed { return .codeExhausted }
        switch limits.decide(redeemed: facts.redeemed, customerRedeemed: facts.customerRedeemed) {
        case .customerLimitReached: return .customerLimitReached
        case .exhausted: return .codeExhausted
        case .accepted: return nil
        }
    }

    /// Warnings `offerctl` shows (not errors): a total limit over Apple's quarterly cap, or one-time codes valid
    /// longer than Apple's six months (measured from `startsAt`, else from `createdAt`).
    public func appleCapWarnings(createdAt: Date) -> [String] {
        var warnings: [String] = []
        if let total = limits.totalLimit, total > Campaign.appleQuarterlyRedemptionCap {
            warnings.append("totalLimit exceeds Apple's 1,000,000 code redemptions per app per quarter")
        }
        if kind == .oneTime {
            let start = startsAt ?? createdAt
            let cap = CalendarMonths.adding(Campaign.appleOneTimeValidityMonths, to: start)
            if expiresAt.map({ $0 > cap }) ?? true {
                warnings.append("one-time codes are valid at most 6 months at Apple; set expiresAt accordingly")
            }
        }
        return warnings
    }
}

/// Everything a redemption decision looks at, at one instant (see ``Campaign/refusal(_:)``).
public struct RedemptionFacts: Sendable, Hashable {
    /// The decision time.
    public var at: Date
    /// Whether the customer's state in the offer's group is in the campaign's eligibility
    /// (``Campaign/admits(_:)``; always true for a campaign open to every audience).
    public var customerEligible: Bool
    /// Whether this one-time code is redeemed already (always false for a custom code).
    public var oneTimeCodeUsed: Bool
    /// The campaign's successful, not-rolled-back redemptions.
    public var redeemed: Int
    /// This customer's.
    public var customerRedeemed: Int

    /// Creates the facts of one decision.
    public init(at: Date, customerEligible: Bool, oneTimeCodeUsed: Bool, redeemed: Int, customerRedeemed: Int) {
        self.at = at
        self.customerEligible = customerEligible
        self.oneTimeCodeUsed = oneTimeCodeUsed
        self.redeemed = redeemed
        self.customerRedeemed = customerRedeemed
    }
}

/// Customer id normalisation: UUID-shaped ids (the recommended `appAccountToken`) are lowercased so they compare
/// case-insensitively; other ids are kept verbatim.
public enum CustomerID {
    /// The longest accepted id, in UTF-8 bytes.
    public static let maxLength = 256

    /// The canonical form of a customer id.
    /// - Throws: `invalid_customer_id` (field `customerId`) for an empty id, one over ``maxLength`` bytes, or one
    ///   containing control characters.
    public static func normalize(_ raw: String) throws(OfferDomainError) -> String {
        guard !raw.isEmpty, raw.utf8.count <= maxLength else {
            throw OfferDomainError(
                .invalidCustomerId, field: "customerId", "customerId must be 1-\(maxLength) bytes")
        }
        // Control characters (general category Cc) are exactly U+0000-U+001F and U+007F-U+009F; comparing values
        // avoids a Unicode property lookup per character on every request.
        guard !raw.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            throw OfferDomainError(.invalidCustomerId, field: "customerId", "customerId has control characters")
        }
        return isUUIDShaped(raw) ? raw.lowercased() : raw
    }

    /// 8-4-4-4-12 hexadecimal digits, any case.
    public static func isUUIDShaped(_ text: String) -> Bool {
        guard text.utf8.count == 36 else { return false }
        for (index, byte) in text.utf8.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                if byte != UInt8(ascii: "-") { return false }
            } else {
                let isHex =
                    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
                if !isHex { return false }
            }
        }
        return true
    }
}
