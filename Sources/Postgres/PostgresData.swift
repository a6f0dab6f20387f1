import ByteCoding
import Foundation

/// A PostgreSQL type OID (`pg_type.oid`).
public struct PostgresDataType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(_ rawValue: UInt32) { self.rawValue = rawValue }

    /// Let the server infer the parameter type.
    public static let unspecified = PostgresDataType(0)
    public static let bool = PostgresDataType(16)
    public static let bytea = PostgresDataType(17)
    public static let name = PostgresDataType(19)
    public static let int8 = PostgresDataType(20)
    public static let int2 = PostgresDataType(21)
    public static let int4 = PostgresDataType(23)
    public static let text = PostgresDataType(25)
    public static let oid = PostgresDataType(26)
    public static let json = PostgresDataType(114)
    public static let float4 = PostgresDataType(700)
    public static let float8 = PostgresDataType(701)
    public static let unknown = PostgresDataType(705)
    public static let bpchar = PostgresDataType(1042)
    public static let varchar = PostgresDataType(1043)
    public static let date = PostgresDataType(1082)
    public static let timestamp = PostgresDataType(1114)
    public static let timestamptz = PostgresDataType(1184)
    public static let numeric = PostgresDataType(1700)
    public static let uuid = PostgresDataType(2950)
    public static let jsonb = PostgresDataType(3802)
    public static let boolArray = PostgresDataType(1000)
    public static let int2Array = PostgresDataType(1005)
    public static let int4Array = PostgresDataType(1007)
    public static let textArray = PostgresDataType(1009)
    public static let bpcharArray = PostgresDataType(1014)
    public static let varcharArray = PostgresDataType(1015)
    public static let int8Array = PostgresDataType(1016)
    public static let nameArray = PostgresDataType(1003)
    public static let uuidArray = PostgresDataType(2951)
    public static let numericArray = PostgresDataType(1231)
    public static let timestamptzArray = PostgresDataType(1185)

    public var description: String {
        switch self {
        case .bool: "bool"
        case .bytea: "bytea"
        case .name: "name"
        case .int8: "int8"
        case .int2: "int2"
        case .int4: "int4"
        case .text: "text"
        case .json: "json"
        case .float4: "float4"
        case .float8: "float8"
        case .unknown: "unknown"
        case .bpchar: "bpchar"
        case .varchar: "varchar"
        case .timestamp: "timestamp"
        case .timestamptz: "timestamptz"
        case .numeric: "numeric"
        case .uuid: "uuid"
        case .jsonb: "jsonb"
        case .textArray: "text[]"
        case .int8Array: "int8[]"
        case .int4Array: "int4[]"
        case .int2Array: "int2[]"
        case .varcharArray: "varchar[]"
        default: "oid \(rawValue)"
        }
    }
}

/// One bound parameter, ready for libpq: its OID, wire format and bytes (`nil` is SQL NULL).
public struct PostgresBind: Sendable, Hashable {
    /// libpq parameter format.
    public enum Format: Int32, Sendable, Hashable {
        case text = 0
        case binary = 1
    }

    public var type: PostgresDataType
    public var format: Format
    public var bytes: [UInt8]?

    public init(type: PostgresDataType, format: Format = .text, bytes: [UInt8]?) {
        self.type = type
        self.format = format
        self.bytes = bytes
    }

    /// A text-format bind of `text`.
    public init(type: PostgresDataType, text: String) {
        self.init(type: type, format: .text, bytes: Array(text.utf8))
    }
}

/// A value that can be bound as a statement parameter.
public protocol PostgresEncodable: Sendable {
    /// The OID sent with the parameter (`.unspecified` lets the server infer it).
    static var postgresType: PostgresDataType { get }
    /// The parameter (text or binary format).
    func postgresBind() -> PostgresBind
}

/// A value that can be decoded from a text-format result column.
public protocol PostgresDecodable: Sendable {
    /// Decodes a non-NULL cell. Throw `PostgresError.decode` via `cell.failure(…)`; never put the value in it.
    static func decode(from cell: PostgresCell) throws -> Self
    /// Called for a NULL cell. The default throws a decode error; `Optional` returns `nil`.
    static func decodeNull(from cell: PostgresCell) throws -> Self
}

