import Foundation

/// The one-time codes file App Store Connect lets you download, read leniently: one code per line, with or without
/// a header line, or CSV (comma, semicolon or tab separated, optionally quoted) with the code in the first column.
/// Blank lines are skipped. What it reports never contains a code: line numbers only (codes are secrets).
public struct AppleCodeFile: Sendable, Hashable {
    /// The normalised codes, first occurrences, in file order.
    public var codes: [String]
    /// 1-based numbers of lines whose code appeared on an earlier line.
    public var duplicateLines: [Int]
    /// 1-based numbers of lines that hold no valid code (not counting a header).
    public var invalidLines: [Int]
    /// The 1-based number of the header line, if the file has one.
    public var headerLine: Int?

    /// First-column values that name the column rather than hold a code (normalised).
    static let headerNames: Set<String> = [
        "CODE", "CODES", "OFFERCODE", "OFFERCODES", "ONETIMECODE", "ONETIMECODES", "PROMOCODE", "PROMOCODES",
        "REDEMPTIONCODE", "REDEMPTIONCODES",
    ]

    /// Reads a file's text.
    public init(parsing text: String) {
        codes = []
        duplicateLines = []
        invalidLines = []
        headerLine = nil
        var seen = Set<String>()
        var sawContent = false
        var number = 0
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            number += 1
            let field = Self.firstField(rawLine)
            if field.isEmpty { continue }
            let isFirst = !sawContent
            sawContent = true
            let code: String
            do throws(OfferDomainError) {
                code = try CodeNormalizer.normalize(field)
            } catch {
                // A first line that is not a code is a header ("Code", "Offer Code", "Promo Code (one-time)").
                if isFirst { headerLine = number } else { invalidLines.append(number) }
                continue
            }
            if isFirst && Self.headerNames.contains(code) {
                headerLine = number
                continue
            }
            if seen.insert(code).inserted {
                codes.append(code)
            } else {
                duplicateLines.append(number)
            }
        }
    }

    /// The first column of a line: up to the first comma, semicolon or tab, without a UTF-8 byte order mark,
    /// surrounding whitespace or double quotes.
    static func firstField(_ line: Substring) -> String {
        var field = line
        if let cut = field.firstIndex(where: { $0 == "," || $0 == ";" || $0 == "\t" }) {
            field = field[..<cut]
        }
        var text = String(String.UnicodeScalarView(field.unicodeScalars.filter { $0 != "\u{FEFF}" }))
        text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.count >= 2 && text.hasPrefix("\"") && text.hasSuffix("\"") {
            text = String(text.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
        }
        return text
    }
}
