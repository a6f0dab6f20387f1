import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// A customer's first question reads their records with three batched lateral reads (`CustomerRecordsRepository`).
/// Each must stay one index lookup per customer whatever the statistics say, and must run on the connection's
/// cached generic plan: over a plain `unnest($1)`, PostgreSQL planned every execution anew (see `queries`).
@Suite("Customer records query plans")
struct CustomerRecordsQueryPlanTests {
    @Test("each read is an index lookup per customer in its generic plan, and the generic plan is the one used")
    func readsUseGenericPlansOfPerCustomerLookups() async throws {
        try await RepositoryTests.withStore(maxConnections: 1) { database in
            let tenant = UUID()
            let queries = CustomerRecordsRepository.queries(tenant: tenant, customers: ["c1", "c2", "c3"])
            #expect(queries.count == 3)
            let tables = ["subscription_transactions", "apple_transactions", "apple_renewal_infos"]
            try await database.pool.withConnection { connection in
                // Statistics that lag behind tables that grew: analysed at 50 rows, then 20,000 more (foreign-key
                // triggers off for this session, so the rows need no tenant).
                try await connection.query("SET session_replication_role = replica")
                let t = tenant.uuidString.lowercased()
                func fill(_ range: ClosedRange<Int>) async throws {
                    let rows = "FROM generate_series(\(range.lowerBound), \(range.upperBound)) AS n"
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: """
                                INSERT INTO subscription_transactions
                                    (tenant_id, transaction_id, original_transaction_id, customer_id, product_id,
                                     purchase_date, expires_date, auto_renew, in_billing_retry)
                                SELECT '\(t)', 't' || n, 't' || n, 'customer' || (n / 4), 'monthly', now(),
                                       now() + interval '1 month', true, false \(rows)
                                """))
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: """
                                INSERT INTO apple_transactions
                                    (tenant_id, transaction_id, original_transaction_id, environment, customer_id,
                                     product_id, purchase_date, signed_date, authenticity, jws)
                                SELECT '\(t)', 'a' || n, 'a' || n, 'Production', 'customer' || (n / 4), 'monthly',
                                       now(), now(), 'verifiedChain', 'x' \(rows)
                                """))
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: """
                                INSERT INTO apple_renewal_infos
                                    (tenant_id, original_transaction_id, environment, customer_id, signed_date,
                                     authenticity, jws)
                                SELECT '\(t)', 'a' || n, 'Production', 'customer' || (n / 4), now(),
                                       'verifiedChain', 'x' \(rows)
                                """))
                }
                try await fill(1...50)
                for table in tables { try await connection.query(PostgresQuery(unsafeSQL: "ANALYZE \(table)")) }
                try await fill(51...20_050)

                // Executed as the gateway executes them: prepared, pipelined, with batches of different sizes.
                for round in 0..<8 {
                    let customers = (0...(round % 4)).map { "customer\($0 * 97)" }
                    let results = try await connection.pipeline(
                        CustomerRecordsRepository.queries(tenant: tenant, customers: customers), prepared: true)
                    for result in results { _ = try result.get() }
                }
                let counts = try await connection.query(
                    """
                    SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
                    WHERE statement LIKE '%CROSS JOIN LATERAL%'
                    """)
                #expect(counts.count == 3)
                for row in counts {
                    let (statement, generic, custom) = (
                        try row.decode(String.self, at: 0), try row.decode(Int64.self, at: 1),
                        try row.decode(Int64.self, at: 2)
                    )
                    // PostgreSQL tries five custom plans, then keeps the generic one if it is no dearer.
                    #expect(generic >= 3 && custom <= 5, "\(generic) generic, \(custom) custom plans: \(statement)")
                }

                // The generic plans: a nested loop of one index lookup per customer.
                for (index, query) in queries.enumerated() {
                    let plan = try await QueryPlans.generic(
                        query, name: "records\(index)", arguments: "ARRAY['c1', 'c2'], '\(t)'", on: connection)
                    #expect(plan.contains(tables[index]), "plan:\n\(plan)")
                    #expect(
                        QueryPlans.indexCondition(of: plan).contains("(customer_id = c.customer_id)"),
                        "plan:\n\(plan)")
                    #expect(!plan.contains("Seq Scan"), "plan:\n\(plan)")
                }
            }
        }
    }
}
