import CLibPQ
import Dispatch
import Foundation

/// How to reach the server: a libpq conninfo (`host=/sock user=postgres dbname=app`) or URI (`postgresql://…`).
///
/// Every connection also gets `TimeZone=UTC`, `DateStyle=ISO`, `extra_float_digits=3`, `bytea_output=hex` (via
/// the startup `options`, appended to any the conninfo has) and `client_encoding=UTF8`; with `statementTimeout` set,
/// `statement_timeout` too, so the limit holds from the first statement without a round trip.
///
/// TCP connections get keepalives unless the conninfo sets any of libpq's `keepalives*` or `tcp_user_timeout`
/// parameters (`defaultKeepalives`): a server that vanished without closing the connection (a dead machine, a
/// partition) is then noticed within about 10 s instead of the kernel's two hours, so a failover is followed.
/// libpq ignores them on Unix sockets.
public struct PostgresConfiguration: Sendable, Hashable {
    /// The connection string as given.
    public var conninfo: String
    /// `application_name` shown in `pg_stat_activity` (overrides the conninfo's).
    public var applicationName: String?
    /// Seconds libpq waits to connect (`connect_timeout`), to each host of a multi-host conninfo in turn, when the
    /// conninfo sets no `connect_timeout` of its own (one it sets is kept, as keepalives are); nil leaves libpq's
    /// default (none). 3 s by default: a first host that is down (its machine, not just its PostgreSQL, which refuses
    /// at once) costs each new connection that long before the next host is tried.
    public var connectTimeoutSeconds: Int?
    /// The server's `statement_timeout` for every statement of every connection (a statement running longer fails
    /// with SQLSTATE 57014); `.zero` disables it, nil keeps the server's setting. Whole milliseconds.
    public var statementTimeout: Duration?

    /// Validates `conninfo` with `PQconninfoParse`.
    public init(
        conninfo: String, applicationName: String? = nil, connectTimeoutSeconds: Int? = 3,
        statementTimeout: Duration? = nil
    ) throws {
        self.conninfo = conninfo
        self.applicationName = applicationName
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.statementTimeout = statementTimeout
        _ = try parameters()
    }

    /// `statement_timeout` in milliseconds, as sent (nil: not sent).
    var statementTimeoutMilliseconds: Int64? {
        guard let statementTimeout else { return nil }
        return max(0, Int64(statementTimeout / .milliseconds(1)))
    }

    static let sessionOptions = "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=3 -c bytea_output=hex"

    /// Keepalives when the conninfo sets none: probe after 5 s idle, every 1 s, give up after 3 unanswered probes;
    /// and give up on data the server has not acknowledged for 10 s (`tcp_user_timeout`, which keepalives alone do
    /// not cover while a request is being sent).
    static let defaultKeepalives = [
        ("keepalives", "1"), ("keepalives_idle", "5"), ("keepalives_interval", "1"), ("keepalives_count", "3"),
        ("tcp_user_timeout", "10000"),
    ]

    /// Keyword/value pairs for `PQconnectdbParams` (with `expand_dbname = 0`).
    func parameters() throws -> [(String, String)] {
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            let text = errorMessage.map { String(cString: $0) } ?? "invalid conninfo"
            if let errorMessage { PQfreemem(errorMessage) }
            // The conninfo may hold a password: do not echo it.
            throw PostgresError(kind: .configuration, message: "invalid connection string: \(text)")
        }
        defer { PQconninfoFree(options) }
        var pairs: [(String, String)] = []
        var userOptions = ""
        var setsKeepalives = false
        var setsConnectTimeout = false
        var i = 0
        while let keyword = options[i].keyword {
            defer { i += 1 }
            guard let value = options[i].val else { continue }
            let key = String(cString: keyword)
            let text = String(cString: value)
            if key.hasPrefix("keepalives") || key == "tcp_user_timeout" { setsKeepalives = true }
            switch key {
            case "options": userOptions = text
            case "client_encoding": continue
            case "application_name" where applicationName != nil: continue
            case "connect_timeout":
                setsConnectTimeout = true
                pairs.append((key, text))
            default: pairs.append((key, text))
            }
        }
        var session = Self.sessionOptions
        if let ms = statementTimeoutMilliseconds { session += " -c statement_timeout=\(ms)" }
        pairs.append(("options", userOptions.isEmpty ? session : userOptions + " " + session))
        pairs.append(("client_encoding", "UTF8"))
        if let applicationName { pairs.append(("application_name", applicationName)) }
        if let connectTimeoutSeconds, !setsConnectTimeout {
            pairs.append(("connect_timeout", String(connectTimeoutSeconds)))
        }
        if !setsKeepalives { pairs += Self.defaultKeepalives }
        return pairs
    }

    /// The same server with another database name (tests, admin tasks).
    public func with(database: String) throws -> PostgresConfiguration {
        var copy = self
        let quoted =
            "'"
            + database.replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "'", with: "\\'") + "'"
        if conninfo.hasPrefix("postgres://") || conninfo.hasPrefix("postgresql://") {
            // Rebuild as keyword/value to replace dbname safely.
            let pairs = try parameters().filter { $0.0 != "dbname" && $0.0 != "options" && $0.0 != "client_encoding" }
            copy.conninfo = (pairs.map { "\($0.0)='\(Self.escape($0.1))'" } + ["dbname=\(quoted)"])
                .joined(separator: " ")
        } else {
            copy.conninfo = conninfo + " dbname=\(quoted)"
        }
        return copy
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'")
    }
}

/// Runs an actor's jobs on its own serial `DispatchQueue` (so blocking libpq calls never occupy Swift's
/// cooperative pool). `DispatchSerialQueue` does not exist on Linux; this is the small replacement.
final class PostgresQueueExecutor: SerialExecutor {
    let queue: DispatchQueue
    /// Marks the queue so code can check it runs there (`isCurrent`).
    static let key = DispatchSpecificKey<ObjectIdentifier>()

    init(label: String) {
        queue = DispatchQueue(label: label)
        queue.setSpecific(key: Self.key, value: ObjectIdentifier(self))
    }

    /// True when called from this executor's queue.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: Self.key) == ObjectIdentifier(self) }

    /// Lets `assumeIsolated` hold on the queue outside any task (`PostgresConnection.onQueue`).
    func checkIsolated() {
        precondition(isCurrent, "not on the connection's queue")
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async {
            job.runSynchronously(on: self.asUnownedSerialExecutor())
        }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}
