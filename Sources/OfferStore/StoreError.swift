import Foundation
import Postgres

/// What a repository call can fail with, in the words the gateway needs to answer a client.
public enum StoreError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The thing exists already (a unique key was taken), e.g. a tenant slug or a key id.
    case conflict(String)
    /// A named thing does not exist (for this tenant).
    case notFound(String)
    /// The database cannot be reached or is restarting; the call may be retried.
    case unavailable(DatabaseFailure)
    /// Anything else from the database (a bug, a broken invariant, a statement timeout, a cancelled statement);
    /// details belong in the server log only.
    case database(DatabaseFailure)
    /// A stored value could not be turned back into a domain value.
    case corrupt(String)

    public var description: String {
        switch self {
        case .conflict(let what): "conflict: \(what)"
        case .notFound(let what): "not found: \(what)"
        case .unavailable(let failure): "database unavailable: \(failure)"
        case .database(let failure): "database error: \(failure)"
        case .corrupt(let what): "corrupt stored value: \(what)"
        }
    }

    public var debugDescription: String {
        switch self {
        case .unavailable(let failure): "database unavailable: \(failure.debugDescription)"
        case .database(let failure): "database error: \(failure.debugDescription)"
        default: description
        }
    }

    /// A failure the database reported, as the store's callers see it: the SQLSTATE and what kind of failure it is,
    /// without PostgreSQL's types. `description` is redacted (no SQL, no bound values, no quoted fragments of the
    /// server's message); `debugDescription` adds the SQL text and the server's detail, for the server log.
    public struct DatabaseFailure: Error, Sendable, Equatable, CustomStringConvertible,
        CustomDebugStringConvertible
    {
        let underlying: PostgresError

        init(_ underlying: PostgresError) {
            self.underlying = underlying
        }

        /// The five-character SQLSTATE, when the server sent one (`57014` for a timeout or a cancelled statement).
        public var sqlState: String? { underlying.sqlState }
        /// The statement ran longer than the statement timeout (`--statement-timeout`) and the server stopped it.
        public var isStatementTimeout: Bool { underlying.isStatementTimeout }
        /// The task awaiting the statement was cancelled (e.g. the client went away), and the statement with it.
        public var isCancelled: Bool { underlying.kind == .cancelled }
        /// Running the same call again may succeed (connection lost, server restarting, pool exhausted).
        public var isRetryable: Bool { underlying.isRetryable }

        public var description: String { underlying.description }
        public var debugDescription: String { underlying.debugDescription }
    }
}

extension StoreError {
    /// Classifies any error thrown while talking to PostgreSQL.
    static func wrap(_ error: any Error) -> StoreError {
        if let store = error as? StoreError { return store }
        if error is CancellationError { return .database(DatabaseFailure(PostgresError.cancelledByTask())) }
        guard let pg = error as? PostgresError else { return .corrupt("\(error)") }
        if pg.isRetryable { return .unavailable(DatabaseFailure(pg)) }
        return .database(DatabaseFailure(pg))
    }
}

/// Runs `body`, turning whatever it throws into a `StoreError`.
@discardableResult
func storeCall<T>(_ body: () async throws -> T) async throws(StoreError) -> T {
    do {
        return try await body()
    } catch {
        throw StoreError.wrap(error)
    }
}
