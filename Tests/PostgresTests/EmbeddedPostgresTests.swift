import Foundation
import OfferTestSupport
import Postgres
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The embedded cluster `offergate serve` starts when no database URL is given: initialised once, reused, stopped.
@Suite("Embedded PostgreSQL", .serialized)
struct EmbeddedPostgresTests {
    /// A short base directory under /tmp (Unix socket paths are limited to 107 bytes).
    static func makeBase() throws -> URL {
        let base = URL(fileURLWithPath: "/tmp/og-embedded-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        return base
    }

    @Test func initialisesStartsServesStopsAndReuses() async throws {
        let base = try Self.makeBase()
        defer { try? FileManager.default.removeItem(at: base) }
        let cluster = try EmbeddedPostgres(baseDirectory: base)
        defer { try? cluster.stop() }

        // start() and stop() wait for initdb and pg_ctl: off the cooperative pool.
        #expect(try await onOwnThread { try cluster.start() } == true)  // initdb + start
        #expect(cluster.isRunning())
        #expect(FileManager.default.fileExists(atPath: cluster.dataDirectory.appendingPathComponent("PG_VERSION").path))
        let config = try PostgresConfiguration(conninfo: cluster.connectionString)
        let connection = try await PostgresConnection.connect(configuration: config)
        try await connection.query("CREATE TABLE kept (n int)")
        try await connection.query("INSERT INTO kept VALUES (\(42))")
        #expect(try await connection.query("SELECT current_database()").scalar(String.self) == "offergate")
        // No TCP port: the server listens on its Unix socket only.
        #expect(try await connection.query("SHOW listen_addresses").scalar(String.self) == "")
        await connection.close()

        // Already running: start() reuses it and says it did not start it.
        #expect(try await onOwnThread { try cluster.start() } == false)

        try await onOwnThread { try cluster.stop() }
        #expect(!cluster.isRunning())

        // Started again on the same directory: the data is still there.
        #expect(try await onOwnThread { try cluster.start() } == true)
        let again = try await PostgresConnection.connect(configuration: config)
        #expect(try await again.query("SELECT n FROM kept").scalar(Int32.self) == 42)
        await again.close()
        try await onOwnThread { try cluster.stop() }
    }

    @Test func aSocketPathThatCannotFitIsRejectedUpFront() throws {
        let long = URL(fileURLWithPath: "/tmp/" + String(repeating: "d", count: 100))
        #expect(throws: EmbeddedPostgresError.socketPathTooLong(long.appendingPathComponent("run").path)) {
            _ = try EmbeddedPostgres(baseDirectory: long)
        }
    }

    @Test func theDefaultBaseDirectoryFollowsTheUser() {
        let base = EmbeddedPostgres.defaultBaseDirectory(environment: ["HOME": "/home/ann", "XDG_DATA_HOME": "/x"])
        if geteuid() == 0 {
            #expect(base.path == "/var/lib/offergate")
        } else {
            #expect(base.path == "/x/offergate")
        }
    }
}
