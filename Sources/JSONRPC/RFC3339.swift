// RFC 3339 timestamps without Foundation formatters (thread-safe, allocation-light).
import CivilTime
import Foundation

/// RFC 3339 date-time parsing and formatting.
///
/// Parsing accepts `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (`T`/`Z` case-insensitive, any number of
/// fractional digits, precision kept to the nanosecond). Leap seconds (`:60`) are rejected.
/// Formatting always emits UTC with `Z`, and milliseconds only when they are non-zero:
/// `2026-11-30T12:00:00Z`, `2026-11-30T12:00:00.250Z`.
public enum RFC3339 {
    /// Parses an RFC 3339 date-time; `nil` if the text is not one.
    public static func parse(_ text: String) -> Date? {
        var copy = text
        return copy.withUTF8 { parse(bytes: $0) }
    }

    static func parse(bytes b: UnsafeBufferPointer<UInt8>) -> Date? {
        guard b.count >= 20 else { return nil }
        func digits(_ start: Int, _ count: Int) -> Int? {
            var value = 0
            for i in start..<(start + count) {
                let d = b[i] &- 0x30
                guard d < 10 else { return nil }
                value = value * 10 + Int(d)
            }
            return value
        }
        guard let year = digits(0, 4), b[4] == UInt8(ascii: "-"), let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
            let day = digits(8, 2), b[10] | 0x20 == UInt8(ascii: "t"), let hour = digits(11, 2),
            b[13] == UInt8(ascii: ":"), let minute = digits(14, 2), b[16] == UInt8(ascii: ":"),
            let second = digits(17, 2)
        else { return nil }
        guard CivilDate(year: year, month: month, day: day).isValid, hour < 24, minute < 60, second < 60
        else { return nil }
        var index = 19
        var nanos = 0
        if b[index] == UInt8(ascii: ".") {
            index += 1
            var count = 0
            while index < b.count, b[index] &- 0x30 < 10 {
                if count < 9 { nanos = nanos * 10 + Int(b[index] &- 0x30) }
                count += 1
                index += 1
            }
            guard count > 0 else { return nil }
            for _ in min(count, 9)..<9 { nanos *= 10 }
        }
        guard index < b.count else { return nil }
        var offsetSeconds = 0
        if b[index] | 0x20 == UInt8(ascii: "z") {
            index += 1
        } else if b[index] == UInt8(ascii: "+") || b[index] == UInt8(ascii: "-") {
            guard b.count - index == 6, let oh = digits(index + 1, 2), b[index + 3] == UInt8(ascii: ":"),
                let om = digits(index + 4, 2), oh < 24, om < 60
            else { return nil }
            offsetSeconds = (oh * 3600 + om * 60) * (b[index] == UInt8(ascii: "-") ? -1 : 1)
            index += 6
        } else {
            return nil
        }
        guard index == b.count else { return nil }
        let days = CivilDate(year: year, month: month, day: day).daysSince1970
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + Double(nanos) / 1e9)
    }

    /// Formats `date` as RFC 3339 UTC (`Z`), with milliseconds only when non-zero; `nil` outside years 0000-9999.
    public static func format(_ date: Date) -> String? {
        let t = date.timeIntervalSince1970
        guard t.isFinite else { return nil }
        var whole = t.rounded(.down)
        var millis = Int(((t - whole) * 1000).rounded())
        if millis >= 1000 {
            millis -= 1000
            whole += 1
        }
        guard abs(whole) < 1e13 else { return nil }
        let total = Int(whole)
        let (days, secondOfDay) = CivilDate.split(secondsSince1970: total)
        let civil = CivilDate(daysSince1970: days)
        let (year, month, day) = (civil.year, civil.month, civil.day)
        guard (0...9999).contains(year) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(24)
        func put(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var v = value
            while divisor > 0 {
                out.append(UInt8(v / divisor) + 0x30)
                v %= divisor
                divisor /= 10
            }
        }
        put(year, 4)
        out.append(UInt8(ascii: "-"))
        put(month, 2)
        out.append(UInt8(ascii: "-"))
        put(day, 2)
        out.append(UInt8(ascii: "T"))
        put(secondOfDay / 3600, 2)
        out.append(UInt8(ascii: ":"))
        put(secondOfDay / 60 % 60, 2)
        out.append(UInt8(ascii: ":"))
        put(secondOfDay % 60, 2)
        if millis != 0 {
            out.append(UInt8(ascii: "."))
            put(millis, 3)
        }
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }
}
