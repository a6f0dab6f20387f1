import Foundation
import Postgres
import Testing

@testable import OfferLoadKit

/// A fresh database per test on the server named by OFFERGATE_TEST_DATABASE_URL (copied from PostgresTests).
enum TestDatabase {
    struct MissingEnvironment: Error, CustomStringConvertible {
        var description: String {
            "OFFERGATE_TEST_DATABASE_URL is not set: run the tests through `ops/test` "
                + "(it starts PostgreSQL and sets it)"
        }
    }

    /// Creates `og_test_<random>`, runs `body` with its conninfo, drops it (also when `body` throws).
    static func with<T>(_ body: (String) async throws -> T) async throws -> T {
        guard let url = ProcessInfo.processInfo.environment["OFFERGATE_TEST_DATABASE_URL"], !url.isEmpty else {
            throw MissingEnvironment()
        }
        let server = try PostgresConfiguration(conninfo: url, applicationName: "offer-load-tests")
        let name = "og_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try await PostgresConnection.connect(configuration: server)
        try await admin.simpleQuery(unsafeSQL: "CREATE DATABASE \(name)")
        let conninfo = url + " dbname=\(name)"
        do {
            let value = try await body(conninfo)
            try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            await admin.close()
            return value
        } catch {
            _ = try? await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            await admin.close()
            throw error
        }
    }

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
    let process: Process
    let socket: String
    var address: String { "unix:\(socket)" }

    static var binary: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug/offergate").path
    }

    private init(process: Process, socket: String) {
        self.process = process
        self.socket = socket
    }

    /// Starts a gateway on a fresh database, runs `body`, stops the gateway.
    static func with<T>(_ body: (SpawnedGateway, String) async throws -> T) async throws -> T {
        try await TestDatabase.with { conninfo in
            let gateway = try await start(conninfo: conninfo)
            do {
                let value = try await body(gateway, conninfo)
                await gateway.stop()
                return value
            } catch {
                await gateway.stop()
                throw error
            }
        }
    }

    static func start(conninfo: String) async throws -> SpawnedGateway {
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw NotBuilt(path: binary) }
        let socket = "/tmp/olt-\(UUID().uuidString.prefix(8).lowercased()).sock"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = [
            "serve", "--listen", "unix:\(socket)", "--database-url", conninfo, "--log-level", "error",
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["OFFERGATE_ADMIN_KEY"] = adminKey
        environment["OFFERGATE_MASTER_KEY"] = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
            .base64EncodedString()
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let gateway = SpawnedGateway(process: process, socket: socket)
        for _ in 0..<300 {
            if FileManager.default.fileExists(atPath: socket) { return gateway }
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
    }
}
