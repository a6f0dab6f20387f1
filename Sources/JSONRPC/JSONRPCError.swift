// The module's one error type for local failures (JSON text, codecs, addresses, sockets, connection state).
// Errors that travel on the wire are `RPCError` values instead.

/// A local failure inside the JSON-RPC layer: bad JSON text, an unusable listen address, a socket error,
/// a closed connection. Its description is redacted: it never contains payload bytes.
public struct JSONRPCError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: String, Sendable, Hashable {
        /// The bytes are not valid JSON (RFC 8259, strict).
        case invalidJSON = "invalid_json"
        /// The JSON nests deeper than the configured limit.
        case nestingTooDeep = "nesting_too_deep"
        /// A value cannot be encoded as JSON (e.g. NaN).
        case unencodable = "unencodable"
        /// A listen/connect address string could not be parsed.
        case invalidAddress = "invalid_address"
        /// A system call failed (`errno` is set).
        case system = "system"
        /// The connection is closed (by either side).
        case connectionClosed = "connection_closed"
        /// The peer sent something that is not a JSON-RPC message.
        case protocolViolation = "protocol_violation"
        /// The server is shutting down or not running.
        case notRunning = "not_running"
        /// No answer within the caller's timeout.
        case timeout = "timeout"
    }

    /// What went wrong.
    public var code: Code
    /// A short, payload-free explanation (e.g. "unexpected byte at offset 12", "bind(2) failed").
    public var context: String
    /// Byte offset in the input, for JSON text errors.
    public var offset: Int?
    /// `errno`, for system errors.
    public var errno: Int32?

    /// Creates an error.
    public init(_ code: Code, _ context: String, offset: Int? = nil, errno: Int32? = nil) {
        self.code = code
        self.context = context
        self.offset = offset
        self.errno = errno
    }

    public var description: String {
        var text = "JSONRPCError(\(code.rawValue)): \(context)"
        if let offset { text += " at offset \(offset)" }
        if let errno { text += " (errno \(errno))" }
        return text
    }
}
