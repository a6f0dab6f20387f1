// Runs the built executables as an operator would: offergate on a Unix socket over a fresh database, offerctl as a
// subprocess whose stdout/stderr go to files (not pipes: a grandchild holding a pipe open would hang the reader).
import Foundation
import JSONRPC
import OfferTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The built executables this target runs (OfferTestSupport finds them).
enum Paths {
    static var offerctl: String { PackagePaths.binary("offerctl") }
    static var offergate: String { PackagePaths.binary("offergate") }

    static func check() throws {
        _ = try PackagePaths.requireBinary("offerctl")
        _ = try PackagePaths.requireBinary("offergate")
    }

    /// A fresh scratch directory.
    static func scratch() throws -> URL { try PackagePaths.scratch("offerctl-test") }
}

/// What a finished process left behind.
typealias Outcome = ChildProcess.Outcome

extension ChildProcess.Outcome {
    /// stdout parsed as JSON (fails the test when it is not).
    func json(sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
        do {
            return try JSONParsing.parse(stdout)
        } catch {
            Issue.record("stdout is not JSON: \(stdout)", sourceLocation: sourceLocation)
            throw error
        }
    }
}

struct SpawnError: Error, CustomStringConvertible {
    let description: String
}

enum Spawn {
    /// The test runner's environment without anything that would steer offerctl or offergate.
    static func baseEnvironment() -> [String: String] {
        ChildProcess.environment(removing: ["DATABASE_URL"], removingPrefixes: ["OFFERGATE_"])
    }

    /// offerctl with exactly this environment (plus the base one).
    static func offerctl(_ arguments: [String], environment: [String: String] = [:]) async throws -> Outcome {
        try Paths.check()
        return try await ChildProcess.run(
            Paths.offerctl, arguments, environment: baseEnvironment().merging(environment) { $1 })
    }
}

/// Random secrets for one test.
enum Secrets {
    static func bytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }
    static func masterKey() -> String { Data(bytes(32)).base64EncodedString() }
    static func adminKey() -> String { "adm_" + bytes(24).map { String(format: "%02x", $0) }.joined() }
}

/// One `offergate serve --listen unix:…` over a fresh database, stopped (SIGTERM, then SIGKILL) at the end.
struct TestGateway: Sendable {
    let process: ChildProcess
    let socketPath: String
    let databaseURL: String
    let adminKey: String
    let masterKey: String
    let scratch: URL

    var connect: String { "unix:" + socketPath }

    /// Runs `body` with a started gateway over its own database; everything is torn down afterwards.
    static func with(_ body: (TestGateway) async throws -> Void) async throws {
        try Paths.check()
        try await TestDatabase.with(applicationName: "offerctl-tests") { configuration in
            let gateway = try await start(databaseURL: configuration.conninfo)
            do {
                try await body(gateway)
            } catch {
                await gateway.stop()
                throw error
            }
            await gateway.stop()
        }
    }

    static func start(databaseURL: String) async throws -> TestGateway {
        let scratch = try Paths.scratch()
        // Unix socket paths are short (108 bytes): keep it in /tmp.
        let socketPath = "/tmp/ogctl-\(UUID().uuidString.prefix(8).lowercased()).sock"
        let adminKey = Secrets.adminKey()
        let masterKey = Secrets.masterKey()
        var environment = Spawn.baseEnvironment()
        environment["OFFERGATE_ADMIN_KEY"] = adminKey
        environment["OFFERGATE_MASTER_KEY"] = masterKey
        let process = try ChildProcess.spawn(
            Paths.offergate,
            [
                "serve", "--listen", "unix:" + socketPath, "--database-url", databaseURL, "--log-level", "warning",
                "--shutdown-grace", "2", "--pool-size", "4",
            ],
            environment: environment, stdout: scratch.appendingPathComponent("gateway.out").path,
            stderr: scratch.appendingPathComponent("gateway.err").path)
        let gateway = TestGateway(
            process: process, socketPath: socketPath, databaseURL: databaseURL, adminKey: adminKey,
            masterKey: masterKey, scratch: scratch)
        // Ready once it answers system.health on its socket; an early exit ends the wait at once.
        let answered = await eventually(timeout: .seconds(30)) {
            if process.exitStatus() != nil { return true }
            guard FileManager.default.fileExists(atPath: socketPath),
                let client = try? await RPCClient.connect(to: "unix:" + socketPath)
            else { return false }
            defer { client.close() }
            return (try? await client.call(method: "system.health", timeout: .seconds(5))) != nil
        }
        if let status = process.exitStatus() {
            let log = (try? String(contentsOf: scratch.appendingPathComponent("gateway.err"), encoding: .utf8)) ?? ""
            throw SpawnError(description: "offergate exited early (status \(status)): \(log)")
        }
        if answered { return gateway }
        await gateway.stop()
        throw SpawnError(description: "offergate did not answer on \(socketPath) within 30 s")
    }

    func stop() async {
        process.terminate()
        _ = await process.wait(timeout: .seconds(10))
        try? FileManager.default.removeItem(atPath: socketPath)
        try? FileManager.default.removeItem(at: scratch)
    }

    /// offerctl against this gateway: `--connect` and the admin key in the environment (override with `environment`).
    func ctl(_ arguments: [String], environment: [String: String] = [:]) async throws -> Outcome {
        var env = ["OFFERGATE_ADMIN_KEY": adminKey]
        env.merge(environment) { $1 }
        return try await Spawn.offerctl(arguments + ["--connect", connect], environment: env)
    }

    /// A direct JSON-RPC client (to check what offerctl did, e.g. that a rotated key works).
    func authenticate(apiKey: String) async throws -> JSONValue {
        let client = try await RPCClient.connect(to: connect)
        defer { client.close() }
        return try await client.call(
            method: "session.authenticate", params: ["apiKey": .string(apiKey)], timeout: .seconds(30))
    }

    /// Writes a scratch file for offerctl to read.
    func file(_ name: String, _ contents: String) throws -> String {
        let url = scratch.appendingPathComponent(name)
        try contents.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }
}
