import Foundation
import OfferTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built `offergate` binary, driven as a user would: `offergate serve --stdio` with the embedded database and
/// with a given DATABASE_URL, `offergate migrate`, `--help` and usage errors.
@Suite("offergate command line", .serialized)
struct ServeCommandTests {
    static var binary: String { PackagePaths.binary("offergate") }

    /// Runs the binary with `input` on stdin, without the variables that would steer it (unless given in
    /// `environment`); output goes to files (never pipes a server could inherit).
    static func run(_ arguments: [String], input: String = "", environment: [String: String] = [:]) async throws
        -> ChildProcess.Outcome
    {
        let env = ChildProcess.environment(
            removing: ["DATABASE_URL", "OFFERGATE_ADMIN_KEY", "OFFERGATE_MASTER_KEY"], adding: environment)
        return try await ChildProcess.run(binary, arguments, environment: env, input: input, timeout: .seconds(300))
    }

    static func healthResponse(_ stdout: String) throws -> [String: Any] {
        let lines = stdout.split(separator: "\n")
        #expect(lines.count == 1, "exactly one response line, got: \(stdout)")
        let object = try JSONSerialization.jsonObject(with: Data((lines.first ?? "").utf8)) as? [String: Any]
        return try #require(object)
    }

    static let health = #"{"jsonrpc":"2.0","id":1,"method":"system.health"}"# + "\n"

    @Test func healthOverStdioWithTheEmbeddedDatabase() async throws {
        let base = "/tmp/og-serve-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: base) }
        let first = try await Self.run(["serve", "--stdio", "--data-dir", base], input: Self.health)
        #expect(first.status == 0, "stderr: \(first.stderr)")
        let response = try Self.healthResponse(first.stdout)
        #expect(response["id"] as? Int == 1)
        let result = try #require(response["result"] as? [String: Any])
        #expect(result["database"] as? String == "ok")
        #expect(result["status"] as? String == "ok")
        // Logs went to stderr only, as JSON lines, and the embedded keys were created with mode 0600.
        #expect(first.stderr.split(separator: "\n").allSatisfy { $0.hasPrefix("{\"ts\":") })
        for name in ["admin.key", "master.key"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: "\(base)/\(name)")
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
        }
        // The embedded cluster was stopped on exit, and is reused (not re-initialised) next time.
        #expect(!FileManager.default.fileExists(atPath: "\(base)/pgdata/postmaster.pid"))
        let second = try await Self.run(["serve", "--stdio", "--data-dir", base], input: Self.health)
        #expect(second.status == 0, "stderr: \(second.stderr)")
        #expect(try Self.healthResponse(second.stdout)["result"] as? [String: Any] != nil)
        #expect(!second.stderr.contains("migrations applied"))
    }

    @Test func healthOverStdioWithAGivenDatabaseURLStartsNothing() async throws {
        try await TestDatabase.withConninfo { url in
            let masterKey = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            let env = ["DATABASE_URL": url, "OFFERGATE_MASTER_KEY": masterKey]
            // The migrate command, then serve (which would migrate too, idempotently).
            let migrate = try await Self.run(["migrate"], environment: env)
            #expect(migrate.status == 0, "stderr: \(migrate.stderr)")
            // An extra root for Apple's signed data (here Apple's own, as DER) is accepted.
            let root = PackagePaths.root.appendingPathComponent(
                "Tests/OfferCryptoTests/Fixtures/AppleSignedData/AppleRootCA-G3.cer"
            ).path
            let outcome = try await Self.run(
                ["serve", "--stdio", "--apple-root-cert", root], input: Self.health, environment: env)
            #expect(outcome.status == 0, "stderr: \(outcome.stderr)")
            let result = try #require(try Self.healthResponse(outcome.stdout)["result"] as? [String: Any])
            #expect(result["database"] as? String == "ok")
            #expect(outcome.stderr.contains(#""database":"external""#))
            #expect(!outcome.stderr.contains("admin key (embedded mode)"))
        }
    }

    @Test func withoutAMasterKeyAnExternalDatabaseUsesAKeyFileAndWarns() async throws {
        try await TestDatabase.withConninfo { url in
            let home = "/tmp/og-home-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            defer { try? FileManager.default.removeItem(atPath: home) }
            let outcome = try await Self.run(
                ["serve", "--stdio", "--master-key-file", "\(home)/master.key"], input: Self.health,
                environment: ["DATABASE_URL": url])
            #expect(outcome.status == 0, "stderr: \(outcome.stderr)")
            let attributes = try FileManager.default.attributesOfItem(atPath: "\(home)/master.key")
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            #expect(outcome.stderr.contains("no OFFERGATE_ADMIN_KEY"))
            // The master key never reaches the log.
            let key = try String(contentsOfFile: "\(home)/master.key", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!outcome.stderr.contains(key))
        }
    }

    @Test(arguments: [
        (["serve"], "say where to serve"),
        (["serve", "--listen", "http://x"], "--listen"),
        (["serve", "--stdio", "--pool-size", "0"], "--pool-size"),
        (["serve", "--stdio", "--event-loops", "0"], "--event-loops"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["serve", "--stdio", "--apple-root-cert", "/nonexistent/root.pem"], "--apple-root-cert: cannot read"),
        (
            ["serve", "--stdio", "--apple-root-cert", PackagePaths.root.appendingPathComponent("Package.swift").path],
            "holds no usable certificate"
        ),
    ])
    func usageErrorsExit64(arguments: [String], message: String) async throws {
        let outcome = try await Self.run(arguments)
        #expect(outcome.status == 64)
        #expect(outcome.stderr.contains(message), "\(outcome.stderr)")
        #expect(outcome.stdout.isEmpty)
    }

    @Test func helpIsPrintedForEveryCommand() async throws {
        let root = try await Self.run(["--help"])
        #expect(root.status == 0)
        #expect(root.stdout.contains("USAGE: offergate <command>"))
        #expect(root.stdout.contains("serve") && root.stdout.contains("migrate"))
        let serve = try await Self.run(["serve", "--help"])
        #expect(serve.status == 0)
        for flag in [
            "--stdio", "--listen", "--database-url", "--data-dir", "--max-connections", "--idle-timeout",
            "--max-in-flight", "--frame-limit", "--rate-limit", "--pool-size", "--shutdown-grace",
            "--apple-root-cert",
        ] {
            #expect(serve.stdout.contains(flag), "serve --help lacks \(flag)")
        }
    }
}
