// Codable decoding straight from a parsed JSONValue (no re-parsing).
import Foundation

/// Decodes `Decodable` types from a `JSONValue`.
///
/// Errors are standard `DecodingError`s carrying the coding path; `DecodingError.pathDescription` renders it as
/// `offers[2].price`, and `RPCError.invalidParams(_:)` maps one to a `-32602` response. Unknown keys are ignored.
/// `Date` is decoded from RFC 3339 strings, `Decimal` from JSON numbers (exactly, from the lexeme),
/// `JSONValue`/`JSONObject` are passed through unchanged.
public struct JSONValueDecoder: Sendable {
    /// Values available to `Decodable` implementations via `decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    public init() {}

    /// Decodes a `T` from `value`.
    public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        let decoder = _JSONValueDecoder(value: value.expanded, codingPath: [], userInfo: userInfo)
        return try decoder.unwrap(T.self)
    }
}

/// A coding key for array indices and dynamic object keys.
struct JSONCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        self.stringValue = "Index \(intValue)"
        self.intValue = intValue
    }
}

extension DecodingError {
    /// The coding path rendered as `a.b[2].c` (the key that was missing is included).
    public var pathDescription: String {
        switch self {
        case .keyNotFound(let key, let context): return Self.render(context.codingPath + [key])
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return Self.render(context.codingPath)
        @unknown default: return ""
        }
    }

    /// A short snake_case kind: `missing_param`, `wrong_type`, `null_value` or `invalid_value`.
    public var kindDescription: String {
        switch self {
        case .keyNotFound: return "missing_param"
        case .typeMismatch: return "wrong_type"
        case .valueNotFound: return "null_value"
        case .dataCorrupted: return "invalid_value"
        @unknown default: return "invalid_value"
        }
    }

    static func render(_ path: [any CodingKey]) -> String {
        var text = ""
        for key in path {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                if !text.isEmpty { text += "." }
                text += key.stringValue
            }
        }
        return text
    }
}

final class _JSONValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    init(value: JSONValue, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: any Sendable]) {
        self.value = value
        self.codingPath = codingPath
        self.userInfo = userInfo
    }

    init(value: JSONValue, codingPath: [any CodingKey], anyUserInfo: [CodingUserInfoKey: Any]) {
        self.value = value
        self.codingPath = codingPath
        self.userInfo = anyUserInfo
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else {
            throw mismatch([String: JSONValue].self, value, codingPath)
        }
        return KeyedDecodingContainer(KeyedContainer<Key>(decoder: self, object: object))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let array) = value else { throw mismatch([JSONValue].self, value, codingPath) }
        return UnkeyedContainer(decoder: self, array: array)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleContainer(decoder: self) }

    func child(_ value: JSONValue, key: any CodingKey) -> _JSONValueDecoder {
        _JSONValueDecoder(value: value, codingPath: codingPath + [key], anyUserInfo: userInfo)
    }

    func unwrap<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == JSONValue.self, let v = value as? T { return v }
        if T.self == Date.self {
            guard case .string(let text) = value else { throw mismatch(Date.self, value, codingPath) }
            guard let date = RFC3339.parse(text), let v = date as? T else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: codingPath, debugDescription: "Expected an RFC 3339 date-time"))
            }
            return v
        }
        if T.self == Decimal.self {
            guard case .number(let n) = value else { throw mismatch(Decimal.self, value, codingPath) }
            guard let d = Decimal(string: n.decimalString, locale: Locale(identifier: "en_US_POSIX")),
                let v = d as? T
            else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Invalid decimal"))
            }
            return v
        }
        if T.self == JSONObject.self {
            guard case .object(let o) = value, let v = o as? T else {
                throw mismatch(JSONObject.self, value, codingPath)
            }
            return v
        }
        return try T(from: self)
    }

    // MARK: Scalars

    func decodeNil() -> Bool { value.isNull }

    func decodeBool() throws -> Bool {
        guard case .bool(let b) = value else { throw mismatch(Bool.self, value, codingPath) }
        return b
    }

    func decodeString() throws -> String {
        guard case .string(let s) = value else { throw mismatch(String.self, value, codingPath) }
        return s
    }

    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard case .number(let n) = value else { throw mismatch(T.self, value, codingPath) }
        if let i = n.int64, let v = T(exactly: i) { return v }
        if T.self == UInt64.self || T.self == UInt.self, let v = T(n.decimalString) { return v }
        throw DecodingError.dataCorrupted(
            .init(codingPath: codingPath, debugDescription: "Number does not fit \(T.self)"))
    }

    func decodeFloat<T: BinaryFloatingPoint>(_ type: T.Type) throws -> T {
        guard case .number(let n) = value else { throw mismatch(T.self, value, codingPath) }
        guard let d = n.double else {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "Number out of range"))
        }
        return T(d)
    }
}