extension PostgresDecodable {
    public static func decodeNull(from cell: PostgresCell) throws -> Self {
        throw PostgresError.decode(
            "NULL cannot be decoded as non-optional \(Self.self) (\(cell.type))", column: cell.columnLabel)
    }
}

/// Encodable and decodable.
public typealias PostgresCodable = PostgresEncodable & PostgresDecodable

/// One cell of a result: the text-format bytes (never `nil` when passed to `decode(from:)`), its type and column.
public struct PostgresCell: Sendable {
    public var bytes: ArraySlice<UInt8>?
    public var type: PostgresDataType
    public var columnName: String
    public var columnIndex: Int

    public init(bytes: ArraySlice<UInt8>?, type: PostgresDataType, columnName: String, columnIndex: Int) {
        self.bytes = bytes
        self.type = type
        self.columnName = columnName
        self.columnIndex = columnIndex
    }

    /// `name` (#index), for error messages.
    public var columnLabel: String { "\(columnName) (#\(columnIndex))" }

    /// The cell as a String (UTF-8).
    public var string: String { String(decoding: bytes ?? [], as: UTF8.self) }

    /// A decode error naming the column, the Swift type and the column's OID (never the value).
    public func failure<T>(_ type: T.Type, _ reason: String = "invalid value") -> PostgresError {
        PostgresError.decode("cannot decode \(self.type) as \(T.self): \(reason)", column: columnLabel)
    }

    /// Throws unless the column type is one of `accepted` (a handful of types: an array, so decoding a cell
    /// builds no set).
    public func expect<T>(_ accepted: [PostgresDataType], as: T.Type) throws {
        guard accepted.contains(type) else {
            throw PostgresError.decode("column of type \(type) cannot be decoded as \(T.self)", column: columnLabel)
        }
    }
}

// MARK: - Optional

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public static var postgresType: PostgresDataType { Wrapped.postgresType }
    public func postgresBind() -> PostgresBind {
        switch self {
        case .some(let value): return value.postgresBind()
        case .none:
            let format: PostgresBind.Format = Wrapped.postgresType == .bytea ? .binary : .text
            return PostgresBind(type: Wrapped.postgresType, format: format, bytes: nil)
        }
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(from cell: PostgresCell) throws -> Self { try Wrapped.decode(from: cell) }
    public static func decodeNull(from cell: PostgresCell) throws -> Self { nil }
}

// MARK: - Text

extension String: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .text }
    public func postgresBind() -> PostgresBind { PostgresBind(type: .text, text: self) }

    /// Decodes text-like columns (text, varchar, char, name, unknown, json(b), uuid, numeric) and user-defined
    /// types (enums, citext: OID ≥ 16384), whose text form is the value itself.
    public static func decode(from cell: PostgresCell) throws -> String {
        guard isTextLike(cell.type) else { throw cell.failure(String.self, "not a text column") }
        return cell.string
    }

    /// Comparisons, not a set lookup: every text cell of every row read passes here, and a hash each showed in the
    /// profile of a cold `offers.best`.
    @usableFromInline
    static func isTextLike(_ type: PostgresDataType) -> Bool {
        switch type {
        case .text, .varchar, .bpchar, .name, .unknown, .json, .jsonb, .uuid, .numeric: true
        default: type.rawValue >= 16384
        }
    }
}

// MARK: - Bool

extension Bool: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .bool }
    public func postgresBind() -> PostgresBind { PostgresBind(type: .bool, text: self ? "t" : "f") }
    public static func decode(from cell: PostgresCell) throws -> Bool {
        try cell.expect([.bool], as: Bool.self)
        switch cell.bytes?.first {
        case UInt8(ascii: "t"): return true
        case UInt8(ascii: "f"): return false
        default: throw cell.failure(Bool.self)
        }
    }
}

// MARK: - Integers

/// Integers decode from int2, int4 and int8 columns (range-checked) and encode with their own width.
public protocol PostgresInteger: FixedWidthInteger, PostgresCodable, LosslessStringConvertible {}

extension PostgresInteger {
    public func postgresBind() -> PostgresBind { PostgresBind(type: Self.postgresType, text: String(self)) }
    public static func decode(from cell: PostgresCell) throws -> Self {
        try cell.expect([.int2, .int4, .int8, .oid], as: Self.self)
        guard let wide = Int64(cell.string) else { throw cell.failure(Self.self) }
        guard let value = Self(exactly: wide) else { throw cell.failure(Self.self, "out of range") }
        return value
    }
}

