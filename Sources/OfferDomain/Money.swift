import Foundation

/// An exact amount of money in one currency. Never a floating-point number.
///
/// Amounts are parsed from plain decimal strings (`"19.99"`, `"0"`, `"1000.5"`): digits, an optional dot and
/// fraction digits. Signs, exponents (`"1e3"`), grouping separators and whitespace are rejected, so what is stored
/// is exactly what was written. At most 15 integer digits and 6 fraction digits, which `Decimal` holds exactly.
public struct Money: Sendable, Hashable, Codable, Comparable, CustomStringConvertible {
    /// The exact amount, never negative.
    public let amount: Decimal
    /// ISO 4217 currency code, three uppercase ASCII letters (`USD`, `EUR`, `JPY`).
    public let currency: String
    /// The amount as its shortest plain decimal string (`"19.99"`, `"5"`, `"19.9"` for an input of `"19.90"`):
    /// the canonical form for JSON, in the POSIX format, never a locale. Made once, with the value: every
    /// `offers.best` answer with a price writes it, and Foundation's formatting took ~1.5 µs a time.
    public let decimalString: String

    /// Maximum integer digits accepted by the parser.
    public static let maxIntegerDigits = 15
    /// Maximum fraction digits accepted by the parser.
    public static let maxFractionDigits = 6

    /// Parses a decimal string and a currency code.
    /// - Throws: ``OfferDomainError`` `invalid_money` naming `field` when either is malformed.
    public init(_ decimalString: String, currency: String, field: String = "price") throws(OfferDomainError) {
        guard Money.isValidCurrency(currency) else {
            throw OfferDomainError(.invalidMoney, field: "currency", "currency must be an ISO 4217 code like USD")
        }
        guard let amount = Money.parseAmount(decimalString) else {
            throw OfferDomainError(
                .invalidMoney, field: field,
                "amount must be a plain non-negative decimal like 19.99 (at most \(Money.maxIntegerDigits) integer "
                    + "and \(Money.maxFractionDigits) fraction digits)")
        }
        self.init(uncheckedAmount: amount, currency: currency)
    }

    /// Zero in the given currency (used for free trials).
    public static func zero(_ currency: String) -> Money {
        Money(uncheckedAmount: 0, currency: currency)
    }

    init(uncheckedAmount: Decimal, currency: String) {
        self.amount = uncheckedAmount
        self.currency = currency
        var value = uncheckedAmount
        self.decimalString = NSDecimalString(&value, Locale(identifier: "en_US_POSIX"))
    }

    /// `19.99 USD`.
    public var description: String { "\(decimalString) \(currency)" }

    /// Equal amounts, currencies and strings (what the synthesized `==` compared), with the amounts first compared
    /// by representation: two prices copied from one catalog are the same bits, and Foundation's `Decimal ==`
    /// normalises both operands first (~100 ns, and more in the savings' cross products).
    public static func == (lhs: Money, rhs: Money) -> Bool {
        (lhs.amount.isIdentical(to: rhs.amount) || lhs.amount == rhs.amount) && lhs.currency == rhs.currency
            && lhs.decimalString == rhs.decimalString
    }

    /// Orders by amount; amounts of different currencies are not comparable and order by currency code first.
    public static func < (lhs: Money, rhs: Money) -> Bool {
        if lhs.currency != rhs.currency { return lhs.currency < rhs.currency }
        return lhs.amount < rhs.amount
    }

    static func isValidCurrency(_ code: String) -> Bool {
        code.utf8.count == 3 && code.utf8.allSatisfy { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
    }

    static func parseAmount(_ text: String) -> Decimal? {
        let bytes = Array(text.utf8)
        var integerDigits = 0
        var fractionDigits = 0
        var seenDot = false
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if seenDot { fractionDigits += 1 } else { integerDigits += 1 }
            case UInt8(ascii: ".") where !seenDot:
                seenDot = true
            default:
                return nil
            }
        }
        guard integerDigits >= 1, integerDigits <= maxIntegerDigits, fractionDigits <= maxFractionDigits else {
            return nil
        }
        if seenDot && fractionDigits == 0 { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
    }

    private enum CodingKeys: String, CodingKey {
        case price, currency
    }

    /// Decodes `{"price": "19.99", "currency": "USD"}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let price = try container.decode(String.self, forKey: .price)
        let currency = try container.decode(String.self, forKey: .currency)
        do {
            try self.init(price, currency: currency)
        } catch {
            throw DecodingError.dataCorruptedError(
                forKey: .price, in: container, debugDescription: error.description)
        }
    }

    /// Encodes `{"price": "19.99", "currency": "USD"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(decimalString, forKey: .price)
        try container.encode(currency, forKey: .currency)
    }
}

extension Decimal {
    /// The same representation (exponent, length, sign and mantissa, bit for bit), which implies `==` for any number
    /// (not NaN). Foundation compacts the numbers it makes, but a value may still come in another representation
    /// (`10 × 10⁻¹` for 1): a fast path before `==`, never instead of it.
    func isIdentical(to other: Decimal) -> Bool {
        var lhs = self
        var rhs = other
        return memcmp(&lhs, &rhs, MemoryLayout<Decimal>.size) == 0 && !isNaN
    }
}
