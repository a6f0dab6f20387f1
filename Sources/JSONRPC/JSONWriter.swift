// Writing JSON straight to bytes, for an answer made often enough that building its `JSONValue` first shows up in
// profiles (every considered offer of a first `offers.best` answer).

/// The members of one object being written. Made only through ``EncodedJSON/init(object:)`` and the nested
/// `object(_:_:)` / `array(_:_:)`, so brackets always balance and commas fall where they must. Keys are literals of
/// the caller's code: plain ASCII needing no escape (checked in debug builds), and distinct (the caller's duty).
public struct JSONObjectWriter {
    var out: [UInt8]
    var first = true

    mutating func key(_ key: StaticString) {
        assert(
            UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount).allSatisfy {
                $0 >= 0x20 && $0 < 0x80 && $0 != 0x22 && $0 != 0x5C
            }, "JSON keys written raw must need no escape")
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        out.append(UInt8(ascii: "\""))
        out.append(UInt8(ascii: ":"))
    }

    public mutating func string(_ key: StaticString, _ value: String) {
        self.key(key)
        JSONSerializer.appendString(value, to: &out)
    }

    public mutating func int(_ key: StaticString, _ value: Int) {
        self.key(key)
        JSONSerializer.appendInt(Int64(value), to: &out)
    }

    public mutating func bool(_ key: StaticString, _ value: Bool) {
        self.key(key)
        JSONSerializer.appendASCII(value ? "true" : "false", to: &out)
    }

    public mutating func null(_ key: StaticString) {
        self.key(key)
        JSONSerializer.appendASCII("null", to: &out)
    }

    /// Any value, serialized as `JSONSerializer` would.
    public mutating func value(_ key: StaticString, _ value: JSONValue) {
        self.key(key)
        JSONSerializer.append(value, to: &out)
    }

    public mutating func object(_ key: StaticString, _ body: (inout JSONObjectWriter) -> Void) {
        self.key(key)
        JSONObjectWriter.write(into: &out, body)
    }

    public mutating func array(_ key: StaticString, _ body: (inout JSONArrayWriter) -> Void) {
        self.key(key)
        JSONArrayWriter.write(into: &out, body)
    }

    /// `{`, the members `body` writes, `}`, appended to `out` (whose buffer the nested writer borrows: no copy).
    static func write(into out: inout [UInt8], _ body: (inout JSONObjectWriter) -> Void) {
        var writer = JSONObjectWriter(out: [])
        swap(&writer.out, &out)
        writer.out.append(UInt8(ascii: "{"))
        body(&writer)
        writer.out.append(UInt8(ascii: "}"))
        swap(&writer.out, &out)
    }
}

/// The elements of one array being written (see ``JSONObjectWriter``).
public struct JSONArrayWriter {
    var out: [UInt8]
    var first = true

    mutating func separate() {
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
    }

    public mutating func string(_ value: String) {
        separate()
        JSONSerializer.appendString(value, to: &out)
    }

    public mutating func object(_ body: (inout JSONObjectWriter) -> Void) {
        separate()
        JSONObjectWriter.write(into: &out, body)
    }

    static func write(into out: inout [UInt8], _ body: (inout JSONArrayWriter) -> Void) {
        var writer = JSONArrayWriter(out: [])
        swap(&writer.out, &out)
        writer.out.append(UInt8(ascii: "["))
        body(&writer)
        writer.out.append(UInt8(ascii: "]"))
        swap(&writer.out, &out)
    }
}

extension EncodedJSON {
    /// An object written member by member, without a `JSONValue` in between, into a buffer of `capacity` bytes
    /// at first (one that holds the whole object spares a reallocation and a copy).
    public init(capacity: Int = 1_024, object body: (inout JSONObjectWriter) -> Void) {
        var out: [UInt8] = []
        out.reserveCapacity(capacity)
        JSONObjectWriter.write(into: &out, body)
        self.init(bytes: out)
    }
}
