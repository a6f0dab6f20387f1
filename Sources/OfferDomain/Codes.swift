import Foundation

/// Offer-code normalisation: case-insensitive, spaces and hyphens ignored.
public enum CodeNormalizer {
    /// The longest normalised code accepted (Apple's custom codes are at most 64 characters).
    public static let maxLength = 64

    /// Normalises a code as typed: drops whitespace and hyphens, uppercases ASCII letters.
    /// `" spring-2026 "` → `"SPRING2026"`.
    /// - Throws: `invalid_code` (field `code`) when nothing is left, when a character other than an ASCII letter
    ///   or digit remains, or when it is longer than ``maxLength``. The message never echoes the code.
    public static func normalize(_ raw: String, field: String = "code") throws(OfferDomainError) -> String {
        var result = ""
        result.reserveCapacity(raw.utf8.count)
        for scalar in raw.unicodeScalars {
            switch scalar.value {
            case 0x30...0x39, 0x41...0x5A:
                result.unicodeScalars.append(scalar)
            case 0x61...0x7A:
                result.unicodeScalars.append(Unicode.Scalar(UInt8(scalar.value - 0x20)))
            case 0x2D:
                continue
            // Whitespace is looked up only for what is not a letter, digit or hyphen (a property lookup per character
            // was a visible part of every redemption).
            case _ where scalar.properties.isWhitespace:
                continue
            default:
                throw OfferDomainError(
                    .invalidCode, field: field, "a code may contain only letters A-Z, digits, spaces and hyphens")
            }
        }
        guard !result.isEmpty else {
            throw OfferDomainError(.invalidCode, field: field, "the code is empty")
        }
        guard result.utf8.count <= maxLength else {
            throw OfferDomainError(.invalidCode, field: field, "a code has at most \(maxLength) letters and digits")
        }
        return result
    }
}

/// Generates one-time codes from a pattern: `#` is one random character of ``alphabet``; every other character
/// is kept literally (`SPRING-####-####` → `SPRING-7KQ2-MX9D`). Without a pattern, 12 random characters.
public struct CodeGenerator: Sendable, Hashable {
    /// The generation alphabet: A-Z and 2-9 without the look-alikes 0 O 1 I L (31 characters).
    public static let alphabet: [UInt8] = Array("ABCDEFGHJKMNPQRSTUVWXYZ23456789".utf8)
    /// Pattern used when none is given: 12 random characters.
    public static let defaultPattern = "############"
    /// Fewest `#` a pattern may have (31⁴ ≈ 923,521 codes).
    public static let minimumRandomCharacters = 4

    /// The pattern (uppercased).
    public let pattern: String
    /// How many random characters each code has.
    public let randomLength: Int
    private let template: [UInt8]

    /// Validates a pattern: `#`, ASCII letters (uppercased), digits, hyphens and spaces; at least
    /// ``minimumRandomCharacters`` `#`; the normalised code at most ``CodeNormalizer/maxLength`` long.
    /// - Throws: `invalid_pattern` (field `pattern`).
    public init(pattern: String? = nil) throws(OfferDomainError) {
        let text = pattern ?? CodeGenerator.defaultPattern
        var template: [UInt8] = []
        var random = 0
        var significant = 0
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "#"):
                random += 1
                significant += 1
                template.append(byte)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                significant += 1
                template.append(byte)
            case UInt8(ascii: "a")...UInt8(ascii: "z"):
                significant += 1
                template.append(byte - 0x20)
            case UInt8(ascii: "-"), UInt8(ascii: " "):
                template.append(byte)
            default:
                throw OfferDomainError(
                    .invalidPattern, field: "pattern", "a pattern may contain only #, letters, digits, - and spaces")
            }
        }
        guard random >= CodeGenerator.minimumRandomCharacters else {
            throw OfferDomainError(
                .invalidPattern, field: "pattern",
                "a pattern needs at least \(CodeGenerator.minimumRandomCharacters) # (random characters)")
        }
        guard significant <= CodeNormalizer.maxLength else {
            throw OfferDomainError(
                .invalidPattern, field: "pattern", "codes may have at most \(CodeNormalizer.maxLength) characters")
        }
        self.pattern = String(decoding: template, as: UTF8.self)
        self.randomLength = random
        self.template = template
    }

    /// One code as displayed (literal hyphens and spaces kept). Draws one uniform index per `#` from `generator`
    /// (pass `SystemRandomNumberGenerator` in production, a seeded generator in tests).
    public func generate(using generator: inout some RandomNumberGenerator) -> String {
        var bytes = template
        let alphabet = CodeGenerator.alphabet
        for index in bytes.indices where bytes[index] == UInt8(ascii: "#") {
            bytes[index] = alphabet[Int.random(in: 0..<alphabet.count, using: &generator)]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `count` codes, normalised (hyphens and spaces removed, as stored and compared), possibly with duplicates:
    /// the caller de-duplicates against its store (see ``CollisionOdds``).
    public func generateNormalized(count: Int, using generator: inout some RandomNumberGenerator) -> [String] {
        (0..<max(count, 0)).map { _ in
            String(decoding: generate(using: &generator).utf8.filter { $0 != 0x2D && $0 != 0x20 }, as: UTF8.self)
        }
    }

    /// Distinct codes this pattern can produce: 31^randomLength (saturating at `Double` precision).
    public var capacity: Double { pow(Double(CodeGenerator.alphabet.count), Double(randomLength)) }
}

/// Birthday-bound odds of duplicate codes. `Double` is right here: these are probabilities, not money.
public enum CollisionOdds {
    /// Probability that `count` uniform draws from `space` values contain at least one duplicate:
    /// `1 − exp(−n(n−1) / 2N)` (1 when `count > space`).
    public static func probability(count: Int, space: Double) -> Double {
        guard count > 1, space > 0 else { return 0 }
        let n = Double(count)
        if n > space { return 1 }
        return -expm1(-n * (n - 1) / (2 * space))
    }

    /// Probability of at least one duplicate among `count` codes of `length` random characters from an alphabet
    /// of `alphabetSize` (default 31).
    public static func probability(count: Int, length: Int, alphabetSize: Int = CodeGenerator.alphabet.count)
        -> Double
    {
        probability(count: count, space: pow(Double(alphabetSize), Double(length)))
    }

    /// Expected number of colliding pairs: `n(n−1) / 2N`.
    public static func expectedCollisions(count: Int, length: Int, alphabetSize: Int = CodeGenerator.alphabet.count)
        -> Double
    {
        guard count > 1 else { return 0 }
        let n = Double(count)
        return n * (n - 1) / (2 * pow(Double(alphabetSize), Double(length)))
    }

    /// The shortest random length whose collision probability for `count` codes is at most `maxProbability`
    /// (capped at ``CodeNormalizer/maxLength``).
    public static func minimumLength(count: Int, maxProbability: Double) -> Int {
        for length in 1...CodeNormalizer.maxLength
        where probability(count: count, length: length) <= maxProbability {
            return length
        }
        return CodeNormalizer.maxLength
    }
}
