import Foundation
import OfferDomain
import Postgres

/// What decisions read about customers: their recorded transactions and Apple's verified transactions and renewal
/// infos, for many customers of one tenant in one round trip (three statements, pipelined). A customer's first
/// question is answered from here, so this is the gateway's cold path: one round trip serves every customer asked
/// about at once, not one customer per round trip.
public struct CustomerRecordsRepository: Sendable {
    let pool: PostgresPool

    /// The most customers one round trip reads (the arrays bound to one statement); more are read in several.
    static let customersPerRoundTrip = 1_000

    /// Every record of each of `customerIds` (duplicates ignored), oldest first within each kind. Every customer
    /// asked about has an entry, empty when nothing is stored.
    public func records(tenant: UUID, customerIds: [String]) async throws(StoreError) -> [String: CustomerRecords] {
        let distinct = Array(Set(customerIds))
        var found = Self.nothingYet(distinct)
        for start in stride(from: 0, to: distinct.count, by: Self.customersPerRoundTrip) {
            let customers = Array(distinct[start..<min(start + Self.customersPerRoundTrip, distinct.count)])
            try await read(tenant: tenant, customers: customers, into: &found)
        }
        return found
    }

    /// `records(tenant:customerIds:)` without a task: `reply` gets them on the database connection's queue, right
    /// after the round trip, so the caller's batch costs no hop to the cooperative pool and back. More customers
    /// than one round trip reads go through the asynchronous path.
    public func records(
        tenant: UUID, customerIds: [String],
        reply: @escaping @Sendable (Result<[String: CustomerRecords], StoreError>) -> Void
    ) {
        let distinct = Array(Set(customerIds))
        guard distinct.count <= Self.customersPerRoundTrip else {
            Task {
                do { reply(.success(try await records(tenant: tenant, customerIds: distinct))) } catch {
                    reply(.failure(StoreError.wrap(error)))
                }
            }
            return
        }
        pool.pipeline(Self.queries(tenant: tenant, customers: distinct), prepared: true) { results in
            var found = Self.nothingYet(distinct)
            do {
                try Self.collect(try results.get(), into: &found)
                reply(.success(found))
            } catch {
                reply(.failure(StoreError.wrap(error)))
            }
        }
    }

    private func read(tenant: UUID, customers: [String], into found: inout [String: CustomerRecords])
        async throws(StoreError)
    {
        try await storeCall {
            let results = try await pool.pipeline(Self.queries(tenant: tenant, customers: customers), prepared: true)
            try Self.collect(results, into: &found)
        }
    }

    /// An empty entry for each of `customers` (distinct), which the reads then fill.
    private static func nothingYet(_ customers: [String]) -> [String: CustomerRecords] {
        [String: CustomerRecords](uniqueKeysWithValues: customers.map { ($0, CustomerRecords(recorded: [])) })
    }

    /// Each customer's records from the three reads' results (`queries`). Each read returns a customer's rows one
    /// after another (the lateral join reads one customer at a time), so a run of rows is collected into one array
    /// and stored under its customer once: not a customer id decoded and a dictionary entry found per row.
    private static func collect(
        _ results: [Result<PostgresRows, PostgresError>], into found: inout [String: CustomerRecords]
    ) throws {
        guard results.count == 3 else { throw StoreError.corrupt("customer records: \(results.count) results") }
        try collect(try results[0].get(), into: &found, \.recorded) {
            try SubscriptionRepository.transaction($0, after: $1)
        }
        try collect(try results[1].get(), into: &found, \.appleTransactions) { row, _ in
            try AppleDataRepository.transactionFacts(row)
        }
        try collect(try results[2].get(), into: &found, \.appleRenewals) { row, _ in
            try AppleDataRepository.renewalFacts(row)
        }
    }

