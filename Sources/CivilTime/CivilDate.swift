// CivilTime: proleptic Gregorian calendar arithmetic on whole days, the one copy shared by the domain
// (OfferDomain.CalendarMonths), the PostgreSQL adapter (timestamptz text) and JSON-RPC (RFC 3339).
//
// A leaf module: it imports nothing (not even Foundation), does no IO and keeps no state, so any layer may use it.

/// A proleptic Gregorian calendar date (year, month 1-12, day 1-31), with no time zone: days are UTC days when
/// counted from the UNIX epoch.
///
/// Conversions use Howard Hinnant's `days_from_civil` / `civil_from_days`, exact for every `Int` year in range
/// (negative years included: year 0 is 1 BC). `CivilDate` does not validate: `isValid` says whether the day exists.
public struct CivilDate: Hashable, Sendable, CustomStringConvertible {
    /// The year (proleptic Gregorian; 0 is 1 BC).
    public var year: Int
    /// The month, 1 (January) to 12 (December).
    public var month: Int
    /// The day of the month, from 1.
    public var day: Int

    /// A date from its parts, unchecked (see `isValid`).
    @inlinable
    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// The date `days` whole days after 1970-01-01 (before it when negative).
    @inlinable
    public init(daysSince1970 days: Int) {
        let z = days + 719_468
        let era = CivilDate.floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153  // March = 0
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        self.init(year: yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month: month, day: day)
    }

    /// Whole days from 1970-01-01 to this date (negative before it). Meaningful for valid dates; an out-of-range
    /// day simply counts on (day 32 of January is February 1st).
    @inlinable
    public var daysSince1970: Int {
        let y = month <= 2 ? year - 1 : year
        let era = CivilDate.floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let monthIndex = (month + 9) % 12  // March = 0
        let dayOfYear = (153 * monthIndex + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// `true` when the month is 1-12 and the day exists in it.
    @inlinable
    public var isValid: Bool {
        (1...12).contains(month) && day >= 1 && day <= CivilDate.daysInMonth(year: year, month: month)
    }

    /// `YYYY-MM-DD` (at least four year digits, a leading `-` before 1 BC).
    public var description: String {
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value.magnitude)
            return (value < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }

    /// Whether `year` has a February 29th (divisible by 4, and not by 100 unless by 400).
    @inlinable
    public static func isLeapYear(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    /// The number of days in `month` (1-12) of `year`; 31 for a month outside 1-12.
    @inlinable
    public static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Whole UTC days since 1970-01-01 and the second within that day of `seconds` since 1970-01-01T00:00:00Z.
    ///
    /// Floors toward the past: `-1` is day `-1`, second `86_399` (1969-12-31T23:59:59Z).
    @inlinable
    public static func split(secondsSince1970 seconds: Int) -> (days: Int, secondOfDay: Int) {
        let days = floorDivide(seconds, 86_400)
        return (days, seconds - days * 86_400)
    }

    /// `a / b` rounded toward negative infinity (`b > 0`), as calendar arithmetic needs for dates before 1970.
    @inlinable
    public static func floorDivide(_ a: Int, _ b: Int) -> Int {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }
}
