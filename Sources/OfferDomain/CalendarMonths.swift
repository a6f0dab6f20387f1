import Foundation

/// Whole-calendar-month arithmetic as App Store Connect counts it, on a UTC Gregorian calendar.
///
/// The months between `from` and `to` are the largest `n` such that `from + n months <= to`, where adding months
/// clamps the day to the end of a shorter month as `Calendar` does (Jan 31 + 1 month = Feb 28, or Feb 29 in a leap
/// year). Each `n` is added to `from` directly, so clamping never accumulates (Jan 31 + 2 months = Mar 31).
///
/// Computed with civil-date arithmetic on UTC days (proleptic Gregorian, Howard Hinnant's algorithms) instead of
/// `Calendar`: the rules run on every eligibility decision, and `Calendar` costs microseconds per call.
public enum CalendarMonths {
    /// The UTC Gregorian calendar the arithmetic agrees with (kept for callers that format or compare dates).
    public static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
        return calendar
    }()

    /// `date` plus `months` calendar months (day clamped to month end; time of day kept).
    public static func adding(_ months: Int, to date: Date) -> Date {
        let (days, seconds) = split(date)
        let (year, month, day) = civil(fromDays: days)
        let total = year * 12 + (month - 1) + months
        let newYear = floorDivide(total, 12)
        let newMonth = total - newYear * 12 + 1
        let newDay = min(day, daysInMonth(year: newYear, month: newMonth))
        let newDays = self.days(year: newYear, month: newMonth, day: newDay)
        return Date(timeIntervalSince1970: Double(newDays) * 86_400 + seconds)
    }

    /// Whole months from `from` to `to`, rounded down; 0 if `to <= from`.
    public static func between(_ from: Date, _ to: Date) -> Int {
        guard to > from else { return 0 }
        let (fromYear, fromMonth, _) = civil(fromDays: split(from).days)
        let (toYear, toMonth, _) = civil(fromDays: split(to).days)
        // Start from the difference of month numbers, then correct it against the definition.
        var months = max(0, (toYear * 12 + toMonth) - (fromYear * 12 + fromMonth))
        while months > 0 && adding(months, to: from) > to { months -= 1 }
        while adding(months + 1, to: from) <= to { months += 1 }
        return months
    }

    // MARK: Civil dates

    /// Whole UTC days since 1970-01-01 and the seconds into that day (exact: `t - days * 86400` subtracts two
    /// doubles within a factor of two of each other).
    static func split(_ date: Date) -> (days: Int, seconds: Double) {
        let t = date.timeIntervalSince1970
        let days = (t / 86_400).rounded(.down)
        return (Int(days), t - days * 86_400)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let monthIndex = (month + 9) % 12  // March = 0
        let dayOfYear = (153 * monthIndex + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01.
    static func civil(fromDays count: Int) -> (year: Int, month: Int, day: Int) {
        let z = count + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    private static func floorDivide(_ a: Int, _ b: Int) -> Int {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }
}
