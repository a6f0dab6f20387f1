import Testing

/// All tests that talk to PostgreSQL. Serialized: some restart the server, which would break tests running
/// next to them.
@Suite("PostgreSQL integration", .serialized)
struct PostgresIntegrationTests {}
