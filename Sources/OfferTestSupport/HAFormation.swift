import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A highly available PostgreSQL of a test's own: a pg_auto_failover formation (a monitor, a primary and a
/// synchronous standby) started through `ops/ha` under `$OFFERGATE_TEST_PG_BASE/<name>`, on three free localhost
/// ports, as the `postgres` user. `ops/test` stops every formation it finds there at exit; `destroy()` stops this
/// one and deletes it.
public struct HAFormation: Sendable {
    /// The formation's directory.
    public let directory: String
    /// The monitor's port; the nodes listen on the next two.
    public let port: Int
    /// The multi-host URL of the `offergate` database
    /// (`postgresql://postgres@localhost:P1,localhost:P2/offergate?target_session_attrs=read-write…`).
    public let url: String

    /// Creates and starts a new formation (any earlier one under `name` is destroyed first); returns once it has a
    /// primary and a synchronous standby.
    public static func start(name: String) async throws -> HAFormation {
        let directory = try await Clusters.shared.directory(name: name)
        let port = try freePortBase()
        let environment = ["HA_PORT": String(port)]
        _ = try await OpsPG.run(script: "ops/ha", "destroy", directory: directory, environment: environment)
        let url = try await OpsPG.run(
            script: "ops/ha", "start", directory: directory, environment: environment, output: true)
        guard url.hasPrefix("postgresql://") else { throw TestCommandError("ops/ha start printed no URL: \(url)") }
        return HAFormation(directory: directory, port: port, url: url)
    }

    /// SIGKILLs the current primary's postmaster (an unplanned failure); returns at once.
    public func killPrimary() async throws {
        try await ha("kill")
    }

    /// A planned switchover (`pg_autoctl perform failover`); returns once the formation is healthy again.
    public func performFailover() async throws {
        try await ha("failover")
    }

    /// Waits until the formation has a primary and a synchronous standby again.
    public func waitHealthy() async throws {
        try await ha("wait")
    }

    /// The formation's history: the monitor's events (`ops/ha events`: transitions with the LSNs the nodes
    /// reported) and what the keepers logged (state transitions, restarts, replication settings, promotion), at
    /// most `lines` of each log. For a failing test's message, since `destroy()` deletes the logs.
    public func history(lines: Int = 60) async -> String {
        let events =
            (try? await OpsPG.run(
                script: "ops/ha", "events", directory: directory, environment: ["HA_PORT": String(port)],
                output: true)) ?? "(no events: the monitor did not answer)"
        let pattern =
            /FSM transition|restarted|synchronous|[Pp]romot|Monitor assigned|read_only|[Rr]ewind|diverged|not running/
        let logs = ["node1", "node2"].map { name in
            let text = (try? String(contentsOfFile: "\(directory)/\(name).log", encoding: .utf8)) ?? ""
            let kept = text.split(separator: "\n").filter { $0.contains(pattern) }.suffix(lines)
            return "--- \(name).log\n" + kept.joined(separator: "\n")
        }
        return (["--- monitor events\n" + events] + logs).joined(separator: "\n")
    }

    /// Stops the formation and deletes its directory.
    public func destroy() async throws {
        try await ha("destroy")
    }

    private func ha(_ command: String) async throws {
        _ = try await OpsPG.run(
            script: "ops/ha", command, directory: directory, environment: ["HA_PORT": String(port)])
    }

    /// A base port whose three ports are free on localhost now, drawn at random from 20000-29997 (so formations of
    /// tests run at once in other worktrees do not collide; a port taken between this look and the start fails the
    /// start, loudly).
    static func freePortBase() throws -> Int {
        for _ in 0..<50 {
            let base = Int.random(in: 20_000...29_997)
            if (0..<3).allSatisfy({ isFree(base + $0) }) { return base }
        }
        throw TestCommandError("no three free consecutive localhost ports found in 20000-29999")
    }

    static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
