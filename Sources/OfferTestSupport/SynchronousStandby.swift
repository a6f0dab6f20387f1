import Foundation
import Postgres
import Synchronization

/// A synchronous standby that never comes, on a cluster of the test's own: while it is required, every commit that
/// wrote WAL waits for it (wait event `SyncRep`) until the requirement is lifted or the wait is cancelled.
public enum SynchronousStandby {
    /// Sets `synchronous_standby_names` to `names` (`""` lifts the requirement) and reloads the configuration. The
    /// checkpointer, which decides whether commits wait, acts on it a moment later.
    public static func require(_ names: String, admin: PostgresConnection) async throws {
        try await admin.simpleQuery(unsafeSQL: "ALTER SYSTEM SET synchronous_standby_names = '\(names)'")
        try await admin.simpleQuery(unsafeSQL: "SELECT pg_reload_conf()")
    }

    /// Runs `work` while `observer` cancels (`pg_cancel_backend`, as an operator or a tool would) every backend of
    /// its database that waits for the standby; returns how `work` ended, or nil if it still ran after `timeout`.
    public static func cancellingWaits(
        observer: PostgresPool, timeout: Duration = .seconds(30), _ work: @escaping @Sendable () async throws -> Void
    ) async -> Result<Void, any Error>? {
        let done = Atomic<Bool>(false)
        let task = Task { () -> Result<Void, any Error> in
            defer { done.store(true, ordering: .releasing) }
            do {
                try await work()
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        let deadline = ContinuousClock.now + timeout
        while !done.load(ordering: .acquiring) {
            guard ContinuousClock.now < deadline else { return nil }
            _ = try? await observer.query(
                """
                SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event = 'SyncRep'
                """)
            try? await Task.sleep(for: .milliseconds(20))
        }
        return await task.value
    }
}