    /// The rows of one read, decoded with `decode` (given the run's record before, whose strings it may share) and
    /// added to their customers' `records`, a run of one customer's rows at a time (sized before it is filled, and
    /// moved in whole when the customer has none of them yet, as is usual). Each row carries its customer id in its
    /// last column.
    private static func collect<Record>(
        _ rows: PostgresRows, into found: inout [String: CustomerRecords],
        _ records: WritableKeyPath<CustomerRecords, [Record]>,
        _ decode: (_ row: PostgresRow, _ previous: Record?) throws -> Record
    ) throws {
        guard let last = rows.columns.indices.last else { return }
        var start = rows.startIndex
        while start < rows.endIndex {
            let first = rows[start]
            guard let customer = try first.cell(at: last).bytes else {
                throw StoreError.corrupt("customer records: a row without its customer")
            }
            var end = start + 1
            while end < rows.endIndex, try rows[end].cell(at: last).bytes?.elementsEqual(customer) == true { end += 1 }
            var run: [Record] = []
            run.reserveCapacity(end - start)
            for row in rows[start..<end] { run.append(try decode(row, run.last)) }
            let key = try first.decode(String.self, at: last)
            append(run, to: &found[key, default: CustomerRecords(recorded: [])][keyPath: records])
            start = end
        }
    }

    /// Puts `run` after `records`: taken whole, not copied element by element, when `records` is empty.
    private static func append<Record>(_ run: consuming [Record], to records: inout [Record]) {
        if records.isEmpty {
            records = run
        } else {
            records.append(contentsOf: run)
        }
    }

    /// One customer's records.
    public func records(tenant: UUID, customerId: String) async throws(StoreError) -> CustomerRecords {
        try await records(tenant: tenant, customerIds: [customerId])[customerId] ?? CustomerRecords(recorded: [])
    }

    /// The three reads, each one index lookup per customer: written as a lateral join over the bound array so the
    /// plan cannot turn into a scan of the tenant's rows while the table's statistics lag (see
    /// `RedemptionStore.batchLookups`). Each row ends with its customer id.
    ///
    /// The array is unnested through a sub-select, `unnest((SELECT $1))`, so that the connection's prepared
    /// statement runs on its cached generic plan. Over a plain `unnest($1)` a custom plan sees the array's length
    /// (4 customers, say) where the generic one assumes 100 rows, so PostgreSQL judged the generic plan dearer and
    /// planned every execution anew: 40 % of its CPU in B4c's cold reads went to planning (`perf`,
    /// docs/perf/README.md §2). Through the sub-select both plans assume the same, the generic plan is kept after
    /// the fifth execution, and its shape is the same nested loop of index lookups (`CustomerRecordsQueryPlanTests`).
    /// A generic plan is kept until the table's next `ANALYZE`: one made over a table still empty (no Apple data
    /// yet) reads it sequentially, which is right while it is small, and autovacuum analyses it after its first 50
    /// rows (a never-analysed table is `FirstStatistics`' within seconds).
    ///
    /// The text is the same for every read, so it is written once (`readSQL`) and each read binds its values to it:
    /// writing it anew per batched read, with its interpolations, was 3 % of the gateway's CPU per cold answer.
    static func queries(tenant: UUID, customers: [String]) -> [PostgresQuery] {
        let binds = [customers.postgresBind(), tenant.postgresBind()]
        return readSQL.map { PostgresQuery(unsafeSQL: $0, binds: binds) }
    }

    /// The three reads' text: `$1` the customers, `$2` the tenant.
    private static let readSQL: [String] = {
        let customers: [String] = []
        let tenant = UUID()
        return [
            (SubscriptionRepository.transactionColumns, "subscription_transactions", "purchase_date, transaction_id"),
            (AppleDataRepository.transactionColumns, "apple_transactions", "purchase_date, transaction_id"),
            (AppleDataRepository.renewalColumns, "apple_renewal_infos", "original_transaction_id, environment"),
        ].map { (columns, table, order) -> PostgresQuery in
            """
            SELECT r.*, c.customer_id
            FROM unnest((SELECT \(customers)::text[])) AS c(customer_id)
            CROSS JOIN LATERAL (
                SELECT \(query: .unsafeRaw(columns)) FROM \(query: .unsafeRaw(table)) t
                WHERE t.tenant_id = \(tenant) AND t.customer_id = c.customer_id
                ORDER BY \(query: .unsafeRaw(order))) r
            """
        }.map { query in
            precondition(query.binds.count == 2, "customer records: the reads bind the customers, then the tenant")
            return query.sql
        }
    }()
}
