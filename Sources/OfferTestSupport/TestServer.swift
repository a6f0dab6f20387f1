// Test-only support shared by every test target (never linked into a shipped executable).
import Foundation
import Postgres

#if canImport(Glibc)
    import Glibc
#endif

/// A variable the tests need is missing: they must be run through `ops/test`, which sets it.
public struct MissingEnvironment: Error, CustomStringConvertible {
    /// The environment variable (or the thing) that is missing.
    public var variable: String

    /// Creates the error for `variable`.
    public init(variable: String) { self.variable = variable }

    public var description: String {
        "\(variable) is not set: run the tests through `ops/test` (it starts PostgreSQL and sets it)"
    }
}

/// A helper command (`ops/pg …`) failed.
public struct TestCommandError: Error, CustomStringConvertible {
    /// What failed, with its exit status and the end of its log.
    public var description: String

    /// Creates the error.
    public init(_ description: String) { self.description = description }
}

/// The PostgreSQL server a test uses.
///
/// `.main` is the shared server `ops/test` starts (OFFERGATE_TEST_DATABASE_URL); tests must never stop it.
/// `.restartable(name)` is a cluster of the test's own under `$OFFERGATE_TEST_PG_BASE/<name>`, started on first use
/// (once per process per name). A suite that stops or restarts PostgreSQL uses a name no other suite uses, so its
/// restarts never disturb tests running beside it in the same process. `ops/test` stops every cluster at exit.
public enum TestServer: Sendable, Hashable {
    case main
    case restartable(String)

    /// The server's admin configuration (`dbname=postgres`); starts a restartable cluster if needed.
    public func configuration(applicationName: String = "offergate-tests") async throws -> PostgresConfiguration {
        try PostgresConfiguration(conninfo: try await conninfo(), applicationName: applicationName)
    }

    /// The server's admin conninfo; starts a restartable cluster if needed.
    public func conninfo() async throws -> String {
        switch self {
        case .main:
            let variable = "OFFERGATE_TEST_DATABASE_URL"
            guard let url = ProcessInfo.processInfo.environment[variable], !url.isEmpty else {
                throw MissingEnvironment(variable: variable)
            }
            return url
        case .restartable(let name):
            return try await Clusters.shared.conninfo(name: name)
        }
    }

    /// Runs `ops/pg <command> <dir>` (`stop`, `start`, `restart`) on this restartable cluster, without blocking the
    /// cooperative pool; throws when the script fails. The main server may not be stopped.
    public func pg(_ command: String) async throws {
        guard case .restartable(let name) = self else {
            throw TestCommandError("ops/pg \(command): the shared main server must not be stopped or restarted")
        }
        let dir = try await Clusters.shared.directory(name: name)
        try await OpsPG.run(command, directory: dir)
    }
}

/// The restartable clusters this process started, each once (concurrent first uses wait for the same start).
actor Clusters {
    static let shared = Clusters()

    private var starts: [String: Task<String, any Error>] = [:]

    func directory(name: String) throws -> String {
        guard let base = ProcessInfo.processInfo.environment["OFFERGATE_TEST_PG_BASE"], !base.isEmpty else {
            throw MissingEnvironment(variable: "OFFERGATE_TEST_PG_BASE")
        }
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
            throw TestCommandError("bad cluster name '\(name)' (letters, digits, - and _ only)")
        }
        return base + "/" + name
    }

    func conninfo(name: String) async throws -> String {
        if let start = starts[name] { return try await start.value }
        let dir = try directory(name: name)
        let start = Task<String, any Error> {
            try await OpsPG.run("start", directory: dir)
            let url = try String(contentsOfFile: dir + "/conninfo", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            guard !url.isEmpty else { throw TestCommandError("ops/pg start \(dir) printed no conninfo") }
            return url
        }
        starts[name] = start
        do {
            return try await start.value
        } catch {
            starts[name] = nil  // let a later test try again (and report its own failure)
            throw error
        }
    }
}

/// `ops/pg` through system(3) on a dedicated thread.
///
/// Not Foundation.Process: on Linux it notices a child's exit through an inherited descriptor, which the daemonised
/// server keeps open, so it would wait forever. system(3) waits for the script only. Every inherited descriptor
/// above stderr is closed first, so the server never holds the pipes of processes other tests spawn meanwhile, and
/// its stdin/stdout/stderr are files, never the test runner's.
enum OpsPG {
    static func run(_ command: String, directory: String) async throws {
        _ = try await run(script: "ops/pg", command, directory: directory, output: command == "start")
    }

    /// Runs `ops/<script> <command> <directory>` with `environment` added (`NAME=value` pairs); with `output`, its
    /// stdout is returned (else discarded). Throws with the end of its stderr when it fails.
    static func run(
        script: String, _ command: String, directory: String, environment: [String: String] = [:],
        output: Bool = false
    ) async throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = PackagePaths.root.appendingPathComponent(script).path
        let name = (script as NSString).lastPathComponent
        let log = directory + "/ops-\(name).log"
        // `start` prints the conninfo: keep it beside the cluster.
        let out = output ? directory + "/conninfo" : "/dev/null"
        let closeAll = #"for fd in $(ls /proc/$$/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done 2>/dev/null; "#
        let assignments = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\(quoted($0.value)) " }.joined()
        let inner =
            closeAll + "exec env \(assignments)/bin/bash \(quoted(path)) \(quoted(command)) \(quoted(directory))"
        let line = "/bin/bash -c \(quoted(inner)) </dev/null >\(quoted(out)) 2>\(quoted(log))"
        let status = await onOwnThread { Glibc.system(line) }
        guard status == 0 else {
            let tail = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(2000)
            throw TestCommandError("\(script) \(command) \(directory) failed with status \(status): \(tail)")
        }
        guard output else { return "" }
        return ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").trimmingCharacters(
            in: .whitespacesAndNewlines)
    }

    static func quoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
