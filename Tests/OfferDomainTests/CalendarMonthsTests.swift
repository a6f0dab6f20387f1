import Foundation
import Testing

@testable import OfferDomain

@Suite("Whole calendar months, rounded down (UTC)")
struct CalendarMonthsTests {
    @Test(
        "months between two instants",
        arguments: [
            ("2026-01-15", "2026-01-15", 0),
            ("2026-01-15", "2026-02-14T23:59:59Z", 0),
            ("2026-01-15", "2026-02-15", 1),
            ("2026-01-15", "2026-03-15", 2),
            ("2026-01-15", "2026-03-14", 1),
            // End of month: Jan 31 + 1 month = Feb 28 (2026 is not a leap year).
            ("2026-01-31", "2026-02-27", 0),
            ("2026-01-31", "2026-02-28", 1),
            ("2026-01-31", "2026-03-30", 1),
            ("2026-01-31", "2026-03-31", 2),
            // Leap year: Jan 31 + 1 month = Feb 29.
            ("2028-01-31", "2028-02-28", 0),
            ("2028-01-31", "2028-02-29", 1),
            ("2028-02-29", "2028-03-28", 0),
            ("2028-02-29", "2028-03-29", 1),
            ("2028-02-29", "2029-02-28", 12),
            ("2026-03-31", "2026-04-30", 1),
            ("2026-05-31", "2026-06-30", 1),
            ("2026-01-01T12:00:00Z", "2026-02-01T11:59:59Z", 0),
            ("2026-01-01T12:00:00Z", "2026-02-01T12:00:00Z", 1),
            ("2024-06-10", "2026-06-10", 24),
            ("2024-06-10", "2026-06-09", 23),
            // Backwards is zero.
            ("2026-03-01", "2026-01-01", 0),
        ])
    func between(from: String, to: String, expected: Int) {
        #expect(CalendarMonths.between(day(from), day(to)) == expected)
    }

    @Test("adding clamps to month end without accumulating")
    func adding() {
        #expect(CalendarMonths.adding(1, to: day("2026-01-31")) == day("2026-02-28"))
        #expect(CalendarMonths.adding(2, to: day("2026-01-31")) == day("2026-03-31"))
        #expect(CalendarMonths.adding(1, to: day("2028-01-31")) == day("2028-02-29"))
        #expect(CalendarMonths.adding(-1, to: day("2026-03-31")) == day("2026-02-28"))
    }

    @Test("the calendar is UTC Gregorian")
    func calendar() {
        #expect(CalendarMonths.calendar.identifier == .gregorian)
        #expect(CalendarMonths.calendar.timeZone.secondsFromGMT() == 0)
    }
}
