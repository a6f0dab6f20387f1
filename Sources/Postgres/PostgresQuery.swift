/// A parameterized SQL statement. String interpolation binds values: `"SELECT * FROM t WHERE id = \(id)"` becomes
/// `SELECT * FROM t WHERE id = $1` with `id` bound. The only way to splice raw SQL is `unsafeRaw`.
public struct PostgresQuery: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The SQL text with `$n` placeholders.
    public private(set) var sql: String
    /// The bound parameters, `$1` first.
    public private(set) var binds: [PostgresBind]

    /// A statement from SQL text and already-made binds (`$n` in `sql` must match `binds`).
    public init(unsafeSQL sql: String, binds: [PostgresBind] = []) {
        self.sql = sql
        self.binds = binds
    }

    public init(stringLiteral value: String) {
        self.init(unsafeSQL: value)
    }

    public init(stringInterpolation: StringInterpolation) {
        self.init(unsafeSQL: stringInterpolation.sql, binds: stringInterpolation.binds)
    }

    /// SQL text that is NOT escaped or parameterized. Never pass untrusted input.
    public static func unsafeRaw(_ sql: String) -> PostgresQuery {
        PostgresQuery(unsafeSQL: sql)
    }

    /// Appends raw SQL text (NOT escaped). Never pass untrusted input.
    public mutating func appendUnsafeRaw(_ sql: String) {
        self.sql += sql
    }

    /// Appends a bound value as the next `$n`.
    public mutating func appendBind(_ value: some PostgresEncodable) {
        binds.append(value.postgresBind())
        sql += "$\(binds.count)"
    }

    /// Appends another query, renumbering its placeholders after this one's (a fragment without binds, such as
    /// `.unsafeRaw` text, is appended as it is: it has no placeholders of its own).
    public mutating func append(_ other: PostgresQuery) {
        let shift = binds.count
        sql += shift == 0 || other.binds.isEmpty ? other.sql : Self.renumber(other.sql, by: shift)
        binds += other.binds
    }

    /// The SQL text only (never the bound values).
    public var description: String { sql }

    /// Shifts `$n` placeholders outside quotes by `shift`. Works on the UTF-8 bytes: quotes, `$` and digits are
    /// ASCII, and no byte of a multi-byte character is.
    static func renumber(_ sql: String, by shift: Int) -> String {
        let bytes = Array(sql.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 8)
        var quote: UInt8?
        var i = 0
        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        while i < bytes.count {
            let c = bytes[i]
            if let q = quote {
                out.append(c)
                if c == q { quote = nil }
                i += 1
            } else if c == UInt8(ascii: "'") || c == UInt8(ascii: "\"") {
                quote = c
                out.append(c)
                i += 1
            } else if c == UInt8(ascii: "$"), i + 1 < bytes.count, isDigit(bytes[i + 1]) {
                var j = i + 1
                var n = 0
                while j < bytes.count, isDigit(bytes[j]) {
                    n = n * 10 + Int(bytes[j] - UInt8(ascii: "0"))
                    j += 1
                }
                out.append(contentsOf: "$\(n + shift)".utf8)
                i = j
            } else {
                out.append(c)
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Builds the SQL text and binds of an interpolated `PostgresQuery`.
    public struct StringInterpolation: StringInterpolationProtocol, Sendable {
        public typealias StringLiteralType = String
        var sql: String
        var binds: [PostgresBind]

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql = ""
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds = []
            binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) {
            sql += literal
        }

        /// Binds `value` as the next `$n`.
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            binds.append(value.postgresBind())
            sql += "$\(binds.count)"
        }

        /// Binds `value` (NULL when nil) as the next `$n`.
        public mutating func appendInterpolation<T: PostgresEncodable>(_ value: T?) {
            binds.append(value.postgresBind())
            sql += "$\(binds.count)"
        }

        /// Splices another query, renumbering its placeholders.
        public mutating func appendInterpolation(query: PostgresQuery) {
            let shift = binds.count
            sql += shift == 0 ? query.sql : PostgresQuery.renumber(query.sql, by: shift)
            binds += query.binds
        }
    }
}

extension PostgresQuery {
    /// Makes its transaction's `COMMIT` wait for the synchronous standby even when the transaction writes nothing.
    ///
    /// A transaction that answers from what it read (a duplicate delivery "already stored", a replay) needs it: a
    /// commit becomes visible on the primary before the standby has it when the commit's wait was cancelled or the
    /// primary restarted after a crash, and an answer given from such a row without waiting, then a failover, loses
    /// what the answer promised was stored. This writes a tiny transactional WAL record (a logical decoding message,
    /// prefix `offergate.durable`, which logical decoding consumers that do not ask for messages never see), so the
    /// `COMMIT` flushes and waits until the standby has the WAL up to its commit record: past every commit the
    /// transaction read. A transaction id alone is not enough (PostgreSQL 15 waits only if the transaction wrote WAL
    /// before its commit record: `DurableAnswerTests`), and a row lock would make transactions of one tenant or
    /// customer wait for each other.
    public static let waitForStandbyAtCommit: PostgresQuery =
        "SELECT pg_logical_emit_message(true, 'offergate.durable', '')"
}
