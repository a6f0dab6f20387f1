import Foundation
import JSONRPC
import Testing

@testable import OfferGateway
@testable import OfferStore

/// Outcomes of many concurrent redemption attempts: successes (redemption ids) and error codes.
struct RedemptionTally: Sendable {
    var successes: [String] = []
    var replayed = 0
    var errors: [Int: Int] = [:]

    mutating func merge(_ other: RedemptionTally) {
        successes += other.successes
        replayed += other.replayed
        for (code, n) in other.errors { errors[code, default: 0] += n }
    }

    /// Runs `attempts` redemptions over `connections` clients spread round-robin over the gateways' sockets;
    /// `params(i)` gives attempt i's params.
    static func run(
        _ gateways: RedemptionGateways, apiKey: String, connections: Int, attempts: Int,
        params: @escaping @Sendable (Int) -> JSONValue
    ) async throws -> RedemptionTally {
        var clients: [RPCClient] = []
        for c in 0..<connections {
            clients.append(try await gateways.client(c % gateways.sockets.count, apiKey: apiKey))
        }
        let tally = try await withThrowingTaskGroup(of: RedemptionTally.self) { group in
            for (c, client) in clients.enumerated() {
                group.addTask {
                    var local = RedemptionTally()
                    var i = c
                    while i < attempts {
                        do {
                            let result = try await client.call(method: "codes.redeem", params: params(i))
                            if let id = result["redemptionId"]?.stringValue { local.successes.append(id) }
                            if result["replayed"]?.boolValue == true { local.replayed += 1 }
                        } catch let error as RPCError {
                            local.errors[error.code, default: 0] += 1
                        }
                        i += connections
                    }
                    return local
                }
            }
            var total = RedemptionTally()
            for try await part in group { total.merge(part) }
            return total
        }
        for client in clients { client.close() }
        return tally
    }
}

@Suite("Redemption under concurrency", .serialized)
struct RedemptionConcurrencyTests {
    @Test func hotCustomCodeNeverExceedsItsLimitAcrossThreeGateways() async throws {
        try await RedemptionGateways.with(count: 3, poolSize: 6) { gateways in
            let admin = try await gateways.client()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "hot")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "hot", "campaignId": "launch", "offerId": "code1", "kind": "custom", "code": "LAUNCH",
                    "totalLimit": 1000,
                ])
            let started = ContinuousClock.now
            let tally = try await RedemptionTally.run(
                gateways, apiKey: key, connections: 64, attempts: 20_000
            ) { i in ["code": "launch", "customerId": .string("customer-\(i)")] }
            let elapsed = ContinuousClock.now - started
            print("hot code: 20,000 attempts over 3 gateways in \(elapsed)")
            #expect(tally.successes.count == 1000)
            #expect(Set(tally.successes).count == 1000)
            #expect(tally.errors == [-32041: 19_000])
            let db = try gateways.database()
            #expect(
                try await RedemptionRows.read(db, campaignId: "launch")
                    == RedemptionRows(live: 1000, rolledBack: 0, counter: 1000))
            // Every acknowledged redemption id is a row.
            let stored = try await db.pool.query("SELECT redemption_id::text FROM redemptions").map {
                try $0.decode(String.self, at: 0)
            }
            #expect(Set(stored) == Set(tally.successes))
            await db.pool.close()
            // The work really was batched: fewer transactions than redemptions.
            let batches = gateways.services.map { $0.gateway.redemptions.committed.batches }.reduce(0, +)
            let written = gateways.services.map { $0.gateway.redemptions.committed.redemptions }.reduce(0, +)
            #expect(written == 1000)
            #expect(batches < 20_000)
            print("hot code: \(batches) batches for 20,000 attempts")
        }
    }

    @Test func oneTimeCodeRacedByFiftyCustomersIsRedeemedOnce() async throws {
        try await RedemptionGateways.with(count: 3, poolSize: 4) { gateways in
            let admin = try await gateways.client()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "race")
            _ = try await admin.call(
                method: "campaigns.create",
                params: ["tenant": "race", "campaignId": "ot", "offerId": "code1", "kind": "oneTime"])
            _ = try await admin.call(
                method: "campaigns.generateCodes", params: ["tenant": "race", "campaignId": "ot", "count": 1])
            let page = try await admin.call(method: "campaigns.codes", params: ["tenant": "race", "campaignId": "ot"])
            let code = try #require(page["codes"]?[0]?["code"]?.stringValue)
            let tally = try await RedemptionTally.run(gateways, apiKey: key, connections: 50, attempts: 50) { i in
                ["code": .string(code), "customerId": .string("racer-\(i)")]
            }
            #expect(tally.successes.count == 1)
            #expect(tally.errors == [-32041: 49])
            let db = try gateways.database()
            #expect(
                try await RedemptionRows.read(db, campaignId: "ot")
                    == RedemptionRows(live: 1, rolledBack: 0, counter: 1))
            await db.pool.close()
        }
    }

    @Test func idempotencyKeyRetriedConcurrentlyYieldsOneRedemption() async throws {
        try await RedemptionGateways.with(count: 3, poolSize: 4) { gateways in
            let admin = try await gateways.client()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "retry")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "retry", "campaignId": "c", "offerId": "code1", "kind": "custom", "code": "RETRY",
                    "totalLimit": 100,
                ])
            let tally = try await RedemptionTally.run(gateways, apiKey: key, connections: 30, attempts: 30) { _ in
                ["code": "RETRY", "customerId": "same-customer", "idempotencyKey": "checkout-42"]
            }
            #expect(tally.errors.isEmpty)
            #expect(tally.successes.count == 30)
            #expect(Set(tally.successes).count == 1)
            #expect(tally.replayed == 29)
            let db = try gateways.database()
            #expect(
                try await RedemptionRows.read(db, campaignId: "c") == RedemptionRows(live: 1, rolledBack: 0, counter: 1)
            )
            await db.pool.close()
        }
    }

    @Test func perCustomerLimitHoldsUnderConcurrency() async throws {
        try await RedemptionGateways.with(count: 2, poolSize: 4) { gateways in
            let admin = try await gateways.client()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "percust")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "percust", "campaignId": "c", "offerId": "code1", "kind": "custom", "code": "TWICE",
                    "perCustomerLimit": 2,
                ])
            // 10 customers, 10 attempts each, all at once.
            let tally = try await RedemptionTally.run(gateways, apiKey: key, connections: 20, attempts: 100) { i in
                ["code": "TWICE", "customerId": .string("c\(i % 10)")]
            }
            #expect(tally.successes.count == 20)
            #expect(tally.errors == [-32043: 80])
        }
    }
}