func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: [any CodingKey]) -> DecodingError {
    if value.isNull {
        return .valueNotFound(type, .init(codingPath: path, debugDescription: "Expected \(type) but found null"))
    }
    let found: String
    switch value {
    case .null: found = "null"
    case .bool: found = "a boolean"
    case .number: found = "a number"
    case .string: found = "a string"
    case .array: found = "an array"
    case .object: found = "an object"
    case .encoded: found = "an encoded value"
    }
    return .typeMismatch(type, .init(codingPath: path, debugDescription: "Expected \(type) but found \(found)"))
}

struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: _JSONValueDecoder
    let object: JSONObject
    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { object.members.compactMap { Key(stringValue: $0.key) } }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    func child(_ key: Key) throws -> _JSONValueDecoder {
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "Missing key \"\(key.stringValue)\""))
        }
        return decoder.child(value, key: key)
    }

    func decodeNil(forKey key: Key) throws -> Bool { (object[key.stringValue] ?? .null).isNull }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).decodeBool() }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).decodeString() }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).decodeFloat(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).decodeFloat(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).decodeInteger(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).decodeInteger(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).decodeInteger(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).decodeInteger(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).decodeInteger(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).decodeInteger(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).decodeInteger(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).decodeInteger(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).decodeInteger(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).decodeInteger(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).unwrap(type) }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let value = object[key.stringValue], !value.isNull else { return nil }
        return try decoder.child(value, key: key).decodeString()
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = object[key.stringValue], !value.isNull else { return nil }
        return try decoder.child(value, key: key).unwrap(type)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try child(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        decoder.child(object["super"] ?? .null, key: JSONCodingKey(stringValue: "super"))
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        decoder.child(object[key.stringValue] ?? .null, key: key)
    }
}

struct UnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: _JSONValueDecoder
    let array: [JSONValue]
    var currentIndex = 0
    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { array.count }
    var isAtEnd: Bool { currentIndex >= array.count }

    init(decoder: _JSONValueDecoder, array: [JSONValue]) {
        self.decoder = decoder
        self.array = array
    }

    mutating func next() throws -> _JSONValueDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self,
                .init(
                    codingPath: codingPath + [JSONCodingKey(intValue: currentIndex)],
                    debugDescription: "Unkeyed container is at end"))
        }
        let child = decoder.child(array[currentIndex], key: JSONCodingKey(intValue: currentIndex))
        currentIndex += 1
        return child
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, array[currentIndex].isNull else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().decodeBool() }
    mutating func decode(_ type: String.Type) throws -> String { try next().decodeString() }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().decodeFloat(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next().decodeFloat(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().decodeInteger(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().decodeInteger(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().unwrap(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
    mutating func superDecoder() throws -> any Decoder { try next() }
}

struct SingleContainer: SingleValueDecodingContainer {
    let decoder: _JSONValueDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool { decoder.decodeNil() }
    func decode(_ type: Bool.Type) throws -> Bool { try decoder.decodeBool() }
    func decode(_ type: String.Type) throws -> String { try decoder.decodeString() }
    func decode(_ type: Double.Type) throws -> Double { try decoder.decodeFloat(type) }
    func decode(_ type: Float.Type) throws -> Float { try decoder.decodeFloat(type) }
    func decode(_ type: Int.Type) throws -> Int { try decoder.decodeInteger(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decoder.decodeInteger(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decoder.decodeInteger(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decoder.decodeInteger(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decoder.decodeInteger(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.decodeInteger(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.decodeInteger(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.unwrap(type) }
}
