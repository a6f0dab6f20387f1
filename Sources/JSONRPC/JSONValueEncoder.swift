// Codable encoding straight into a JSONValue.
import Foundation

/// Encodes `Encodable` values into a `JSONValue` (object members keep the order in which they were encoded).
///
/// `Date` is encoded as RFC 3339 UTC with `Z` (milliseconds only when non-zero, see `RFC3339.format`),
/// `Decimal` as an exact JSON number, `JSONValue`/`JSONObject` as themselves. Non-finite floats throw.
public struct JSONValueEncoder: Sendable {
    /// Values available to `Encodable` implementations via `encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    public init() {}

    /// Encodes `value` as a `JSONValue`.
    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let root = EncNode()
        let encoder = _JSONValueEncoder(node: root, codingPath: [], userInfo: userInfo)
        try encoder.box(value)
        return root.resolve()
    }

    /// Encodes `value` as compact JSON bytes.
    public func encodeToBytes<T: Encodable>(_ value: T, options: JSONSerializer.Options = .init()) throws -> [UInt8] {
        JSONSerializer.serialize(try encode(value), options: options)
    }
}

/// A mutable tree node used while encoding (containers share nodes by reference).
final class EncNode {
    enum Kind {
        case empty
        case value(JSONValue)
        case object([(String, EncNode)])
        case array([EncNode])
    }
    var kind: Kind = .empty

    func resolve() -> JSONValue {
        switch kind {
        case .empty: return .object(JSONObject())
        case .value(let v): return v
        case .array(let nodes): return .array(nodes.map { $0.resolve() })
        case .object(let pairs):
            var members: [JSONObject.Member] = []
            members.reserveCapacity(pairs.count)
            var seen: [String: Int] = [:]
            for (key, node) in pairs {
                let value = node.resolve()
                if let index = seen[key] {
                    members[index].value = value
                } else {
                    seen[key] = members.count
                    members.append(JSONObject.Member(key: key, value: value))
                }
            }
            return .object(JSONObject(uncheckedMembers: members))
        }
    }

    func makeObject() {
        if case .object = kind { return }
        kind = .object([])
    }

    func makeArray() {
        if case .array = kind { return }
        kind = .array([])
    }

    func addMember(_ key: String) -> EncNode {
        let node = EncNode()
        if case .object(var pairs) = kind {
            kind = .empty
            pairs.append((key, node))
            kind = .object(pairs)
        }
        return node
    }

    func addElement() -> EncNode {
        let node = EncNode()
        if case .array(var nodes) = kind {
            kind = .empty
            nodes.append(node)
            kind = .array(nodes)
        }
        return node
    }

    var elementCount: Int {
        if case .array(let nodes) = kind { return nodes.count }
        return 0
    }
}