extension Int16: PostgresInteger {
    public static var postgresType: PostgresDataType { .int2 }
}
extension Int32: PostgresInteger {
    public static var postgresType: PostgresDataType { .int4 }
}
extension Int64: PostgresInteger {
    public static var postgresType: PostgresDataType { .int8 }
}
extension Int: PostgresInteger {
    public static var postgresType: PostgresDataType { .int8 }
}

// MARK: - Floating point (float4/float8 only; use PostgresNumeric for numeric)

extension Double: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .float8 }
    public func postgresBind() -> PostgresBind {
        let text = isNaN ? "NaN" : isInfinite ? (self < 0 ? "-Infinity" : "Infinity") : "\(self)"
        return PostgresBind(type: .float8, text: text)
    }
    public static func decode(from cell: PostgresCell) throws -> Double {
        try cell.expect([.float4, .float8], as: Double.self)
        switch cell.string {
        case "NaN": return .nan
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        case let s:
            guard let v = Double(s) else { throw cell.failure(Double.self) }
            return v
        }
    }
}

// MARK: - UUID

extension UUID: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .uuid }
    public func postgresBind() -> PostgresBind { PostgresBind(type: .uuid, text: uuidString.lowercased()) }
    public static func decode(from cell: PostgresCell) throws -> UUID {
        try cell.expect([.uuid, .text, .varchar, .bpchar], as: UUID.self)
        guard let uuid = UUID(uuidString: cell.string) else { throw cell.failure(UUID.self) }
        return uuid
    }
}

// MARK: - bytea

/// Decodes bytea's hex text output (`\x…`; the connection sets `bytea_output=hex`).
func decodeBytea(_ cell: PostgresCell) throws -> [UInt8] {
    try cell.expect([.bytea], as: [UInt8].self)
    guard let bytes = cell.bytes, bytes.count >= 2, bytes[bytes.startIndex] == UInt8(ascii: "\\"),
        bytes[bytes.startIndex + 1] == UInt8(ascii: "x"),
        let raw = Hex.decode(bytes.dropFirst(2))
    else { throw cell.failure([UInt8].self, "expected bytea hex format") }
    return raw
}

extension Data: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .bytea }
    /// Sent in binary format (no hex doubling).
    public func postgresBind() -> PostgresBind { PostgresBind(type: .bytea, format: .binary, bytes: Array(self)) }
    public static func decode(from cell: PostgresCell) throws -> Data { Data(try decodeBytea(cell)) }
}

/// Arrays: `[String]`, `[Int64]`, `[Int32]`, `[Int]`, `[UUID]`, `[Bool]`, `[Date]` (and `[T?]` for NULL elements)
/// are PostgreSQL arrays; `[UInt8]` is `bytea` (raw bytes, sent in binary format).
extension Array: PostgresEncodable, PostgresDecodable where Element: PostgresArrayElement {
    public static var postgresType: PostgresDataType { Element.postgresArrayType }
    public func postgresBind() -> PostgresBind { Element.postgresArrayBind(self) }
    public static func decode(from cell: PostgresCell) throws -> [Element] {
        try Element.postgresDecodeArray(from: cell)
    }
}

/// Element types of arrays: `[Element]` encodes/decodes as `Element`'s array type. `UInt8` is special: `[UInt8]`
/// is `bytea`.
public protocol PostgresArrayElement: Sendable {
    static var postgresArrayType: PostgresDataType { get }
    static func postgresArrayBind(_ elements: [Self]) -> PostgresBind
    static func postgresDecodeArray(from cell: PostgresCell) throws -> [Self]
}

extension UInt8: PostgresArrayElement {
    public static var postgresArrayType: PostgresDataType { .bytea }
    public static func postgresArrayBind(_ elements: [UInt8]) -> PostgresBind {
        PostgresBind(type: .bytea, format: .binary, bytes: elements)
    }
    public static func postgresDecodeArray(from cell: PostgresCell) throws -> [UInt8] { try decodeBytea(cell) }
}

// MARK: - Arrays of text-encoded elements

