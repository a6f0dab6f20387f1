import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferLoadKit

/// SQL on a test database (OfferTestSupport's `TestDatabase` creates and drops it).
enum TestSQL {
    /// Runs SQL statements on the test database (to fill it by hand).
    static func execute(_ conninfo: String, _ sql: String) async throws {
        let connection = try await PostgresConnection.connect(
            configuration: try PostgresConfiguration(conninfo: conninfo))
        defer { Task { await connection.close() } }
        try await connection.simpleQuery(unsafeSQL: sql)
    }

    /// The first column of the first row of `sql`, as text.
    static func scalar(_ conninfo: String, _ sql: String) async throws -> String? {
        let connection = try await PostgresConnection.connect(
            configuration: try PostgresConfiguration(conninfo: conninfo))
        let rows = try await connection.simpleQuery(unsafeSQL: sql)
        await connection.close()
        return try rows.first.map { try $0.decode(String.self, at: 0) }
    }
}

/// The built `offergate` binary (`.build/debug/offergate`, from `swift build --build-tests`) serving a temporary
/// Unix socket over a test database. OfferLoadKitTests may not import OfferGateway, so the gateway is a child
/// process, exactly as an operator runs it.
final class SpawnedGateway: Sendable {
    struct NotBuilt: Error, CustomStringConvertible {
        let path: String
        var description: String { "\(path) is missing: run `swift build --build-tests` first" }
    }
    struct DidNotStart: Error, CustomStringConvertible {
        let description: String
    }

    static let adminKey = "og_admin_offerload_tests_" + UUID().uuidString.lowercased()
    let process: ChildProcess
    let socket: String
    /// The gateway's stderr (a file: a pipe or the runner's own stderr could be held open by grandchildren).
    let stderrPath: String
    var address: String { "unix:\(socket)" }
    /// The gateway's HTTP listener, on a Unix socket beside the JSON-RPC one (for `HTTPLoadConnector`).
    var httpAddress: String { "unix:\(socket).http" }

    static var binary: String { PackagePaths.binary("offergate") }

    private init(process: ChildProcess, socket: String, stderrPath: String) {
        self.process = process
        self.socket = socket
        self.stderrPath = stderrPath
    }

    /// Starts a gateway on a fresh database of `server`, runs `body`, stops the gateway. When `body` throws, the
    /// gateway's log is printed first (the failure's cause on the gateway's side, e.g. why it answered -32050).
    static func with<T>(
        on server: TestServer = .main, _ body: (SpawnedGateway, String) async throws -> T
    ) async throws -> T {
        try await TestDatabase.withConninfo(on: server, applicationName: "offer-load-tests") { conninfo in
            let gateway = try await start(conninfo: conninfo)
            do {
                let value = try await body(gateway, conninfo)
                await gateway.stop()
                return value
            } catch {
                gateway.printLog()
                await gateway.stop()
                throw error
            }
        }
    }

    /// The gateway's stderr so far, to the test's stderr.
    func printLog() {
        guard let log = try? String(contentsOfFile: stderrPath, encoding: .utf8), !log.isEmpty else { return }
        FileHandle.standardError.write(Data("--- offergate's log (\(socket)):\n\(log)--- end of log\n".utf8))
    }

    static func start(conninfo: String) async throws -> SpawnedGateway {
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw NotBuilt(path: binary) }
        let socket = "/tmp/olt-\(UUID().uuidString.prefix(8).lowercased()).sock"
        var environment = ProcessInfo.processInfo.environment
        environment["OFFERGATE_ADMIN_KEY"] = adminKey
        environment["OFFERGATE_MASTER_KEY"] = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
            .base64EncodedString()
        let stderrPath = socket + ".err"
        let process = try ChildProcess.spawn(
            binary,
            [
                "serve", "--listen", "unix:\(socket)", "--http", "unix:\(socket).http", "--database-url", conninfo,
                "--log-level", "error",
            ],
            environment: environment, stderr: stderrPath)
        let gateway = SpawnedGateway(process: process, socket: socket, stderrPath: stderrPath)
        for _ in 0..<300 {
            // The HTTP listener binds after the JSON-RPC one.
            if FileManager.default.fileExists(atPath: socket + ".http") { return gateway }
            guard process.isRunning else { throw DidNotStart(description: "offergate exited at start") }
            try await Task.sleep(for: .milliseconds(50))
        }
        await gateway.stop()
        throw DidNotStart(description: "offergate did not create \(socket) within 15 s")
    }

    func stop() async {
        if process.isRunning { process.terminate() }
        for _ in 0..<200 where process.isRunning { try? await Task.sleep(for: .milliseconds(50)) }
        try? FileManager.default.removeItem(atPath: socket)
        try? FileManager.default.removeItem(atPath: socket + ".http")
        try? FileManager.default.removeItem(atPath: stderrPath)
    }
}
