// JSON values with exact numbers and ordered objects.

/// A JSON number kept exactly as it was written.
///
/// Integers that fit `Int64` are stored as `Int64`; every other number keeps its original
/// decimal lexeme, so `12345678901234567890` or `19.99` are never silently rounded.
/// Equality compares the stored form: `1` and `1.0` are different numbers.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    enum Storage: Sendable, Hashable {
        case int(Int64)
        /// A valid RFC 8259 number lexeme that is not an Int64 integer.
        case text(String)
    }

    let storage: Storage

    /// An integer number.
    public init(_ value: Int64) { storage = .int(value) }

    /// An integer number.
    public init(_ value: Int) { storage = .int(Int64(value)) }

    /// A number from a finite `Double`; `nil` for NaN and infinities (not representable in JSON).
    /// Integral values that fit `Int64` exactly are stored as integers.
    public init?(_ value: Double) {
        guard value.isFinite else { return nil }
        if value.rounded() == value, abs(value) < 9.0e15, let i = Int64(exactly: value) {
            storage = .int(i)
        } else {
            storage = .text("\(value)")
        }
    }

    /// A number from its JSON lexeme (e.g. `"-0.5e10"`); `nil` if the text is not a valid JSON number.
    public init?(lexeme: String) {
        var bytes = Array(lexeme.utf8)
        let parsed: JSONNumber? = bytes.withUnsafeMutableBufferPointer { buffer in
            var parser = JSONParser(buffer: UnsafeBufferPointer(buffer), maxDepth: 1)
            guard let number = try? parser.parseNumber(), parser.index == buffer.count else { return nil }
            return number
        }
        guard let parsed else { return nil }
        self = parsed
    }

    init(uncheckedLexeme: String) {
        if let i = Int64(uncheckedLexeme) {
            storage = .int(i)
        } else {
            storage = .text(uncheckedLexeme)
        }
    }

    /// The value as `Int64` when it is an integer that fits exactly (also `1.0` or `1e3`), else `nil`.
    public var int64: Int64? {
        switch storage {
        case .int(let i): return i
        case .text(let text):
            if let i = Int64(text) { return i }
            guard let d = Double(text), d.rounded() == d, abs(d) < 9.0e15 else { return nil }
            return Int64(exactly: d)
        }
    }

    /// The nearest `Double` (may round, e.g. for 20-digit integers). `nil` only if out of `Double` range.
    public var double: Double? {
        switch storage {
        case .int(let i): return Double(i)
        case .text(let text):
            guard let d = Double(text), d.isFinite else { return nil }
            return d
        }
    }

    /// The exact decimal text of the number (canonical for integers, the original lexeme otherwise).
    public var decimalString: String {
        switch storage {
        case .int(let i): return String(i)
        case .text(let text): return text
        }
    }

    public var description: String { decimalString }
}

/// A JSON value (RFC 8259).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
    /// A value serialized once, sent as is (see ``EncodedJSON``). Equal only to the same encoded bytes: compare
    /// ``expanded`` values to compare meaning. Subscripts, `objectValue` and `arrayValue` see through it.
    case encoded(EncodedJSON)

    /// The member `key` when this is an object, else `nil`.
    public subscript(key: String) -> JSONValue? {
        if case .encoded(let encoded) = self { return encoded.value[key] }
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    /// The value itself, with an ``encoded(_:)`` value parsed back into plain values.
    public var expanded: JSONValue {
        if case .encoded(let encoded) = self { return encoded.value }
        return self
    }

    /// The element at `index` when this is an array and the index is valid, else `nil`.
    public subscript(index: Int) -> JSONValue? {
        if case .encoded(let encoded) = self { return encoded.value[index] }
        guard case .array(let array) = self, array.indices.contains(index) else { return nil }
        return array[index]
    }

    /// The string payload, if this is a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The number payload as `Int64`, if this is an integral number that fits.
    public var int64Value: Int64? {
        if case .number(let n) = self { return n.int64 }
        return nil
    }

    /// The number payload as `Double`, if this is a number.
    public var doubleValue: Double? {
        if case .number(let n) = self { return n.double }
        return nil
    }

    /// The boolean payload, if this is a boolean.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The object payload, if this is an object.
    public var objectValue: JSONObject? {
        if case .encoded(let encoded) = self { return encoded.value.objectValue }
        if case .object(let o) = self { return o }
        return nil
    }

    /// The array payload, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .encoded(let encoded) = self { return encoded.value.arrayValue }
        if case .array(let a) = self { return a }
        return nil
    }

    /// Whether this is `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// An integer number value.
    public static func int(_ value: Int) -> JSONValue { .number(JSONNumber(value)) }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral,
    ExpressibleByFloatLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .number(JSONNumber(value)) }
    public init(floatLiteral value: Double) { self = JSONNumber(value).map { .number($0) } ?? .null }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements))
    }
}

extension JSONValue: CustomStringConvertible {
    /// Compact JSON text of the value.
    public var description: String { String(decoding: JSONSerializer.serialize(self), as: UTF8.self) }
}

/// A JSON value serialized once (compact UTF-8), for answers computed once and sent many times: the serializer
/// copies the bytes instead of walking the value again, and they take a fraction of the value's memory. Made only
/// from a ``JSONValue`` or by a ``JSONObjectWriter``, so the bytes are always valid JSON.
public struct EncodedJSON: Sendable, Hashable {
    /// The compact JSON text.
    public let bytes: [UInt8]

    public init(_ value: JSONValue) {
        bytes = JSONSerializer.serialize(value.expanded)
    }

    init(bytes: [UInt8]) { self.bytes = bytes }

    /// The value parsed back (the bytes came from the serializer, so parsing cannot fail).
    public var value: JSONValue {
        (try? JSONParsing.parse(bytes, maxDepth: JSONParsing.maxDepthCap)) ?? .null
    }
}

/// A JSON object that keeps its members in order (as parsed or as inserted).
///
/// Keys are unique: the parser rejects duplicate keys, and assigning an existing key replaces its value in place.
/// Equality ignores member order.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// The members, in order.
    public private(set) var members: [Member]

    /// One `"key": value` pair.
    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSONValue
        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// An empty object.
    public init() { members = [] }

    init(uncheckedMembers: [Member]) { members = uncheckedMembers }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements)
    }

    /// The members in order, a later value of a repeated key replacing the earlier (as assigning each would), the
    /// storage reserved once.
    init(_ elements: [(String, JSONValue)]) {
        members = []
        members.reserveCapacity(elements.count)
        for (key, value) in elements { self[key] = value }
    }

    /// Number of members.
    public var count: Int { members.count }

    /// Whether the object has no members.
    public var isEmpty: Bool { members.isEmpty }

    /// The keys in order.
    public var keys: [String] { members.map(\.key) }

    /// The value for `key`; setting `nil` removes the member, setting a value replaces it in place or appends it.
    public subscript(key: String) -> JSONValue? {
        get {
            for member in members where member.key == key { return member.value }
            return nil
        }
        set {
            if let index = members.firstIndex(where: { $0.key == key }) {
                if let newValue {
                    members[index].value = newValue
                } else {
                    members.remove(at: index)
                }
            } else if let newValue {
                members.append(Member(key: key, value: newValue))
            }
        }
    }

    public func makeIterator() -> IndexingIterator<[Member]> { members.makeIterator() }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.members.count == rhs.members.count else { return false }
        for member in lhs.members where rhs[member.key] != member.value { return false }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(members.count)
        var keyHash = 0
        for member in members { keyHash ^= member.key.hashValue }
        hasher.combine(keyHash)
    }
}