/// An element of a one-dimensional PostgreSQL array sent and read as an array literal (`{a,"b c",NULL}`).
public protocol PostgresArrayLiteralElement: PostgresCodable, PostgresArrayElement {
    /// The element OID used to decode elements, e.g. `.text` for `text[]`.
    static var postgresElementType: PostgresDataType { get }
    /// Array OIDs this element type decodes from.
    static var postgresAcceptedArrayTypes: [PostgresDataType] { get }
    /// The element type's OID when arrays of it are sent in PostgreSQL's binary format (no literal to build and
    /// escape here, no `array_in` and element parsing on the server); nil sends a text literal.
    static var postgresBinaryElementOID: UInt32? { get }
    /// Appends this element's binary form (its type's `typsend` output) to `out`, or returns false, appending
    /// nothing, for NULL. Called only when `postgresBinaryElementOID` is set.
    func appendPostgresBinary(to out: inout [UInt8]) -> Bool
}

extension PostgresArrayLiteralElement {
    public static var postgresBinaryElementOID: UInt32? { nil }
    public func appendPostgresBinary(to out: inout [UInt8]) -> Bool { false }

    /// In binary when the element type has a binary form here (`postgresBinaryElementOID`), else as a literal.
    public static func postgresArrayBind(_ elements: [Self]) -> PostgresBind {
        guard let oid = postgresBinaryElementOID else { return postgresArrayLiteralBind(elements) }
        return PostgresBind(
            type: postgresArrayType, format: .binary, bytes: PostgresBinaryArray.encode(elements, elementOID: oid))
    }

    /// `elements` as an array literal (`{"a","b c",NULL}`) in text format: every element type's default, and the
    /// form to splice where a literal is needed (a per-row cast of a list inside an `unnest`).
    public static func postgresArrayLiteralBind(_ elements: [Self]) -> PostgresBind {
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (i, element) in elements.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            let bind = element.postgresBind()
            guard let bytes = bind.bytes else {
                out.append(contentsOf: "NULL".utf8)
                continue
            }
            out.append(UInt8(ascii: "\""))
            // Runs without a quote or backslash are copied whole (elements may be long: Apple's JWS are 5-20 KB).
            var start = bytes.startIndex
            for (i, b) in zip(bytes.indices, bytes) where b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                out.append(contentsOf: bytes[start..<i])
                out.append(UInt8(ascii: "\\"))
                start = i
            }
            out.append(contentsOf: bytes[start...])
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return PostgresBind(type: postgresArrayType, format: .text, bytes: out)
    }

    public static func postgresDecodeArray(from cell: PostgresCell) throws -> [Self] {
        try cell.expect(postgresAcceptedArrayTypes, as: [Self].self)
        guard let bytes = cell.bytes else { throw cell.failure([Self].self) }
        let raw: [ArraySlice<UInt8>?]
        do {
            raw = try PostgresArrayLiteral.parse(bytes)
        } catch {
            throw cell.failure([Self].self, "\(error.reason)")
        }
        return try raw.enumerated().map { index, element in
            let elementCell = PostgresCell(
                bytes: element, type: postgresElementType, columnName: "\(cell.columnName)[\(index + 1)]",
                columnIndex: cell.columnIndex)
            if element == nil { return try Self.decodeNull(from: elementCell) }
            return try Self.decode(from: elementCell)
        }
    }
}

extension String: PostgresArrayLiteralElement {
    public static var postgresArrayType: PostgresDataType { .textArray }
    public static var postgresElementType: PostgresDataType { .text }
    public static var postgresAcceptedArrayTypes: [PostgresDataType] {
        [.textArray, .varcharArray, .bpcharArray, .nameArray]
    }

    /// `[String]` is sent as a binary `text[]`: each element's bytes copied behind its length, with no escape scan
    /// here and no `array_in` parse on the server (an Apple notification group binds three arrays of 5-20 KB JWS).
    public static var postgresBinaryElementOID: UInt32? { PostgresBinaryArray.textOID }
    public func appendPostgresBinary(to out: inout [UInt8]) -> Bool {
        out.append(contentsOf: utf8)
        return true
    }
}

/// PostgreSQL's binary format of a one-dimensional array (`array_send`): the number of dimensions (1, or 0 for an
/// empty array), the has-nulls flag, the element type's OID, then the length and lower bound 1 of the one
/// dimension, then per element its byte length (-1 for NULL) and bytes; every integer 4 bytes, big-endian.
enum PostgresBinaryArray {
    static let textOID: UInt32 = 25

