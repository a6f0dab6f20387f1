import CivilTime
import Foundation
import Testing

@Suite("Civil dates (proleptic Gregorian day counts)")
struct CivilDateTests {
    /// Known day counts: the epoch and its neighbours, leap days (400-year rule and 100-year exception), pre-1970,
    /// year 0 and the last day RFC 3339 can write.
    static let known: [(CivilDate, Int)] = [
        (CivilDate(year: 1970, month: 1, day: 1), 0),
        (CivilDate(year: 1969, month: 12, day: 31), -1),
        (CivilDate(year: 1970, month: 1, day: 2), 1),
        (CivilDate(year: 1970, month: 3, day: 1), 59),
        (CivilDate(year: 1972, month: 2, day: 29), 789),
        (CivilDate(year: 2000, month: 2, day: 29), 11_016),
        (CivilDate(year: 2000, month: 3, day: 1), 11_017),
        (CivilDate(year: 2024, month: 2, day: 29), 19_782),
        (CivilDate(year: 2038, month: 1, day: 19), 24_855),
        (CivilDate(year: 1900, month: 1, day: 1), -25_567),
        (CivilDate(year: 1900, month: 3, day: 1), -25_508),
        (CivilDate(year: 1600, month: 1, day: 1), -135_140),
        (CivilDate(year: 1, month: 1, day: 1), -719_162),
        (CivilDate(year: 0, month: 1, day: 1), -719_528),
        (CivilDate(year: 0, month: 2, day: 29), -719_469),
        (CivilDate(year: -1, month: 12, day: 31), -719_529),
        (CivilDate(year: 9999, month: 12, day: 31), 2_932_896),
        (CivilDate(year: 10000, month: 1, day: 1), 2_932_897),
    ]

    @Test("known dates count the right days, both ways", arguments: known)
    func knownDays(_ date: CivilDate, _ days: Int) {
        #expect(date.daysSince1970 == days)
        #expect(CivilDate(daysSince1970: days) == date)
        #expect(date.isValid)
    }

    @Test("every day from 0000-01-01 to 9999-12-31 is the day after the one before")
    func consecutiveDays() async {
        var previous = CivilDate(daysSince1970: -719_528)
        #expect(previous == CivilDate(year: 0, month: 1, day: 1))
        var failures = 0
        for days in -719_527...2_932_896 {
            // Most of a second of CPU in all: yield the test process's cooperative pool once a century of days (a
            // few ms), so other tests' awaits are not queued behind the whole loop.
            if days % 36_525 == 0 { await Task.yield() }
            let date = CivilDate(daysSince1970: days)
            let expected: CivilDate
            if previous.day < CivilDate.daysInMonth(year: previous.year, month: previous.month) {
                expected = CivilDate(year: previous.year, month: previous.month, day: previous.day + 1)
            } else if previous.month < 12 {
                expected = CivilDate(year: previous.year, month: previous.month + 1, day: 1)
            } else {
                expected = CivilDate(year: previous.year + 1, month: 1, day: 1)
            }
            if date != expected || date.daysSince1970 != days { failures += 1 }
            previous = date
        }
        #expect(failures == 0)
        #expect(previous == CivilDate(year: 9999, month: 12, day: 31))
    }

    @Test("agrees with Foundation's Gregorian calendar in UTC, 1600 to 9999")
    func agreesWithFoundation() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(secondsFromGMT: 0))
        for days in stride(from: -135_140, through: 2_932_896, by: 997) {
            let parts = calendar.dateComponents(
                [.year, .month, .day], from: Date(timeIntervalSince1970: Double(days) * 86_400))
            #expect(
                CivilDate(daysSince1970: days)
                    == CivilDate(year: parts.year ?? 0, month: parts.month ?? 0, day: parts.day ?? 0),
                "day \(days)")
        }
    }

    @Test(
        "leap years: every 4th, not every 100th, every 400th",
        arguments: [
            (1600, true), (1700, false), (1900, false), (1970, false), (1972, true), (2000, true), (2023, false),
            (2024, true), (2100, false), (2400, true), (9996, true), (9999, false), (0, true), (-4, true),
            (-100, false),
        ])
    func leapYears(_ year: Int, _ leap: Bool) {
        #expect(CivilDate.isLeapYear(year) == leap)
        #expect(CivilDate.daysInMonth(year: year, month: 2) == (leap ? 29 : 28))
    }

    @Test("month lengths")
    func monthLengths() {
        let lengths = (1...12).map { CivilDate.daysInMonth(year: 2023, month: $0) }
        #expect(lengths == [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
    }

    @Test(
        "validity",
        arguments: [
            (CivilDate(year: 2024, month: 2, day: 29), true), (CivilDate(year: 2023, month: 2, day: 29), false),
            (CivilDate(year: 1900, month: 2, day: 29), false), (CivilDate(year: 2000, month: 2, day: 29), true),
            (CivilDate(year: 2024, month: 4, day: 31), false), (CivilDate(year: 2024, month: 12, day: 31), true),
            (CivilDate(year: 2024, month: 13, day: 1), false), (CivilDate(year: 2024, month: 0, day: 1), false),
            (CivilDate(year: 2024, month: 1, day: 0), false), (CivilDate(year: 9999, month: 12, day: 31), true),
        ])
    func validity(_ date: CivilDate, _ valid: Bool) {
        #expect(date.isValid == valid)
    }

    @Test(
        "seconds split into UTC days and second of day, flooring before 1970",
        arguments: [
            (0, 0, 0), (1, 0, 1), (86_399, 0, 86_399), (86_400, 1, 0), (-1, -1, 86_399), (-86_400, -1, 0),
            (-86_401, -2, 86_399), (253_402_300_799, 2_932_896, 86_399), (-62_167_219_200, -719_528, 0),
        ])
    func split(_ seconds: Int, _ days: Int, _ secondOfDay: Int) {
        let result = CivilDate.split(secondsSince1970: seconds)
        #expect(result.days == days)
        #expect(result.secondOfDay == secondOfDay)
    }

    @Test(
        "floor division rounds toward the past",
        arguments: [(0, 12, 0), (11, 12, 0), (12, 12, 1), (-1, 12, -1), (-12, 12, -1), (-13, 12, -2)])
    func floorDivide(_ a: Int, _ b: Int, _ quotient: Int) {
        #expect(CivilDate.floorDivide(a, b) == quotient)
    }

    @Test("description is YYYY-MM-DD")
    func description() {
        #expect(CivilDate(year: 2026, month: 12, day: 1).description == "2026-12-01")
        #expect(CivilDate(year: 99, month: 1, day: 5).description == "0099-01-05")
        #expect(CivilDate(year: -1, month: 12, day: 31).description == "-0001-12-31")
    }
}
