import Postgres
import Testing

/// Expects `body` to throw a `PostgresError` and returns it.
func expectPostgresError(
    sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void
) async -> PostgresError? {
    do {
        try await body()
        Issue.record("expected a PostgresError, got success", sourceLocation: sourceLocation)
        return nil
    } catch let error as PostgresError {
        return error
    } catch {
        Issue.record("expected a PostgresError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
