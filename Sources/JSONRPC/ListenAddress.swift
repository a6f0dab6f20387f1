// Listen/connect addresses, parsed in exactly one place.

/// Where a server listens or a client connects: `unix:/path/to.sock` or `tcp:HOST:PORT`.
///
/// Accepted forms: `unix:/abs/or/relative/path` (≤ 107 bytes), `tcp:127.0.0.1:7411`, `tcp:[::1]:7411`,
/// `tcp:localhost:7411` (→ 127.0.0.1), `tcp:7411` and `tcp::7411` (→ 127.0.0.1). Port 0 asks for an ephemeral port
/// when listening. Host names other than `localhost` are rejected (no DNS here).
public enum ListenAddress: Sendable, Hashable, CustomStringConvertible {
    case unix(path: String)
    case tcp(host: String, port: UInt16)

    /// Parses an address string.
    public init(parsing text: String) throws(JSONRPCError) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else { throw JSONRPCError(.invalidAddress, "unix: needs a socket path") }
            guard path.utf8.count <= 107 else {
                throw JSONRPCError(.invalidAddress, "unix socket path longer than 107 bytes")
            }
            guard !path.utf8.contains(0) else { throw JSONRPCError(.invalidAddress, "unix socket path contains NUL") }
            self = .unix(path: path)
            return
        }
        guard text.hasPrefix("tcp:") else {
            throw JSONRPCError(.invalidAddress, "address must start with unix: or tcp: (e.g. tcp:127.0.0.1:7411)")
        }
        let rest = text.dropFirst(4)
        var host = "127.0.0.1"
        let portText: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw JSONRPCError(.invalidAddress, "unterminated [IPv6] host")
            }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            guard after.hasPrefix(":") else { throw JSONRPCError(.invalidAddress, "expected :PORT after [host]") }
            portText = after.dropFirst()
        } else if let colon = rest.lastIndex(of: ":") {
            let hostPart = rest[..<colon]
            if !hostPart.isEmpty { host = String(hostPart) }
            portText = rest[rest.index(after: colon)...]
        } else {
            portText = rest
        }
        guard let port = UInt16(portText) else {
            throw JSONRPCError(.invalidAddress, "port must be a number 0-65535")
        }
        if host == "localhost" { host = "127.0.0.1" }
        guard SocketAddress.isIPLiteral(host) else {
            throw JSONRPCError(.invalidAddress, "host must be an IPv4/IPv6 literal or localhost")
        }
        self = .tcp(host: host, port: port)
    }

    public var description: String {
        switch self {
        case .unix(let path): return "unix:\(path)"
        case .tcp(let host, let port): return host.contains(":") ? "tcp:[\(host)]:\(port)" : "tcp:\(host):\(port)"
        }
    }
}
