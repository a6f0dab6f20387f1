// Postgres: OfferGate's PostgreSQL layer over libpq.
//
// Map of the module:
// - `PostgresConfiguration`: conninfo + session settings (UTC, ISO dates, extra_float_digits=3, UTF8, hex bytea),
//   and `statementTimeout` (`statement_timeout` in the startup options).
// - `PostgresConnection`: an actor pinned to its own DispatchQueue (custom SerialExecutor); every blocking libpq
//   call runs there. Prepared-statement cache (`prepared: true`), pipeline mode (`pipeline(_:)`). Cancelling the
//   awaiting task sends `PQcancel` (`StatementCanceller`) and closes the connection after.
// - `PostgresPool`: lazily opened connections; bookkeeping in the pure `PoolStateMachine` behind a Mutex;
//   `withConnection`, `query`, `pipeline`, `withTransaction` (retries 40001/40P01), `stats`, `close`;
//   `PostgresPool.retrying` is that retry loop for work that runs its own transaction.
// - `PostgresQuery`: `"… \(value) …"` binds `$n`; `unsafeRaw` is the only raw-SQL escape hatch.
// - `PostgresEncodable`/`PostgresDecodable`: String, Bool, Int16/32/64/Int, Double (float only), `PostgresNumeric`
//   (exact), UUID, Date (timestamptz), Data/[UInt8] (bytea), `PostgresJSON`, arrays ([String], [Int64], … and
//   their optional-element forms), Optional.
// - `PostgresRows`/`PostgresRow`: results copied out of libpq (Sendable).
// - `PostgresListener`: LISTEN on a dedicated thread, auto-reconnect + re-LISTEN (to the new primary with a multi-host
//   conninfo), `.disconnected` and `.reconnected` markers; `run(…)` hands events straight to the caller (OfferStore's `ChangeFeed` buffers them without ever dropping silently).
// - `Migration`/`Migrator`: versioned SQL migrations under a session advisory lock.
// - `PostgresError`: the module's one error type (kind, SQLSTATE, constraint, redacted description).
//
// Usage notes:
// - A leased connection (or a transaction's `tx`) belongs to one task; don't share it. Inside `withTransaction`,
//   issue queries through `tx`, not through the pool (with a small pool that would wait for itself).
// - Pipelines without `BEGIN` are one implicit transaction: a failure rolls back the earlier statements of the
//   same pipeline and skips the later ones.
