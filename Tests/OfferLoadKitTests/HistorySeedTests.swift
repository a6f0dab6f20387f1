import Foundation
import Testing

@testable import OfferLoadKit

struct RecordParams: Decodable {
    let customerId: String
    let productId: String
    let transactionId: String
    let originalTransactionId: String
    let purchaseDate: String
    let expiresDate: String
    let autoRenew: Bool
    let inBillingRetry: Bool
}

@Suite struct HistorySeedTests {
    // 2026-11-30T12:00:00Z
    let now = Date(timeIntervalSince1970: 1_796_040_000)

    @Test func historiesFollowTheDocumentedMix() throws {
        let seed = HistorySeed(runTag: "s", count: 10, products: ["p1", "p2"], now: now)
        #expect(HistorySeed.rfc3339(now) == "2026-11-30T12:00:00Z")
        #expect(seed.customers.count == 10)
        let records = try seed.requests.map { r in
            #expect(r.method == "subscriptions.record")
            return try decode(RecordParams.self, r.params)
        }
        // 4 active × 7 + 3 lapsed × 6 + 1 retry × 4; customers 8 and 9 have none.
        #expect(records.count == 4 * 7 + 3 * 6 + 4)
        #expect(Set(records.map(\.customerId)) == Set((0..<8).map { "s-h\($0)" }))
        #expect(Set(records.map(\.transactionId)).count == records.count)
        let active = records.filter { $0.customerId == "s-h0" }
        #expect(active.first?.purchaseDate == "2026-05-30T12:00:00Z")
        #expect(active.last?.expiresDate == "2026-12-15T12:00:00Z")
        #expect(active.allSatisfy { $0.productId == "p1" && $0.originalTransactionId == "s-t0-0" })
        let lapsed = records.filter { $0.customerId == "s-h5" }
        #expect(lapsed.first?.purchaseDate == "2026-02-28T12:00:00Z")  // Feb 30 clamps to the 28th
        #expect(lapsed.last?.expiresDate == "2026-08-30T12:00:00Z")
        #expect(lapsed.last?.autoRenew == false)
        #expect(lapsed.allSatisfy { $0.productId == "p2" })
        let retry = records.filter { $0.customerId == "s-h7" }
        #expect(retry.last?.inBillingRetry == true)
        #expect(retry.last?.expiresDate == "2026-11-25T12:00:00Z")
        #expect(retry.first?.purchaseDate == "2026-07-30T12:00:00Z")
        #expect(HistorySeed(runTag: "s", count: 10, products: [], now: now).requests.isEmpty)
    }
}
