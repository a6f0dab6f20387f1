import CLibPQ
import Foundation

/// The one error type of the `Postgres` module.
///
/// `description` is redacted: it never contains bound parameter values, the SQL text, the server's `DETAIL`, or
/// quoted fragments of the server message (which may echo input, e.g. `invalid input syntax for type integer:
/// "…"`). `debugDescription` adds the SQL text, detail and hint (still with bound values scrubbed).
public struct PostgresError: Error, Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, broadly.
    public enum Kind: Sendable, Equatable {
        /// Could not connect, or the connection broke (`PQstatus` is bad). Retryable.
        case connection
        /// The server rejected a statement (see `sqlState`).
        case server
        /// A column could not be decoded into the requested Swift type.
        case decode
        /// No connection became free within the pool's `acquireTimeout`.
        case poolTimeout
        /// The pool was closed.
        case poolClosed
        /// The waiting task was cancelled.
        case cancelled
        /// libpq or the server did something unexpected (pipeline bookkeeping, unexpected result status).
        case protocolViolation
        /// A statement of a pipeline was skipped because an earlier statement of its sync group failed.
        case pipelineAborted
        /// `COMMIT` rolled back because the transaction had already failed.
        case transactionAborted
        /// An already-applied migration's SQL changed.
        case migrationChecksumMismatch(version: Int)
        /// A migration set is malformed (bad file name, duplicate version).
        case invalidMigration
        /// The configuration (conninfo) is invalid.
        case configuration
        /// The statement committed on the server, but its wait for the synchronous standby was cancelled (PostgreSQL's
        /// WARNING "canceling wait for synchronous replication … committed locally"): the commit may not be on the
        /// standby, so it is not durable and must not be reported as done. Retryable: work that is safe to run again
        /// (idempotency keys) finds it once it has replicated.
        case commitNotReplicated
    }

    /// What went wrong, broadly.
    public var kind: Kind
    /// The five-character SQLSTATE (`PG_DIAG_SQLSTATE`), when the server sent one.
    public var sqlState: String?
    /// The server's primary message, or libpq's `PQerrorMessage`, or this module's own message. Bound values are
    /// scrubbed from it.
    public var message: String
    /// The server's `DETAIL` (bound values scrubbed). Not part of `description`.
    public var detail: String?
    /// The server's `HINT`. Not part of `description`.
    public var hint: String?
    /// The violated constraint (`PG_DIAG_CONSTRAINT_NAME`), e.g. for unique violations (SQLSTATE 23505).
    public var constraint: String?
    /// Table, column and schema names the server reported, when any.
    public var table: String?
    public var column: String?
    /// The column a decode error is about (name, or `#index`).
    public var decodeColumn: String?
    /// libpq's `PQerrorMessage` for connection-level failures.
    public var connectionMessage: String?
    /// The SQL text of the failing statement (only printed by `debugDescription`).
    public var query: String?

    /// Creates an error. Prefer the module's own constructors; public for tests of code built on this module.
    public init(
        kind: Kind, message: String, sqlState: String? = nil, detail: String? = nil, hint: String? = nil,
        constraint: String? = nil, table: String? = nil, column: String? = nil, decodeColumn: String? = nil,
        connectionMessage: String? = nil, query: String? = nil
    ) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
        self.detail = detail
        self.hint = hint
        self.constraint = constraint
        self.table = table
        self.column = column
        self.decodeColumn = decodeColumn
        self.connectionMessage = connectionMessage
        self.query = query
    }

    /// Whether running the same work again (on a fresh transaction/connection) may succeed: serialization
    /// failure (40001), deadlock (40P01), connection failures (08xxx, broken connections), admin shutdown (57P01),
    /// crash shutdown (57P02), cannot-connect-now (57P03), a read-only transaction on a server that is not (or no
    /// longer) the primary (25006, e.g. during a failover), and pool timeouts.
    public var isRetryable: Bool {
        switch kind {
        case .connection, .poolTimeout, .commitNotReplicated: return true
        case .server, .transactionAborted:
            guard let state = sqlState else { return false }
            return Self.retryableStates.contains(state) || state.hasPrefix("08")
        default: return false
        }
    }

    /// Serialization failure or deadlock: the whole transaction should be retried.
    public var isSerializationFailure: Bool {
        sqlState == "40001" || sqlState == "40P01"
    }

    /// The server cancelled the statement because it ran longer than `statement_timeout` (SQLSTATE 57014, not
    /// requested by this process). Not retryable: the same statement would run as long again.
    public var isStatementTimeout: Bool { kind == .server && sqlState == "57014" }

    /// A unique violation (SQLSTATE 23505); `constraint` names the index.
    public var isUniqueViolation: Bool { sqlState == "23505" }

    static let retryableStates: Set<String> = ["40001", "40P01", "57P01", "57P02", "57P03", "25006"]

    public var description: String {
        var parts = ["PostgresError(\(kindName)"]
        if let sqlState { parts.append("sqlState: \(sqlState)") }
        if let constraint { parts.append("constraint: \(constraint)") }
        if let decodeColumn { parts.append("column: \(decodeColumn)") }
        return parts.joined(separator: ", ") + "): " + Self.redactQuoted(message)
    }

    public var debugDescription: String {
        var text = description.replacingOccurrences(of: Self.redactQuoted(message), with: message)
        if let detail { text += "\nDETAIL: \(detail)" }
        if let hint { text += "\nHINT: \(hint)" }
        if let connectionMessage, connectionMessage != message { text += "\nlibpq: \(connectionMessage)" }
        if let query { text += "\nSQL: \(query)" }
        return text
    }

    var kindName: String {
        switch kind {
        case .connection: "connection"
        case .server: "server"
        case .decode: "decode"
        case .poolTimeout: "poolTimeout"
        case .poolClosed: "poolClosed"
        case .cancelled: "cancelled"
        case .protocolViolation: "protocolViolation"
        case .pipelineAborted: "pipelineAborted"
        case .transactionAborted: "transactionAborted"
        case .migrationChecksumMismatch(let version): "migrationChecksumMismatch(\(version))"
        case .invalidMigration: "invalidMigration"
        case .configuration: "configuration"
        case .commitNotReplicated: "commitNotReplicated"
        }
    }

    /// Replaces every `"…"` fragment with `"…"`: PostgreSQL quotes both identifiers and echoed input values.
    static func redactQuoted(_ text: String) -> String {
        var out = ""
        var inQuote = false
        for ch in text {
            if ch == "\"" {
                if inQuote { out += "…\"" } else { out.append(ch) }
                inQuote.toggle()
            } else if !inQuote {
                out.append(ch)
            }
        }
        if inQuote { out += "…" }
        return out
    }

    /// Removes occurrences of bound values (their text form) from a server text.
    static func scrub(_ text: String, binds: [PostgresBind]) -> String {
        var text = text
        func redact(_ bytes: [UInt8]) {
            guard bytes.count >= 3, let value = String(validating: bytes, as: UTF8.self) else { return }
            text = text.replacingOccurrences(of: value, with: "<redacted>")
        }
        for bind in binds {
            guard let bytes = bind.bytes else { continue }
            switch bind.format {
            case .text: redact(bytes)
            case .binary:
                // Each text element of an array: a message quotes one value, never a whole array.
                guard let array = PostgresBinaryArray.decode(bytes), array.elementOID == PostgresBinaryArray.textOID
                else { continue }
                for case let element? in array.elements { redact(element) }
            }
        }
        return text
    }

    // MARK: Builders

    static func connection(_ message: String, sqlState: String? = nil) -> PostgresError {
        PostgresError(kind: .connection, message: message, sqlState: sqlState, connectionMessage: message)
    }

    static func commitNotReplicated(query: String?) -> PostgresError {
        PostgresError(
            kind: .commitNotReplicated,
            message: "the commit's wait for synchronous replication was cancelled: it committed on the primary but "
                + "may not be on the standby", sqlState: "01000", query: query)
    }

    /// The task awaiting a statement was cancelled (and the statement with it, if it had started).
    public static func cancelledByTask() -> PostgresError {
        PostgresError(
            kind: .cancelled, message: "the statement was cancelled: the task waiting for it was cancelled",
            sqlState: "57014")
    }

    static func decode(_ message: String, column: String) -> PostgresError {
        PostgresError(kind: .decode, message: message, decodeColumn: column)
    }

    /// Builds the error for a failed `PGresult` (or a NULL result) on `conn`.
    static func fromResult(
        _ result: OpaquePointer?, conn: OpaquePointer?, query: String?, binds: [PostgresBind]
    ) -> PostgresError {
        let connBad = conn.map { PQstatus($0) != CONNECTION_OK } ?? true
        let connMessage = conn.flatMap { trimmed(PQerrorMessage($0)) }
        guard let result else {
            var e = PostgresError.connection(connMessage ?? "no result from server")
            e.query = query
            if !connBad { e.kind = .protocolViolation }
            return e
        }
        func field(_ code: UInt8) -> String? {
            guard let p = PQresultErrorField(result, Int32(code)) else { return nil }
            return String(cString: p)
        }
        let sqlState = field(UInt8(ascii: "C"))
        let primary = field(UInt8(ascii: "M")) ?? trimmed(PQresultErrorMessage(result)) ?? connMessage ?? "error"
        var e = PostgresError(
            kind: connBad ? .connection : .server,
            message: scrub(primary, binds: binds),
            sqlState: sqlState,
            detail: field(UInt8(ascii: "D")).map { scrub($0, binds: binds) },
            hint: field(UInt8(ascii: "H")),
            constraint: field(UInt8(ascii: "n")),
            table: field(UInt8(ascii: "t")),
            column: field(UInt8(ascii: "c")),
            connectionMessage: connBad ? connMessage.map { scrub($0, binds: binds) } : nil,
            query: query
        )
        if PQresultStatus(result) == PGRES_PIPELINE_ABORTED {
            e.kind = .pipelineAborted
            e.message = "statement skipped: an earlier statement of the pipeline failed"
        }
        return e
    }

    static func trimmed(_ p: UnsafePointer<CChar>?) -> String? {
        guard let p else { return nil }
        let s = String(cString: p).trimmingCharacters(in: .whitespacesAndNewlines)
        return s.isEmpty ? nil : s
    }
}
