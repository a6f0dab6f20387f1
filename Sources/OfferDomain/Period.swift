import Foundation

/// A subscription or offer period as Apple writes it in ISO 8601: `P3D`, `P1W`, `P2W`, `P1M`, `P2M`, `P3M`, `P6M`,
/// `P1Y` (any positive value up to 999 of one unit is accepted; combined forms like `P1Y2M` are not).
public struct SubscriptionPeriod: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The calendar unit of a period.
    public enum Unit: String, Sendable, Hashable, Codable, CaseIterable {
        case day = "D"
        case week = "W"
        case month = "M"
        case year = "Y"

        /// Length of one unit in thirtieths of a month, per APPLE_OFFERS §4: day 1/30, week 7/30, month 1,
        /// year 12.
        public var thirtiethsOfMonth: Int {
            switch self {
            case .day: 1
            case .week: 7
            case .month: 30
            case .year: 360
            }
        }

        /// English singular noun (`day`).
        public var singular: String {
            switch self {
            case .day: "day"
            case .week: "week"
            case .month: "month"
            case .year: "year"
            }
        }
    }

    /// The unit.
    public let unit: Unit
    /// How many units, 1...999.
    public let value: Int

    /// Creates a period; `nil` unless `1...999`.
    public init?(_ value: Int, _ unit: Unit) {
        guard (1...999).contains(value) else { return nil }
        self.value = value
        self.unit = unit
    }

    /// Parses `P<n><D|W|M|Y>`; `nil` for anything else (lowercase, zero, signs, combined forms, time parts).
    public init?(iso8601 text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count >= 3, bytes.count <= 5, bytes[0] == UInt8(ascii: "P"),
            let unit = Unit(rawValue: String(decoding: bytes[(bytes.count - 1)...], as: UTF8.self))
        else { return nil }
        let digits = bytes[1..<(bytes.count - 1)]
        guard digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            digits.first != UInt8(ascii: "0"),
            let value = Int(String(decoding: digits, as: UTF8.self))
        else { return nil }
        self.init(value, unit)
    }

    /// Parses like ``init(iso8601:)`` but throws `invalid_period` naming `field`.
    public static func parse(_ text: String, field: String = "period") throws(OfferDomainError)
        -> SubscriptionPeriod
    {
        guard let period = SubscriptionPeriod(iso8601: text) else {
            throw OfferDomainError(.invalidPeriod, field: field, "period must be ISO 8601 like P1M, P1W, P1Y")
        }
        return period
    }

    /// `P1M`.
    public var iso8601: String { "P\(value)\(unit.rawValue)" }

    /// `P1M`.
    public var description: String { iso8601 }

    /// The exact length in thirtieths of a month (day = 1, week = 7, month = 30, year = 360 per unit). Use this
    /// for exact comparisons; ``monthsNormalised`` is the same divided by 30.
    public var thirtiethsOfMonth: Int { value * unit.thirtiethsOfMonth }

    /// Months normalised per APPLE_OFFERS §4 (day = 1/30, week = 7/30, month = 1, year = 12). Exact for months
    /// and years; day and week values are thirtieths rounded by `Decimal` to 38 digits (use
    /// ``thirtiethsOfMonth`` when exactness matters).
    public var monthsNormalised: Decimal { Decimal(thirtiethsOfMonth) / 30 }

    /// This period repeated `count` times (`P1W` × 2 = `P2W`); `nil` if the result is out of range.
    public func times(_ count: Int) -> SubscriptionPeriod? {
        let (product, overflow) = value.multipliedReportingOverflow(by: count)
        guard !overflow else { return nil }
        return SubscriptionPeriod(product, unit)
    }

    /// English words: `1 week`, `2 weeks`, `3 days`, `1 year`, `6 months`. One unit is always singular.
    public var englishDuration: String {
        value == 1 ? "1 \(unit.singular)" : "\(value) \(unit.singular)s"
    }

    /// Decodes from an ISO 8601 string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let period = SubscriptionPeriod(iso8601: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "invalid ISO 8601 period")
        }
        self = period
    }

    /// Encodes as an ISO 8601 string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(iso8601)
    }
}

/// How an offer charges (raw values as in API.md).
public enum PaymentMode: String, Sendable, Hashable, Codable, CaseIterable {
    /// One period free.
    case freeTrial
    /// A discounted price per billing period for `periodCount` periods (1-12).
    case payAsYouGo
    /// One price for the whole offer period.
    case payUpFront

    /// Apple's `offerDiscountType` (`FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT`).
    public init?(appleDiscountType: String) {
        switch appleDiscountType {
        case "FREE_TRIAL": self = .freeTrial
        case "PAY_AS_YOU_GO": self = .payAsYouGo
        case "PAY_UP_FRONT": self = .payUpFront
        default: return nil
        }
    }

    /// Apple's `offerDiscountType` spelling.
    public var appleDiscountType: String {
        switch self {
        case .freeTrial: "FREE_TRIAL"
        case .payAsYouGo: "PAY_AS_YOU_GO"
        case .payUpFront: "PAY_UP_FRONT"
        }
    }
}

/// The four kinds of subscription offer (raw values as in API.md).
public enum OfferType: String, Sendable, Hashable, Codable, CaseIterable {
    case introductory
    case promotional
    case code
    case winBack

    /// Apple's numeric `offerType`: 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    public init?(appleNumber: Int) {
        switch appleNumber {
        case 1: self = .introductory
        case 2: self = .promotional
        case 3: self = .code
        case 4: self = .winBack
        default: return nil
        }
    }

    /// Apple's number for this type.
    public var appleNumber: Int {
        switch self {
        case .introductory: 1
        case .promotional: 2
        case .code: 3
        case .winBack: 4
        }
    }

    /// Ranking priority for best-offer selection (higher wins): win-back 3, promotional 2, introductory 1,
    /// code 0 (code offers never compete).
    public var bestOfferPriority: Int {
        switch self {
        case .winBack: 3
        case .promotional: 2
        case .introductory: 1
        case .code: 0
        }
    }
}