    static func encode<Element: PostgresArrayLiteralElement>(_ elements: [Element], elementOID: UInt32) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(20 + elements.count * 24)
        func int(_ value: UInt32) {
            out.append(contentsOf: [
                UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF),
            ])
        }
        func patch(_ value: UInt32, at index: Int) {
            out[index] = UInt8(value >> 24)
            out[index + 1] = UInt8(value >> 16 & 0xFF)
            out[index + 2] = UInt8(value >> 8 & 0xFF)
            out[index + 3] = UInt8(value & 0xFF)
        }
        int(elements.isEmpty ? 0 : 1)
        let flags = out.count
        int(0)
        int(elementOID)
        if !elements.isEmpty {
            int(UInt32(elements.count))
            int(1)
        }
        for element in elements {
            let length = out.count
            int(0)
            if element.appendPostgresBinary(to: &out) {
                patch(UInt32(out.count - length - 4), at: length)
            } else {
                patch(UInt32.max, at: length)
                out[flags + 3] = 1
            }
        }
        return out
    }

    /// The element OID and elements (nil for NULL) of an array `encode` made; nil for any other bytes. So that
    /// errors can be scrubbed of text elements.
    static func decode(_ bytes: [UInt8]) -> (elementOID: UInt32, elements: [[UInt8]?])? {
        var index = 0
        func int() -> UInt32? {
            guard bytes.count - index >= 4 else { return nil }
            defer { index += 4 }
            return bytes[index..<index + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        guard let dimensions = int(), let flags = int(), flags <= 1, let oid = int() else { return nil }
        if dimensions == 0 { return index == bytes.count ? (oid, []) : nil }
        guard dimensions == 1, let count = int(), int() == 1 else { return nil }
        var elements: [[UInt8]?] = []
        for _ in 0..<count {
            guard let length = int() else { return nil }
            if length == UInt32.max {
                elements.append(nil)
                continue
            }
            guard bytes.count - index >= Int(length) else { return nil }
            elements.append(Array(bytes[index..<index + Int(length)]))
            index += Int(length)
        }
        return index == bytes.count ? (oid, elements) : nil
    }
}

extension Int64: PostgresArrayLiteralElement {
    public static var postgresArrayType: PostgresDataType { .int8Array }
    public static var postgresElementType: PostgresDataType { .int8 }
    public static var postgresAcceptedArrayTypes: [PostgresDataType] { [.int8Array, .int4Array, .int2Array] }
    public static var postgresBinaryElementOID: UInt32? { 20 }
    public func appendPostgresBinary(to out: inout [UInt8]) -> Bool {
        withUnsafeBytes(of: bigEndian) { out.append(contentsOf: $0) }
        return true
    }
}

extension Int32: PostgresArrayLiteralElement {
    public static var postgresArrayType: PostgresDataType { .int4Array }
    public static var postgresElementType: PostgresDataType { .int4 }
    public static var postgresAcceptedArrayTypes: [PostgresDataType] { [.int4Array, .int2Array] }
    public static var postgresBinaryElementOID: UInt32? { 23 }
    public func appendPostgresBinary(to out: inout [UInt8]) -> Bool {
        withUnsafeBytes(of: bigEndian) { out.append(contentsOf: $0) }
        return true
    }
}

extension Int: PostgresArrayLiteralElement {
    public static var postgresArrayType: PostgresDataType { .int8Array }
    public static var postgresElementType: PostgresDataType { .int8 }
    public static var postgresAcceptedArrayTypes: [PostgresDataType] { [.int8Array, .int4Array, .int2Array] }
    public static var postgresBinaryElementOID: UInt32? { 20 }
    public func appendPostgresBinary(to out: inout [UInt8]) -> Bool { Int64(self).appendPostgresBinary(to: &out) }
}

extension UUID: PostgresArrayLiteralElement {
    public static var postgresArrayType: PostgresDataType { .uuidArray }
    public static var postgresElementType: PostgresDataType { .uuid }
    public static var postgresAcceptedArrayTypes: [PostgresDataType] { [.uuidArray] }
    public static var postgresBinaryElementOID: UInt32? { 2950 }
    public func appendPostgresBinary(to out: inout [UInt8]) -> Bool {
        withUnsafeBytes(of: uuid) { out.append(contentsOf: $0) }
        return true
    }
}

/// `[Date]` ⇄ `timestamptz[]`, each element as `Date` binds alone (ISO 8601 UTC with microseconds).
extension Date: PostgresArrayLiteralElement {
    public static var postgresArrayType: PostgresDataType { .timestamptzArray }
    public static var postgresElementType: PostgresDataType { .timestamptz }
    public static var postgresAcceptedArrayTypes: [PostgresDataType] { [.timestamptzArray] }
}

extension Bool: PostgresArrayLiteralElement {
    public static var postgresArrayType: PostgresDataType { .boolArray }
    public static var postgresElementType: PostgresDataType { .bool }
    public static var postgresAcceptedArrayTypes: [PostgresDataType] { [.boolArray] }
}

/// `[String?]`, `[Int64?]`: arrays with NULL elements. (`[String]` throws a decode error on a NULL element.)
extension Optional: PostgresArrayElement, PostgresArrayLiteralElement where Wrapped: PostgresArrayLiteralElement {
    public static var postgresArrayType: PostgresDataType { Wrapped.postgresArrayType }
    public static var postgresElementType: PostgresDataType { Wrapped.postgresElementType }
    public static var postgresAcceptedArrayTypes: [PostgresDataType] { Wrapped.postgresAcceptedArrayTypes }
    public static var postgresBinaryElementOID: UInt32? { Wrapped.postgresBinaryElementOID }
    public func appendPostgresBinary(to out: inout [UInt8]) -> Bool {
        guard let self else { return false }
        return self.appendPostgresBinary(to: &out)
    }
}

/// Parser for one-dimensional array literals in PostgreSQL's text output format.
enum PostgresArrayLiteral {
    struct Failure: Error {
        var reason: String
    }

    /// Returns the elements (`nil` for an unquoted NULL). Rejects multi-dimensional arrays.
    static func parse(_ text: ArraySlice<UInt8>) throws(Failure) -> [ArraySlice<UInt8>?] {
        var i = text.startIndex
        let end = text.endIndex
        // Optional dimension decoration: "[0:2]={...}".
        if i < end, text[i] == UInt8(ascii: "[") {
            guard let eq = text[i...].firstIndex(of: UInt8(ascii: "=")) else { throw Failure(reason: "bad bounds") }
            i = eq + 1
        }
        guard i < end, text[i] == UInt8(ascii: "{") else { throw Failure(reason: "missing {") }
        i += 1
        var elements: [ArraySlice<UInt8>?] = []
        if i < end, text[i] == UInt8(ascii: "}") {
            guard i + 1 == end else { throw Failure(reason: "trailing characters") }
            return []
        }
        while true {
            guard i < end else { throw Failure(reason: "unterminated array") }
            let c = text[i]
            if c == UInt8(ascii: "{") { throw Failure(reason: "multi-dimensional arrays are not supported") }
            if c == UInt8(ascii: "\"") {
                i += 1
                var value: [UInt8] = []
                var closed = false
                while i < end {
                    let b = text[i]
                    if b == UInt8(ascii: "\\") {
                        i += 1
                        guard i < end else { break }
                        value.append(text[i])
                    } else if b == UInt8(ascii: "\"") {
                        closed = true
                        i += 1
                        break
                    } else {
                        value.append(b)
                    }
                    i += 1
                }
                guard closed else { throw Failure(reason: "unterminated quoted element") }
                elements.append(value[...])
            } else {
                let start = i
                var value: [UInt8] = []
                while i < end, text[i] != UInt8(ascii: ","), text[i] != UInt8(ascii: "}") {
                    if text[i] == UInt8(ascii: "\\") {
                        i += 1
                        guard i < end else { break }
                    }
                    value.append(text[i])
                    i += 1
                }
                let raw = text[start..<i]
                if raw.elementsEqual("NULL".utf8) {
                    elements.append(nil)
                } else {
                    guard !value.isEmpty else { throw Failure(reason: "empty element") }
                    elements.append(value[...])
                }
            }
            guard i < end else { throw Failure(reason: "unterminated array") }
            if text[i] == UInt8(ascii: ",") {
                i += 1
            } else if text[i] == UInt8(ascii: "}") {
                guard i + 1 == end else { throw Failure(reason: "trailing characters") }
                return elements
            } else {
                throw Failure(reason: "unexpected character")
            }
        }
    }
}
