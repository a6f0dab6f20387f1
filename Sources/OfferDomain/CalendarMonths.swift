import CivilTime
import Foundation

/// Whole-calendar-month arithmetic as App Store Connect counts it, on a UTC Gregorian calendar.
///
/// The months between `from` and `to` are the largest `n` such that `from + n months <= to`, where adding months
/// clamps the day to the end of a shorter month as `Calendar` does (Jan 31 + 1 month = Feb 28, or Feb 29 in a leap
/// year). Each `n` is added to `from` directly, so clamping never accumulates (Jan 31 + 2 months = Mar 31).
///
/// Computed with civil-date arithmetic on UTC days (`CivilTime.CivilDate`: proleptic Gregorian, Howard Hinnant's
/// algorithms) instead of `Calendar`: the rules run on every eligibility decision, and `Calendar` costs
/// microseconds per call.
public enum CalendarMonths {
    /// The UTC Gregorian calendar the arithmetic agrees with (kept for callers that format or compare dates).
    public static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
        return calendar
    }()

    /// `date` plus `months` calendar months (day clamped to month end; time of day kept).
    public static func adding(_ months: Int, to date: Date) -> Date { Anchor(date).adding(months) }

    /// Whole months from `from` to `to`, rounded down; 0 if `to <= from`.
    public static func between(_ from: Date, _ to: Date) -> Int { months(from: Anchor(from), to: to) }

    /// The first instant after `at` at which `between(anchor, ·)` grows: `adding(between(anchor, at) + 1, to:
    /// anchor)`, with `anchor` read into its calendar date once for both (a decision's horizon asks this for every
    /// purchase, expiry and revocation date of a customer's history).
    public static func nextWholeMonth(from anchor: Date, after at: Date) -> Date {
        let anchor = Anchor(anchor)
        return anchor.adding(months(from: anchor, to: at) + 1)
    }

    private static func months(from anchor: Anchor, to: Date) -> Int {
        guard to > anchor.instant else { return 0 }
        let end = CivilDate(daysSince1970: split(to).days)
        // Start from the difference of month numbers, then correct it against the definition.
        var months = max(0, (end.year * 12 + end.month) - (anchor.date.year * 12 + anchor.date.month))
        while months > 0 && anchor.adding(months) > to { months -= 1 }
        while anchor.adding(months + 1) <= to { months += 1 }
        return months
    }

    /// An instant read into its UTC calendar date and the seconds into that day, once, for months to be added to it.
    private struct Anchor {
        let instant: Date
        let date: CivilDate
        let seconds: Double

        init(_ instant: Date) {
            let (days, seconds) = CalendarMonths.split(instant)
            self.instant = instant
            self.date = CivilDate(daysSince1970: days)
            self.seconds = seconds
        }

        /// The instant plus `months` calendar months (day clamped to month end; time of day kept).
        func adding(_ months: Int) -> Date {
            let total = date.year * 12 + (date.month - 1) + months
            let newYear = CivilDate.floorDivide(total, 12)
            let newMonth = total - newYear * 12 + 1
            let newDay = min(date.day, CivilDate.daysInMonth(year: newYear, month: newMonth))
            let newDays = CivilDate(year: newYear, month: newMonth, day: newDay).daysSince1970
            return Date(timeIntervalSince1970: Double(newDays) * 86_400 + seconds)
        }
    }

    // MARK: Civil dates

    /// Whole UTC days since 1970-01-01 and the seconds into that day (exact: `t - days * 86400` subtracts two
    /// doubles within a factor of two of each other).
    static func split(_ date: Date) -> (days: Int, seconds: Double) {
        let t = date.timeIntervalSince1970
        let days = (t / 86_400).rounded(.down)
        return (Int(days), t - days * 86_400)
    }
}
