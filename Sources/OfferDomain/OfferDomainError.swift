// OfferDomain: the pure core of OfferGate. No IO, no other module of ours; only the standard library and Foundation.

/// The single error type of `OfferDomain`.
///
/// Every error carries a machine-readable ``Code``, the `field` it concerns (a JSON-like path such as
/// `offers[2].periodCount`, when there is one) and a human message. The message never contains secrets;
/// domain values are not secret, but codes being validated are only echoed by length, never verbatim.
public struct OfferDomainError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Machine-readable error codes (snake_case raw values, stable for API `data.reason`).
    public enum Code: String, Sendable, Hashable, Codable, CaseIterable {
        case invalidMoney = "invalid_money"
        case currencyMismatch = "currency_mismatch"
        case invalidPeriod = "invalid_period"
        case invalidIdentifier = "invalid_identifier"
        case duplicateIdentifier = "duplicate_identifier"
        case unknownGroup = "unknown_group"
        case unknownProduct = "unknown_product"
        case unknownOffer = "unknown_offer"
        case invalidOffer = "invalid_offer"
        case tooManyPromotionalOffers = "too_many_promotional_offers"
        case invalidCode = "invalid_code"
        case invalidPattern = "invalid_pattern"
        case invalidCampaign = "invalid_campaign"
        case invalidCustomerId = "invalid_customer_id"
    }

    /// What went wrong, machine-readable.
    public let code: Code
    /// The field (path) the error concerns, if any, e.g. `products[1].groupId`.
    public let field: String?
    /// A short human explanation. Never contains secrets or full code values.
    public let message: String

    /// Creates an error.
    public init(_ code: Code, field: String? = nil, _ message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    /// `code` (`field`): message.
    public var description: String {
        if let field {
            return "\(code.rawValue) (\(field)): \(message)"
        }
        return "\(code.rawValue): \(message)"
    }
}
