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

/// The civil-date arithmetic agrees with an independent reference built on Foundation's UTC Gregorian calendar
/// (date components in, clamp the day to the month's length, date out) on random instants from 1901 to 2099.
/// (`Calendar.date(byAdding: .month, …)` itself is not the oracle: on this platform it sometimes rolls Jan 29-31
/// over into March instead of clamping to the end of February.)
@Test func monthArithmeticAgreesWithACalendarReference() async throws {
    var rng = SplitMix64(state: 0x0FFE_96A7E)
    let calendar = CalendarMonths.calendar
    struct ReferenceFailed: Error {}
    func reference(_ months: Int, _ from: Date) throws -> Date {
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: from)
        guard let y = c.year, let m = c.month, let d = c.day else { throw ReferenceFailed() }
        let total = y * 12 + (m - 1) + months
        let year = Int((Double(total) / 12).rounded(.down))
        let month = total - year * 12 + 1
        guard let first = calendar.date(from: DateComponents(year: year, month: month, day: 1)),
            let length = calendar.range(of: .day, in: .month, for: first)?.count,
            let date = calendar.date(
                from: DateComponents(
                    year: year, month: month, day: min(d, length), hour: c.hour, minute: c.minute, second: c.second))
        else { throw ReferenceFailed() }
        return date
    }
    for index in 0..<20_000 {
        // A second of CPU in all: yield the test process's cooperative pool now and then (a few ms each time), so
        // other tests' awaits are not queued behind the whole loop.
        if index % 100 == 0 { await Task.yield() }
        let seconds: Double = Double(rng.next() % 6_311_433_600) - 2_177_452_800  // 1901-01-01 ... 2099-12-31
        let from = Date(timeIntervalSince1970: seconds)
        let months = Int(rng.next() % 61) - 30
        let added = CalendarMonths.adding(months, to: from)
        #expect(added == (try reference(months, from)), "\(from) + \(months)")
        // A fraction of a second is carried through unchanged.
        #expect(CalendarMonths.adding(months, to: from + 0.25) == added + 0.25)
        let to = Date(timeIntervalSince1970: seconds + Double(rng.next() % 80_000_000))
        var count = 0
        while try reference(count + 1, from) <= to { count += 1 }
        #expect(CalendarMonths.between(from, to) == count, "\(from) → \(to)")
        // The instant the count next grows (a decision's horizon), and before `from` the first whole month.
        #expect(CalendarMonths.nextWholeMonth(from: from, after: to) == (try reference(count + 1, from)))
        #expect(CalendarMonths.nextWholeMonth(from: to, after: from) == (try reference(1, to)))
    }
}
