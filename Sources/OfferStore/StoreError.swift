import Foundation
import Postgres

/// What a repository call can fail with, in the words the gateway needs to answer a client.
public enum StoreError: Error, Sendable, CustomStringConvertible {
    /// The thing exists already (a unique key was taken), e.g. a tenant slug or a key id.
    case conflict(String)
    /// A named thing does not exist (for this tenant).
    case notFound(String)
    /// The database cannot be reached or is restarting; the call may be retried.
    case unavailable(PostgresError)
    /// Anything else from the database (a bug or a broken invariant); details belong in the server log only.
    case database(PostgresError)
    /// A stored value could not be turned back into a domain value.
    case corrupt(String)

    public var description: String {
        switch self {
        case .conflict(let what): "conflict: \(what)"
        case .notFound(let what): "not found: \(what)"
        case .unavailable(let error): "database unavailable: \(error)"
        case .database(let error): "database error: \(error)"
        case .corrupt(let what): "corrupt stored value: \(what)"
        }
    }
}

extension StoreError {
    /// Classifies any error thrown while talking to PostgreSQL.
    static func wrap(_ error: any Error) -> StoreError {
        if let store = error as? StoreError { return store }
        guard let pg = error as? PostgresError else { return .corrupt("\(error)") }
        if pg.isRetryable { return .unavailable(pg) }
        return .database(pg)
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
