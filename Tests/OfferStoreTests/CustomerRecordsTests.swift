import Foundation
import OfferDomain
import OfferTestSupport
import Testing

@testable import OfferStore

/// The cold path's read: many customers' records in one round trip, each customer's exactly what was stored for
/// them, and nothing of another tenant's.
@Suite("Customer records, many at once")
struct CustomerRecordsTests {
    @Test("1,203 customers in one call (two round trips): each gets its own transactions, in order; unknown ones empty")
    func manyCustomers() async throws {
        try await RepositoryTests.withStore { db in
            let a = try await db.tenants.create(
                slug: "tenant-a", bundleId: "com.a", name: nil, apiKey: RepositoryTests.key("aaaaaaaaaaaa"))
            let b = try await db.tenants.create(
                slug: "tenant-b", bundleId: "com.b", name: nil, apiKey: RepositoryTests.key("bbbbbbbbbbbb"))
            let product = Product(
                id: "monthly", groupId: "g", period: try SubscriptionPeriod.parse("P1M"),
                price: try Money("4.99", currency: "USD"), level: 1)
            for tenant in [a, b] {
                try await db.catalog.upsert(
                    tenant: tenant.id, groups: [SubscriptionGroup(id: "g", name: "G")], products: [product],
                    offers: [], actor: "admin")
            }
            let start = Date(timeIntervalSince1970: 1_790_000_000)
            let customers = (0..<1_203).map { "c\($0)" }
            // Customer i has i % 3 transactions (so a third have none), recorded newest first.
            var expected: [String: [String]] = [:]
            for (i, customer) in customers.enumerated() {
                let count = i % 3
                for n in (0..<count).reversed() {
                    let begins = start + Double(n) * 30 * 86_400
                    try await db.subscriptions.record(
                        tenant: a.id, customerId: customer,
                        Transaction(
                            transactionId: "\(customer)-t\(n)", productId: "monthly", purchaseDate: begins,
                            expiresDate: begins + 30 * 86_400))
                }
                expected[customer] = (0..<count).map { "\(customer)-t\($0)" }
            }
            // The same customer id in another tenant stays there.
            try await db.subscriptions.record(
                tenant: b.id, customerId: "c1",
                Transaction(
                    transactionId: "b-t", productId: "monthly", purchaseDate: start, expiresDate: start + 86_400))

            let asked = customers + ["c1", "c2", "ghost"]  // duplicates and an unknown customer
            let found = try await db.customerRecords.records(tenant: a.id, customerIds: asked)
            #expect(found.count == customers.count + 1)
            for customer in customers {
                let records = try #require(found[customer])
                #expect(records.recorded.map(\.transactionId) == expected[customer], "\(customer)")
                #expect(records.appleTransactions.isEmpty && records.appleRenewals.isEmpty)
            }
            #expect(found["ghost"] == CustomerRecords(recorded: []))
            #expect(
                try await db.customerRecords.records(tenant: b.id, customerId: "c1").recorded.map(\.transactionId)
                    == ["b-t"])
            #expect(try await db.customerRecords.records(tenant: b.id, customerIds: []).isEmpty)
        }
    }
}
