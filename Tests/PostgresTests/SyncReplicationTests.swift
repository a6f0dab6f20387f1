import Foundation
import OfferTestSupport
import Postgres
import Testing

extension PostgresIntegrationTests {
    /// A commit whose wait for the synchronous standby is cancelled has committed on the server but may not be on
    /// the standby: PostgreSQL answers it with success and a WARNING. The connection reports it as an error.
    @Suite("Synchronous replication: a cancelled wait is no success")
    struct SyncReplicationTests {
        /// This suite's own cluster: it names a synchronous standby that never comes, so every commit there waits.
        static let server = TestServer.restartable("postgres-syncrep")

        /// Runs `work` while a standby is required, cancelling its backend's wait for the standby
        /// (`SynchronousStandby.cancellingWaits`). Returns how the work ended and whether a wait was cancelled (false:
        /// it finished without waiting, the setting was not in effect yet).
        static func cancelWhileWaiting(
            _ observer: PostgresPool, _ work: @escaping @Sendable () async throws -> Void
        ) async throws -> (outcome: Result<Void, PostgresError>, cancelled: Bool) {
            guard let ended = await SynchronousStandby.cancellingWaits(observer: observer, work) else {
                throw TestCommandError("the work still waited after 30 s of cancelling its waits")
            }
            let outcome = ended.mapError {
                ($0 as? PostgresError) ?? PostgresError(kind: .protocolViolation, message: "\($0)")
            }
            if case .failure(let error) = outcome, error.kind == .commitNotReplicated { return (outcome, true) }
            return (outcome, false)
        }

        static func errorKind(_ run: (outcome: Result<Void, PostgresError>, cancelled: Bool)) -> PostgresError.Kind? {
            if case .failure(let error) = run.outcome { return error.kind }
            return nil
        }

        @Test func aCommitWhoseWaitForTheStandbyIsCancelledFailsRetryably() async throws {
            let admin = try await PostgresConnection.connect(configuration: try await Self.server.configuration())
            try await TestDatabase.with(on: Self.server) { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                let observer = PostgresPool(configuration: config, maxConnections: 1)
                try await pool.query("CREATE TABLE t (n int)")
                do {
                    // The reload reaches the checkpointer (which decides whether commits wait) a moment later.
                    try await pool.query("CREATE TABLE warm (n int)")
                    try await SynchronousStandby.require("nosuch_standby", admin: admin)
                    let deadline = ContinuousClock.now + .seconds(10)
                    while ContinuousClock.now < deadline {
                        let warm = try await Self.cancelWhileWaiting(observer) {
                            try await pool.query("INSERT INTO warm VALUES (\(0))")
                        }
                        if warm.cancelled { break }
                    }
                    // An autocommit statement.
                    let autocommit = try await Self.cancelWhileWaiting(observer) {
                        try await pool.query("INSERT INTO t VALUES (\(1))")
                    }
                    #expect(Self.errorKind(autocommit) == .commitNotReplicated)
                    if case .failure(let error) = autocommit.outcome { #expect(error.isRetryable) }
                    // An explicit transaction's COMMIT.
                    let commit = try await Self.cancelWhileWaiting(observer) {
                        _ = try await pool.withTransaction { try await $0.query("INSERT INTO t VALUES (\(2))") }
                    }
                    #expect(Self.errorKind(commit) == .commitNotReplicated)
                    // A pipeline, whose implicit transaction commits at the sync point.
                    let pipelined = try await Self.cancelWhileWaiting(observer) {
                        _ = try await pool.pipeline(["INSERT INTO t VALUES (\(3))", "INSERT INTO t VALUES (\(4))"])
                    }
                    #expect(Self.errorKind(pipelined) == .commitNotReplicated)
                    // Each did commit locally (what makes the success a lie), and the connection is still usable.
                    let rows = try await observer.query("SELECT array_agg(n ORDER BY n) FROM t").scalar([Int64].self)
                    #expect(rows == [1, 2, 3, 4])
                } catch {
                    try await SynchronousStandby.require("", admin: admin)
                    throw error
                }
                try await SynchronousStandby.require("", admin: admin)
                // Without a standby to wait for, commits succeed again on the same connection: nothing sticks.
                #expect(
                    await eventually {
                        (try? await pool.query("INSERT INTO t VALUES (\(5)) RETURNING n").scalar(Int64.self)) == 5
                    })
                await pool.close()
                await observer.close()
            }
            await admin.close()
        }
    }
}
