import Foundation
import Postgres
import Testing

/// A fresh database per test on the server named by OFFERGATE_TEST_DATABASE_URL (copied from PostgresTests).
struct PostgresTestDatabase {
    struct MissingEnvironment: Error, CustomStringConvertible {
        var variable: String
        var description: String {
            "\(variable) is not set: run the tests through `ops/test` (it starts PostgreSQL and sets it)"
        }
    }

    static func serverConfiguration() throws -> PostgresConfiguration {
        let variable = "OFFERGATE_TEST_DATABASE_URL"
        guard let url = ProcessInfo.processInfo.environment[variable], !url.isEmpty else {
            throw MissingEnvironment(variable: variable)
        }
        return try PostgresConfiguration(conninfo: url, applicationName: "offerctl-tests")
    }

    /// Creates `og_test_<random>`, runs `body` with its configuration, drops it (also when `body` throws).
    static func with<T>(_ body: (PostgresConfiguration) async throws -> T) async throws -> T {
        let server = try serverConfiguration()
        let name = "og_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try await PostgresConnection.connect(configuration: server)
        try await admin.simpleQuery(unsafeSQL: "CREATE DATABASE \(name)")
        let configuration = try server.with(database: name)
        do {
            let value = try await body(configuration)
            try await drop(name, admin: admin)
            return value
        } catch {
            try? await drop(name, admin: admin)
            throw error
        }
    }

    private static func drop(_ name: String, admin: PostgresConnection) async throws {
        if await !admin.isConnected { try await admin.connect() }
        try await admin.simpleQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        await admin.close()
    }
}
