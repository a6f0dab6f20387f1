/// Aligned plain-text columns for human-readable command output (`--json` is the machine-readable form).
///
/// Columns are separated by two spaces and left-aligned; the last column is never padded, so no line ends in
/// spaces. Widths count `Character`s (grapheme clusters), which is right for the ASCII and Latin text operators'
/// identifiers use.
public struct TextTable: Sendable, Hashable {
    /// The header row (upper-case by convention); empty for a table without headers.
    public let headers: [String]
    /// The data rows, each as many cells as `headers` (or as the first row when there are no headers).
    public private(set) var rows: [[String]] = []

    /// A table with the given header row.
    public init(headers: [String]) {
        self.headers = headers
    }

    /// A table without a header row.
    public init() {
        self.headers = []
    }

    /// Appends a row; missing cells are empty, extra cells are kept (and widen the table).
    public mutating func append(_ row: [String]) {
        rows.append(row)
    }

    /// The rendered table, one line per row (header first), each ending in a newline; "" when there is nothing.
    public func render() -> String {
        let all = (headers.isEmpty ? [] : [headers]) + rows
        guard !all.isEmpty else { return "" }
        let columns = all.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: columns)
        for row in all {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], Self.sanitized(cell).count) }
        }
        var out = ""
        for row in all {
            var line = ""
            for index in 0..<columns {
                let cell = index < row.count ? Self.sanitized(row[index]) : ""
                line += cell
                if index < columns - 1 { line += String(repeating: " ", count: widths[index] - cell.count + 2) }
            }
            while line.last == " " { line.removeLast() }
            out += line + "\n"
        }
        return out
    }

    /// Key/value lines (`key  value`) with the keys aligned, e.g. for one record.
    public static func keyValue(_ pairs: [(String, String)]) -> String {
        var table = TextTable()
        for (key, value) in pairs { table.append([key, value]) }
        return table.render()
    }

    /// Control characters (newlines, tabs, escapes) would break the alignment or the terminal: show them as `?`.
    static func sanitized(_ cell: String) -> String {
        guard cell.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return cell }
        return String(
            String.UnicodeScalarView(cell.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
    }
}

/// Comma-separated values as RFC 4180 quotes them: a field holding a comma, a double quote, CR or LF is enclosed
/// in double quotes, and its double quotes are doubled. Records end in `\n` (not CRLF: friendlier to Unix tools;
/// RFC 4180 readers accept both).
public enum CSV {
    /// One field, quoted when it must be.
    public static func field(_ value: String) -> String {
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }) else {
            return value
        }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// One record: the fields joined by commas, ending in a newline.
    public static func record(_ fields: [String]) -> String {
        fields.map(field).joined(separator: ",") + "\n"
    }
}
