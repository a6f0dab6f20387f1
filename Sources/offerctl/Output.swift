// Rendering the gateway's results: aligned tables for people, the result itself as JSON for scripts.
import CLIKit
import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

enum Output {
    /// The gateway's result as one line of JSON on stdout.
    static func json(_ value: JSONValue) {
        Console.out(String(decoding: JSONSerializer.serialize(value), as: UTF8.self) + "\n")
    }

    /// A cell's text: strings as they are, numbers in decimal, booleans yes/no, null or absent as "-".
    static func text(_ value: JSONValue?) -> String {
        switch value {
        case .none, .null?: return "-"
        case .string(let text)?: return text
        case .number(let number)?: return number.decimalString
        case .bool(let flag)?: return flag ? "yes" : "no"
        case .array(let elements)?: return elements.map { text($0) }.joined(separator: ",")
        case .object?: return value?.description ?? "-"
        case .encoded(let encoded)?: return text(encoded.value)
        }
    }

    /// A table of JSON objects: the `columns` (key, header) that at least one row has, in order. When rows have
    /// none of them (the gateway's shape changed), every scalar key of the first row is shown instead.
    static func table(_ rows: [JSONValue], columns: [(key: String, header: String)]) -> String {
        let objects = rows.compactMap(\.objectValue)
        var shown = columns.filter { column in objects.contains { $0[column.key] != nil } }
        if shown.isEmpty, let first = objects.first {
            shown = first.keys.filter { key in
                if case .object = first[key] { return false }
                return true
            }.map { (key: $0, header: $0.uppercased()) }
        }
        if shown.isEmpty { shown = columns }
        var table = TextTable(headers: shown.map(\.header))
        for object in objects { table.append(shown.map { text(object[$0.key]) }) }
        return table.render()
    }

    /// The rows of a list result: `result[key]` when it is an array, or the result itself when it is one.
    static func list(_ result: JSONValue, key: String) throws -> [JSONValue] {
        if let rows = result[key]?.arrayValue ?? result.arrayValue { return rows }
        throw Failure("the gateway's answer has no '\(key)' list (is offerctl older than the gateway?)")
    }
}
