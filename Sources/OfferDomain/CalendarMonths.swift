import Foundation

/// Whole-calendar-month arithmetic as App Store Connect counts it, on a UTC Gregorian calendar.
///
/// The months between `from` and `to` are the largest `n` such that `from + n months <= to`, where adding months
/// clamps the day to the end of a shorter month as `Calendar` does (Jan 31 + 1 month = Feb 28, or Feb 29 in a leap
/// year). Each `n` is added to `from` directly, so clamping never accumulates (Jan 31 + 2 months = Mar 31).
public enum CalendarMonths {
    /// The UTC Gregorian calendar used for every month computation.
    public static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(secondsFromGMT: 0) ?? calendar.timeZone
        return calendar
    }()

    /// `date` plus `months` calendar months (day clamped to month end).
    public static func adding(_ months: Int, to date: Date) -> Date {
        calendar.date(byAdding: .month, value: months, to: date) ?? date
    }

    /// Whole months from `from` to `to`, rounded down; 0 if `to <= from`.
    public static func between(_ from: Date, _ to: Date) -> Int {
        guard to > from else { return 0 }
        // Start from Calendar's estimate, then correct it against the definition.
        var months = max(0, calendar.dateComponents([.month], from: from, to: to).month ?? 0)
        while months > 0 && adding(months, to: from) > to { months -= 1 }
        while adding(months + 1, to: from) <= to { months += 1 }
        return months
    }
}