final class _JSONValueEncoder: Encoder {
    let node: EncNode
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    init(node: EncNode, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]) {
        self.node = node
        self.codingPath = codingPath
        self.userInfo = userInfo
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.makeObject()
        return KeyedEncodingContainer(KeyedEncContainer<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.makeArray()
        return UnkeyedEncContainer(encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleEncContainer(encoder: self) }

    func child(_ node: EncNode, key: any CodingKey) -> _JSONValueEncoder {
        _JSONValueEncoder(node: node, codingPath: codingPath + [key], userInfo: userInfo)
    }

    func box<T: Encodable>(_ value: T) throws {
        switch value {
        case let v as JSONValue: node.kind = .value(v)
        case let v as JSONObject: node.kind = .value(.object(v))
        case let v as Date:
            guard let text = RFC3339.format(v) else {
                throw EncodingError.invalidValue(
                    v, .init(codingPath: codingPath, debugDescription: "Date out of range"))
            }
            node.kind = .value(.string(text))
        case let v as Decimal:
            guard let number = JSONNumber(lexeme: v.description) else {
                throw EncodingError.invalidValue(v, .init(codingPath: codingPath, debugDescription: "Invalid decimal"))
            }
            node.kind = .value(.number(number))
        default:
            try value.encode(to: self)
        }
    }

    func set(_ value: JSONValue) { node.kind = .value(value) }

    func setFloat(_ value: Double) throws {
        guard let number = JSONNumber(value) else {
            throw EncodingError.invalidValue(
                value, .init(codingPath: codingPath, debugDescription: "Non-finite number"))
        }
        node.kind = .value(.number(number))
    }

    func setInteger<T: FixedWidthInteger>(_ value: T) {
        if let i = Int64(exactly: value) {
            node.kind = .value(.number(JSONNumber(i)))
        } else {
            node.kind = .value(.number(JSONNumber(uncheckedLexeme: String(value))))
        }
    }
}

struct KeyedEncContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: _JSONValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    func child(_ key: Key) -> _JSONValueEncoder { encoder.child(encoder.node.addMember(key.stringValue), key: key) }

    mutating func encodeNil(forKey key: Key) throws { child(key).set(.null) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { child(key).set(.bool(value)) }
    mutating func encode(_ value: String, forKey key: Key) throws { child(key).set(.string(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try child(key).setFloat(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try child(key).setFloat(Double(value)) }
    mutating func encode(_ value: Int, forKey key: Key) throws { child(key).setInteger(value) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { child(key).setInteger(value) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { child(key).setInteger(value) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { child(key).setInteger(value) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try child(key).box(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        child(key).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        child(key).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        encoder.child(encoder.node.addMember("super"), key: JSONCodingKey(stringValue: "super"))
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder { child(key) }
}

struct UnkeyedEncContainer: UnkeyedEncodingContainer {
    let encoder: _JSONValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { encoder.node.elementCount }

    func next() -> _JSONValueEncoder {
        let index = encoder.node.elementCount
        return encoder.child(encoder.node.addElement(), key: JSONCodingKey(intValue: index))
    }

    mutating func encodeNil() throws { next().set(.null) }
    mutating func encode(_ value: Bool) throws { next().set(.bool(value)) }
    mutating func encode(_ value: String) throws { next().set(.string(value)) }
    mutating func encode(_ value: Double) throws { try next().setFloat(value) }
    mutating func encode(_ value: Int) throws { next().setInteger(value) }
    mutating func encode(_ value: Int64) throws { next().setInteger(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try next().box(value) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    {
        next().container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { next().unkeyedContainer() }
    mutating func superEncoder() -> any Encoder { next() }
}

struct SingleEncContainer: SingleValueEncodingContainer {
    let encoder: _JSONValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() throws { encoder.set(.null) }
    mutating func encode(_ value: Bool) throws { encoder.set(.bool(value)) }
    mutating func encode(_ value: String) throws { encoder.set(.string(value)) }
    mutating func encode(_ value: Double) throws { try encoder.setFloat(value) }
    mutating func encode(_ value: Float) throws { try encoder.setFloat(Double(value)) }
    mutating func encode(_ value: Int) throws { encoder.setInteger(value) }
    mutating func encode(_ value: Int8) throws { encoder.setInteger(value) }
    mutating func encode(_ value: Int16) throws { encoder.setInteger(value) }
    mutating func encode(_ value: Int32) throws { encoder.setInteger(value) }
    mutating func encode(_ value: Int64) throws { encoder.setInteger(value) }
    mutating func encode(_ value: UInt) throws { encoder.setInteger(value) }
    mutating func encode(_ value: UInt8) throws { encoder.setInteger(value) }
    mutating func encode(_ value: UInt16) throws { encoder.setInteger(value) }
    mutating func encode(_ value: UInt32) throws { encoder.setInteger(value) }
    mutating func encode(_ value: UInt64) throws { encoder.setInteger(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try encoder.box(value) }
}

extension JSONValue: Codable {
    /// Decodes any JSON value (used when JSONValue is embedded in types decoded by other decoders).
    public init(from decoder: any Decoder) throws {
        if let d = decoder as? _JSONValueDecoder {
            self = d.value
            return
        }
        if let keyed = try? decoder.container(keyedBy: JSONCodingKey.self) {
            var object = JSONObject()
            for key in keyed.allKeys { object[key.stringValue] = try keyed.decode(JSONValue.self, forKey: key) }
            self = .object(object)
            return
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var array: [JSONValue] = []
            while !unkeyed.isAtEnd { array.append(try unkeyed.decode(JSONValue.self)) }
            self = .array(array)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let b = try? single.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? single.decode(Int64.self) {
            self = .number(JSONNumber(i))
        } else if let d = try? single.decode(Double.self) {
            self = JSONNumber(d).map { .number($0) } ?? .null
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        if let e = encoder as? _JSONValueEncoder {
            e.set(self)
            return
        }
        switch self {
        case .null:
            var c = encoder.singleValueContainer()
            try c.encodeNil()
        case .bool(let b):
            var c = encoder.singleValueContainer()
            try c.encode(b)
        case .number(let n):
            var c = encoder.singleValueContainer()
            if let i = n.int64, case .int = n.storage {
                try c.encode(i)
            } else {
                try c.encode(n.double ?? 0)
            }
        case .string(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .array(let a):
            var c = encoder.unkeyedContainer()
            for element in a { try c.encode(element) }
        case .object(let o):
            var c = encoder.container(keyedBy: JSONCodingKey.self)
            for member in o.members { try c.encode(member.value, forKey: JSONCodingKey(stringValue: member.key)) }
        case .encoded(let encoded):
            try encoded.value.encode(to: encoder)
        }
    }
}
