import Foundation
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Testing

/// What a crash costs the funnel: a gateway killed with SIGKILL loses at most the `offered` counts made since its
/// last flush, and nothing else (events are stored before they are acknowledged); one stopped with SIGTERM loses
/// nothing.
@Suite("Offer funnel survives crashes", .serialized)
struct FunnelCrashTests {
    typealias Spawned = RedemptionCrashTests.SpawnedGateway

    static let hour = "2026-11-19T10:00:00Z"

    static func best(_ client: RPCClient, count: Int, prefix: String) async throws {
        for n in 0..<count {
            let answer = try await client.call(
                method: "offers.best",
                params: ["customerId": .string("\(prefix)-\(n)"), "productId": "p1", "at": "2026-11-19T10:30:00Z"])
            try #require(answer["offer"]?["offerId"]?.stringValue == "intro1")
        }
    }

    static func totals(_ client: RPCClient) async throws -> JSONValue {
        try #require(
            try await client.call(
                method: "analytics.funnel",
                params: ["offerId": "intro1", "from": .string(hour), "to": "2026-11-19T11:00:00Z"]
            )["totals"])
    }

    static func offered(_ client: RPCClient) async throws -> Int {
        Int(try await totals(client)["offered"]?.int64Value ?? -1)
    }

    @Test func sigkillLosesAtMostTheLastFlushIntervalOfOfferedAndNothingElse() async throws {
        try await TestDatabase.withConninfo { url in
            let adminKey = "og_admin_funnel_crash_test"
            let masterKey = Data(try SecureRandom.bytes(count: 32)).base64EncodedString()
            let flush = ["--funnel-flush-ms", "200"]
            let first = try await Spawned.start(
                databaseURL: url, adminKey: adminKey, masterKey: masterKey, extraArguments: flush)
            defer { first.killIfRunning() }
            let admin = try await first.client(apiKey: adminKey)
            let created = try await admin.call(
                method: "tenants.create", params: ["slug": "funnel-crash", "bundleId": "com.example.app"])
            let apiKey = try #require(created["apiKey"]?.stringValue)
            _ = try await admin.call(
                method: "catalog.upsert",
                params: [
                    "tenant": "funnel-crash", "groups": [["id": "g1", "name": "Premium"]],
                    "products": [
                        ["id": "p1", "groupId": "g1", "period": "P1M", "price": "4.99", "currency": "USD", "level": 1]
                    ],
                    "offers": [
                        [
                            "id": "intro1", "type": "introductory", "productId": "p1", "paymentMode": "freeTrial",
                            "period": "P1W",
                        ]
                    ],
                ])
            admin.close()
            let client = try await first.client(apiKey: apiKey)

            // Counted, then flushed within an interval (seen in the database through analytics.funnel).
            try await Self.best(client, count: 60, prefix: "a")
            #expect(try await eventually(timeout: .seconds(20)) { try await Self.offered(client) == 60 })
            // Acknowledged events, then answers that the next flush would carry, then SIGKILL at once.
            let events: [JSONValue] = (0..<25).map { n in
                [
                    "customerId": .string("a-\(n)"), "offerId": "intro1", "event": "impression",
                    "at": "2026-11-19T10:40:00Z", "eventId": .string("ev-\(n)"),
                ]
            }
            let recorded = try await client.call(method: "events.record", params: ["events": .array(events)])
            #expect(recorded["recorded"]?.int64Value == Int64(25))
            try await Self.best(client, count: 40, prefix: "b")
            client.close()
            await first.kill9()

            // A new gateway: the first 60 are there; of the last 40, at most those of the last interval are lost;
            // every acknowledged event is there.
            let second = try await Spawned.start(
                databaseURL: url, adminKey: adminKey, masterKey: masterKey, extraArguments: flush)
            defer { second.killIfRunning() }
            let again = try await second.client(apiKey: apiKey)
            let afterKill = try await Self.offered(again)
            #expect((60...100).contains(afterKill), "offered after SIGKILL: \(afterKill)")
            #expect(try await Self.totals(again)["impressions"]?.int64Value == Int64(25))

            // SIGTERM loses nothing: the shutdown flushes what is left, whatever the interval.
            try await Self.best(again, count: 30, prefix: "c")
            again.close()
            await second.terminate()
            let third = try await Spawned.start(
                databaseURL: url, adminKey: adminKey, masterKey: masterKey,
                extraArguments: ["--funnel-flush-ms", "600000"])
            defer { third.killIfRunning() }
            let last = try await third.client(apiKey: apiKey)
            #expect(try await Self.offered(last) == afterKill + 30)
            #expect(try await Self.totals(last)["impressions"]?.int64Value == Int64(25))
            last.close()
            await third.terminate()
        }
    }
}
