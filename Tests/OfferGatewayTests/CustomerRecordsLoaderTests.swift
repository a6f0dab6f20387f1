import Foundation
import OfferDomain
import OfferTestSupport
import Postgres
import Testing

@testable import OfferGateway
@testable import OfferStore

/// Concurrent first questions about different customers share round trips, and each still gets its own records.
@Suite("Customer records loader")
struct CustomerRecordsLoaderTests {
    @Test("300 concurrent misses for different customers: fewer round trips than customers, every answer right")
    func coalescesMisses() async throws {
        try await TestDatabase.with { configuration in
            let db = OfferDatabase(pool: PostgresPool(configuration: configuration, maxConnections: 8))
            defer { Task { await db.close() } }
            try await db.migrate()
            let tenant = try await db.tenants.create(
                slug: "tenant-a", bundleId: "com.a", name: nil,
                apiKey: StoredApiKey(lookup: "aaaaaaaaaaaa", hash: Array(repeating: 1, count: 32)))
            let product = Product(
                id: "monthly", groupId: "g", period: try SubscriptionPeriod.parse("P1M"),
                price: try Money("4.99", currency: "USD"), level: 1)
            try await db.catalog.upsert(
                tenant: tenant.id, groups: [SubscriptionGroup(id: "g", name: "G")], products: [product], offers: [],
                actor: "admin")
            let start = Date(timeIntervalSince1970: 1_790_000_000)
            for i in stride(from: 0, to: 300, by: 2) {
                try await db.subscriptions.record(
                    tenant: tenant.id, customerId: "c\(i)",
                    Transaction(
                        transactionId: "t\(i)", productId: "monthly", purchaseDate: start,
                        expiresDate: start + 86_400))
            }
            let loader = CustomerRecordsLoader(repository: db.customerRecords, maxInFlight: 2)
            let answers = try await withThrowingTaskGroup(of: (Int, CustomerRecords).self) { group in
                for i in 0..<300 {
                    group.addTask {
                        (i, try await loader.records(CustomerKey(tenant: tenant.id, customerId: "c\(i)")))
                    }
                }
                return try await group.reduce(into: [Int: CustomerRecords]()) { $0[$1.0] = $1.1 }
            }
            #expect(answers.count == 300)
            for (i, records) in answers {
                #expect(records.recorded.map(\.transactionId) == (i % 2 == 0 ? ["t\(i)"] : []), "c\(i)")
            }
            let reads = loader.reads
            #expect(reads.keys == 300)
            #expect(reads.roundTrips < 300, "misses must share round trips (\(reads.roundTrips) for 300)")
        }
    }
}
