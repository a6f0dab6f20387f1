import CivilTime
import Foundation

// MARK: - numeric

/// An exact `numeric` value, kept as PostgreSQL's decimal text (e.g. `"-12345678901234567890.123456789"`,
/// `"NaN"`). Never goes through `Double`.
public struct PostgresNumeric: Sendable, Hashable, CustomStringConvertible, PostgresCodable {
    /// The canonical decimal text.
    public let text: String

    /// Validates `text` as a plain decimal (`-?digits[.digits]`) or `NaN`/`Infinity`/`-Infinity`.
    public init?(_ text: String) {
        guard Self.isValid(text) else { return nil }
        self.text = text
    }

    /// An exact integer.
    public init<I: BinaryInteger>(_ value: I) { self.text = String(value) }

    /// The exact value of a `Decimal` (no exponent notation).
    public init?(_ decimal: Decimal) {
        guard decimal.isFinite else { return nil }
        self.init(Self.plainString(decimal))
    }

    /// The value as a Foundation `Decimal` (nil for NaN/Infinity or more than 38 significant digits).
    public var decimal: Decimal? {
        guard text != "NaN", !text.hasSuffix("Infinity") else { return nil }
        let digits = text.filter(\.isNumber).drop(while: { $0 == "0" })
        guard digits.count <= 38 else { return nil }
        return Decimal(string: text, locale: Locale(identifier: "en_US_POSIX"))
    }

    public var description: String { text }

    public static var postgresType: PostgresDataType { .numeric }
    public func postgresBind() -> PostgresBind { PostgresBind(type: .numeric, text: text) }
    public static func decode(from cell: PostgresCell) throws -> PostgresNumeric {
        try cell.expect([.numeric, .int2, .int4, .int8], as: PostgresNumeric.self)
        guard let value = PostgresNumeric(cell.string) else { throw cell.failure(PostgresNumeric.self) }
        return value
    }

    static func isValid(_ text: String) -> Bool {
        if text == "NaN" || text == "Infinity" || text == "-Infinity" { return true }
        var utf8 = Substring(text).utf8[...]
        if utf8.first == UInt8(ascii: "-") || utf8.first == UInt8(ascii: "+") { utf8 = utf8.dropFirst() }
        let parts = utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2, let intPart = parts.first, !intPart.isEmpty else { return false }
        let isDigits = { (s: Substring.UTF8View.SubSequence) in
            s.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        }
        guard isDigits(intPart) else { return false }
        if parts.count == 2 { return !parts[1].isEmpty && isDigits(parts[1]) }
        return true
    }

    /// Decimal's description is plain notation (no exponent) with `.` as separator.
    static func plainString(_ d: Decimal) -> String { d.description }
}

// MARK: - json / jsonb

/// A `json`/`jsonb` value holding the raw JSON text. Encodes as `jsonb`.
public struct PostgresJSON: Sendable, Hashable, PostgresCodable {
    /// The JSON text as the server printed it (jsonb normalises spacing and key order).
    public let text: String

    /// Wraps JSON text as-is (not validated here; the server validates on insert).
    public init(rawText: String) { self.text = rawText }

    /// Encodes a value with `JSONEncoder` (sorted keys, so equal values give equal text).
    public init<T: Encodable>(encoding value: T, encoder: JSONEncoder = PostgresJSON.defaultEncoder()) throws {
        let data = try encoder.encode(value)
        self.text = String(decoding: data, as: UTF8.self)
    }

    /// The JSON text as UTF-8 bytes.
    public var data: Data { Data(text.utf8) }

    /// Decodes the JSON with `JSONDecoder`.
    public func decode<T: Decodable>(_ type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: data)
    }

    /// A `JSONEncoder` with `.sortedKeys`.
    public static func defaultEncoder() -> JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }

    public static var postgresType: PostgresDataType { .jsonb }
    public func postgresBind() -> PostgresBind { PostgresBind(type: .jsonb, text: text) }
    public static func decode(from cell: PostgresCell) throws -> PostgresJSON {
        try cell.expect([.json, .jsonb, .text], as: PostgresJSON.self)
        return PostgresJSON(rawText: cell.string)
    }
}

// MARK: - timestamptz

/// ISO 8601 conversion for `timestamptz`, independent of `DateFormatter` and the process time zone.
enum PostgresTimestamp {
    /// Formats as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (microseconds, rounded to nearest).
    static func format(_ date: Date) -> String {
        let micros = (date.timeIntervalSince1970 * 1_000_000).rounded()
        let total = Int64(micros)
        var seconds = total / 1_000_000
        var fraction = total % 1_000_000
        if fraction < 0 {
            fraction += 1_000_000
            seconds -= 1
        }
        var days = seconds / 86_400
        var secOfDay = seconds % 86_400
        if secOfDay < 0 {
            secOfDay += 86_400
            days -= 1
        }
        let date = CivilDate(daysSince1970: Int(days))
        let (y, m, d) = (Int64(date.year), Int64(date.month), Int64(date.day))
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secOfDay / 3600, 2)):\(pad(secOfDay / 60 % 60, 2)):"
            + "\(pad(secOfDay % 60, 2)).\(pad(fraction, 6))Z"
    }

    /// Parses `YYYY-MM-DD[ T]HH:MM:SS[.f{1,9}][Z|±HH[:MM[:SS]]]` (no zone means UTC, as for `timestamp`).
    static func parse(_ text: some Collection<UInt8>) -> Date? {
        // In place: a cell's bytes are contiguous, and a copy per timestamp was an allocation per cell read.
        if let date = text.withContiguousStorageIfAvailable({ parse(bytes: $0) }) { return date }
        return Array(text).withUnsafeBufferPointer { parse(bytes: $0) }
    }

    private static func parse(bytes b: UnsafeBufferPointer<UInt8>) -> Date? {
        var i = 0
        func number(_ count: Int) -> Int64? {
            guard i + count <= b.count else { return nil }
            var v: Int64 = 0
            for k in i..<(i + count) {
                let c = b[k]
                guard c >= 48, c <= 57 else { return nil }
                v = v * 10 + Int64(c - 48)
            }
            i += count
            return v
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        // Year: 4+ digits.
        var yearDigits = 0
        while i + yearDigits < b.count, b[i + yearDigits] >= 48, b[i + yearDigits] <= 57 { yearDigits += 1 }
        guard yearDigits >= 4, let year = number(yearDigits), expect(45), let month = number(2), expect(45),
            let day = number(2)
        else { return nil }
        guard i < b.count, b[i] == 32 || b[i] == 84 else { return nil }
        i += 1
        guard let hour = number(2), expect(58), let minute = number(2), expect(58), let second = number(2) else {
            return nil
        }
        var fraction = 0.0
        if i < b.count, b[i] == 46 {
            i += 1
            var scale = 0.1
            var any = false
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                fraction += Double(b[i] - 48) * scale
                scale /= 10
                i += 1
                any = true
            }
            guard any else { return nil }
        }
        var offset: Int64 = 0
        if i < b.count {
            if b[i] == 90 {  // Z
                i += 1
            } else if b[i] == 43 || b[i] == 45 {  // + -
                let sign: Int64 = b[i] == 45 ? -1 : 1
                i += 1
                guard let oh = number(2) else { return nil }
                var om: Int64 = 0
                var os: Int64 = 0
                if expect(58) {
                    guard let m = number(2) else { return nil }
                    om = m
                    if expect(58) {
                        guard let s = number(2) else { return nil }
                        os = s
                    }
                } else if let m = number(2) {
                    om = m
                }
                offset = sign * (oh * 3600 + om * 60 + os)
            }
        }
        guard i == b.count, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        let days = Int64(CivilDate(year: Int(year), month: Int(month), day: Int(day)).daysSince1970)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }
}

/// `Date` ⇄ `timestamptz` (encoded as ISO 8601 UTC with microseconds; `timestamp` columns decode as UTC).
extension Date: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .timestamptz }
    public func postgresBind() -> PostgresBind {
        PostgresBind(type: .timestamptz, text: PostgresTimestamp.format(self))
    }
    public static func decode(from cell: PostgresCell) throws -> Date {
        try cell.expect([.timestamptz, .timestamp], as: Date.self)
        guard let bytes = cell.bytes, let date = PostgresTimestamp.parse(bytes) else {
            throw cell.failure(Date.self, "expected ISO timestamp (infinity and BC dates are not supported)")
        }
        return date
    }
}
