import Foundation
import JSONRPC
import OfferCrypto
import OfferGateway
import OfferTestSupport
import Synchronization
import Testing

/// The offer funnel (API.md §11, issue 14 point 4) end to end: real PostgreSQL, real sockets, verified transactions
/// signed by the test CA. Every count asserted is one the test drove.
@Suite("Offer funnel: events.record and analytics.funnel", .serialized)
struct FunnelTests {
    /// A promotional offer every subscriber may have (so active customers can be signed for).
    static let promoAll: JSONValue = [
        "id": "promo.all", "type": "promotional", "productId": "monthly", "paymentMode": "payAsYouGo",
        "period": "P1M", "periodCount": 2, "price": "1.99", "audience": ["active", "atRisk", "billingRetry", "lapsed"],
    ]
    static let codeOffer: JSONValue = [
        "id": "code.month", "type": "code", "productId": "monthly", "paymentMode": "freeTrial", "period": "P1M",
    ]

    /// The hours the test drives (the test clock is 2026-11-19T12:00:00Z).
    static let h10 = "2026-11-19T10:00:00Z"
    static let h11 = "2026-11-19T11:00:00Z"
    static let h12 = "2026-11-19T12:00:00Z"

    static func at(_ hour: String, minutes: Int) -> Date {
        (RFC3339.parse(hour) ?? TestGateway.now).addingTimeInterval(Double(minutes) * 60)
    }

    static func text(_ date: Date) -> JSONValue { .string(RFC3339.format(date) ?? "") }

    static func withFunnel<T>(_ body: (AppleTenant) async throws -> T) async throws -> T {
        let ca = try await AppleTestCA.shared()
        let verifier = try ca.verifier()
        return try await TestGateway.with(configure: { options, _ in
            options.appleVerifier = verifier
            options.funnelFlushInterval = .milliseconds(50)
        }) { gateway in
            try await body(
                try await AppleTenant.setUp(gateway, ca: ca, extraOffers: [Self.promoAll, Self.codeOffer]))
        }
    }

    static func funnel(_ client: RPCClient, _ params: JSONObject) async throws -> JSONValue {
        try await client.call(method: "analytics.funnel", params: .object(params))
    }

    /// The bucket starting at `start` (RFC 3339) of an analytics.funnel answer.
    static func bucket(_ answer: JSONValue, _ start: String) throws -> JSONValue {
        try #require(answer["buckets"]?.arrayValue?.first { $0["start"]?.stringValue == start }, "no bucket \(start)")
    }

    static func count(_ value: JSONValue?, _ stage: String) -> Int {
        Int(value?[stage]?.int64Value ?? -1)
    }

    @Test("Counts equal what the test drove, per bucket: best answers, events, signatures, redemptions, purchases")
    func countsPerBucket() async throws {
        try await Self.withFunnel { app in
            try await app.gateway.importKey(tenant: app.slug, admin: app.admin)
            // N best answers in two hours, from 8 connections at once, each customer asking twice (the second
            // answer comes from the memo, and counts as well).
            var offered: [String: [String: Int]] = [:]  // offer → hour → answers that chose it
            let key = try await Self.apiKey(app)
            var clients: [RPCClient] = []
            for _ in 0..<8 { clients.append(try await app.gateway.tenant(key)) }
            let answers = try await withThrowingTaskGroup(of: [(String, String)].self) { group in
                for (index, client) in clients.enumerated() {
                    group.addTask {
                        var seen: [(String, String)] = []
                        for n in 0..<10 {
                            let hour = n % 2 == 0 ? Self.h10 : Self.h11
                            let customer = "new-\(index)-\(n)"
                            for _ in 0..<2 {
                                let answer = try await client.call(
                                    method: "offers.best",
                                    params: [
                                        "customerId": .string(customer), "productId": "monthly",
                                        "at": Self.text(Self.at(hour, minutes: 5 + n)),
                                    ])
                                seen.append((try #require(answer["offer"]?["offerId"]?.stringValue), hour))
                            }
                        }
                        return seen
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            for (winner, hour) in answers { offered[winner, default: [:]][hour, default: 0] += 1 }
            #expect(answers.count == 160)

            // M paywall events for promo.all: impressions and taps in both hours, with event ids.
            var events: [JSONValue] = []
            for n in 0..<30 {
                let hour = n < 20 ? Self.h10 : Self.h11
                events.append([
                    "customerId": .string("c-\(n)"), "offerId": "promo.all", "event": "impression",
                    "at": Self.text(Self.at(hour, minutes: n % 50)), "eventId": .string("imp-\(n)"),
                ])
            }
            for n in 0..<7 {
                events.append([
                    "customerId": .string("c-\(n)"), "offerId": "promo.all", "event": "tap",
                    "at": Self.text(Self.at(Self.h11, minutes: 30 + n)), "eventId": .string("tap-\(n)"),
                ])
            }
            let recorded = try await app.client.call(method: "events.record", params: ["events": .array(events)])
            #expect(recorded["recorded"]?.int64Value == Int64(37))

            // K signatures (they carry the gateway's clock: the 12:00 hour), for customers with an active
            // verified subscription.
            var signers: [String] = []
            for n in 0..<5 {
                let customer = UUID().uuidString.lowercased()
                signers.append(customer)
                try await app.transactions([
                    app.payloads.transaction(
                        id: "sub-\(n)", purchase: days(-10), expires: days(20), token: customer, signed: days(-10))
                ])
            }
            for (n, customer) in signers.enumerated() {
                _ = try await app.client.call(
                    method: "offers.sign",
                    params: [
                        "customerId": .string(customer), "productId": "monthly", "offerId": "promo.all",
                        "format": n % 2 == 0 ? "v1" : "jws", "transactionId": .string("sub-\(n)"),
                    ])
            }
            // Introductory-eligibility signatures name no offer: not counted.
            _ = try await app.client.call(
                method: "offers.introEligibility",
                params: ["customerId": .string(signers[0]), "productId": "monthly", "transactionId": "sub-0"])

            // J purchases of promo.all verified from the test CA in the 10:00 hour, R of them renewed at full
            // price later; one purchase delivered twice; a chain's second offer period is the same purchase; an
            // offer-less purchase and another offer's purchase count nothing for promo.all.
            var purchases: [JSONValue] = []
            for n in 0..<4 {
                purchases.append(
                    app.payloads.transaction(
                        id: "buy-\(n)", purchase: Self.at(Self.h10, minutes: 10 + n),
                        expires: Self.at(Self.h11, minutes: 0),
                        token: UUID().uuidString, offerType: 2, offerId: "promo.all", discount: "PAY_AS_YOU_GO",
                        signed: Self.at(Self.h10, minutes: 10 + n)))
            }
            purchases.append(
                app.payloads.transaction(
                    id: "buy-0-period-2", original: "buy-0", purchase: Self.at(Self.h10, minutes: 40),
                    expires: Self.at(Self.h11, minutes: 10), offerType: 2, offerId: "promo.all",
                    discount: "PAY_AS_YOU_GO", signed: Self.at(Self.h10, minutes: 40)))
            purchases.append(
                app.payloads.transaction(
                    id: "plain-1", purchase: Self.at(Self.h10, minutes: 20), expires: days(30),
                    token: UUID().uuidString, signed: Self.at(Self.h10, minutes: 20)))
            purchases.append(
                app.payloads.transaction(
                    id: "half-1", purchase: Self.at(Self.h10, minutes: 21), expires: days(30),
                    token: UUID().uuidString, offerType: 2, offerId: "promo.half",
                    signed: Self.at(Self.h10, minutes: 21)))
            try await app.transactions(purchases)
            try await app.transactions([purchases[1]])  // delivered again: a duplicate
            // Renewals at full price of buy-1 and buy-2 (buy-2's renewal arrives before... nothing: order is free).
            try await app.transactions([
                app.payloads.transaction(
                    id: "renew-1", original: "buy-1", purchase: Self.at(Self.h11, minutes: 1), expires: days(30),
                    signed: Self.at(Self.h11, minutes: 1)),
                app.payloads.transaction(
                    id: "renew-2", original: "buy-2", purchase: Self.at(Self.h11, minutes: 2), expires: days(30),
                    signed: Self.at(Self.h11, minutes: 2)),
            ])
            // A second renewal of buy-1 changes nothing.
            try await app.transactions([
                app.payloads.transaction(
                    id: "renew-1b", original: "buy-1", purchase: Self.at(Self.h11, minutes: 50), expires: days(30),
                    signed: Self.at(Self.h11, minutes: 50))
            ])

            // Redemptions of two campaigns granting code.month.
            _ = try await app.admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": .string(app.slug), "campaignId": "fall", "offerId": "code.month", "kind": "custom",
                    "code": "FALLFUNNEL",
                ])
            for n in 0..<3 {
                _ = try await app.client.call(
                    method: "codes.redeem", params: ["code": "FALLFUNNEL", "customerId": .string("redeemer-\(n)")])
            }
            _ = try await app.admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": .string(app.slug), "campaignId": "spring", "offerId": "code.month", "kind": "custom",
                    "code": "SPRINGFUNNEL",
                ])
            _ = try await app.client.call(
                method: "codes.redeem", params: ["code": "SPRINGFUNNEL", "customerId": "redeemer-0"])
            // Apple one-time codes: 2 claimed (the gateway's clock: the 12:00 hour), one claimed again (the same
            // claim), and one used in a verified offer-code purchase named by the campaign's reference name.
            _ = try await app.admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": .string(app.slug), "campaignId": "asc", "offerId": "code.month", "kind": "appleOneTime",
                    "appleReferenceName": "Fall One-Time",
                ])
            _ = try await app.admin.call(
                method: "campaigns.importCodes",
                params: ["tenant": .string(app.slug), "campaignId": "asc", "codes": ["FALLA1", "FALLB2", "FALLC3"]])
            for customer in ["claimer-0", "claimer-1", "claimer-0"] {
                _ = try await app.client.call(
                    method: "codes.claim", params: ["campaignId": "asc", "customerId": .string(customer)])
            }
            try await app.transactions([
                app.payloads.transaction(
                    id: "code-buy", purchase: Self.at(Self.h11, minutes: 30), expires: days(30),
                    token: UUID().uuidString,
                    offerType: 3, offerId: "Fall One-Time", signed: Self.at(Self.h11, minutes: 30))
            ])

            // The offered counts arrive with the next flush (50 ms here): wait for them, then check everything.
            let winners = offered.keys.sorted()
            #expect(!winners.isEmpty)
            for winner in winners {
                let expected = offered[winner, default: [:]].values.reduce(0, +)
                let flushed = try await eventually(timeout: .seconds(20)) {
                    let answer = try await Self.funnel(
                        app.client, ["offerId": .string(winner), "from": .string(Self.h10), "to": .string(Self.h12)])
                    return Self.count(answer["totals"], "offered") >= expected
                }
                #expect(flushed, "offered counts of \(winner) never arrived")
                let answer = try await Self.funnel(
                    app.client,
                    ["offerId": .string(winner), "from": .string(Self.h10), "to": .string(Self.h12), "bucket": "hour"])
                #expect(answer["buckets"]?.arrayValue?.count == 2)
                for hour in [Self.h10, Self.h11] {
                    #expect(
                        Self.count(try Self.bucket(answer, hour), "offered") == offered[winner]?[hour] ?? 0,
                        "\(winner) at \(hour)")
                }
                #expect(Self.count(answer["totals"], "offered") == expected)
            }

            let promo = try await Self.funnel(
                app.client,
                [
                    "offerId": "promo.all", "from": .string(Self.h10), "to": "2026-11-19T12:30:00Z",
                    "bucket": "hour",
                ])
            #expect(promo["buckets"]?.arrayValue?.map { $0["start"]?.stringValue } == [Self.h10, Self.h11, Self.h12])
            let b10 = try Self.bucket(promo, Self.h10)
            let b11 = try Self.bucket(promo, Self.h11)
            let b12 = try Self.bucket(promo, Self.h12)
            #expect(Self.count(b10, "impressions") == 20)
            #expect(Self.count(b11, "impressions") == 10)
            #expect(Self.count(b10, "taps") == 0)
            #expect(Self.count(b11, "taps") == 7)
            #expect(Self.count(b12, "signed") == 5)
            #expect(Self.count(b10, "signed") == 0)
            #expect(Self.count(b10, "purchased") == 4)
            #expect(Self.count(b11, "purchased") == 0)
            #expect(Self.count(b10, "renewed") == 2, "renewals count in their purchase's hour")
            #expect(Self.count(b11, "renewed") == 0)
            #expect(Self.count(promo["totals"], "offered") == offered["promo.all"].map { $0.values.reduce(0, +) } ?? 0)
            #expect(Self.count(promo["totals"], "impressions") == 30)
            #expect(Self.count(promo["totals"], "redeemed") == 0)
            #expect(Self.count(promo["totals"], "claimed") == 0)
            #expect(Self.count(promo["totals"], "dismissals") == 0)

            // By day: one bucket holding everything.
            let daily = try await Self.funnel(
                app.client, ["offerId": "promo.all", "from": "2026-11-19T00:00:00Z", "to": "2026-11-20T00:00:00Z"])
            #expect(daily["buckets"]?.arrayValue?.count == 1)
            #expect(daily["buckets"]?[0]?["start"]?.stringValue == "2026-11-19T00:00:00Z")
            for (stage, expected) in [
                ("impressions", 30), ("taps", 7), ("signed", 5), ("purchased", 4), ("renewed", 2),
            ] {
                #expect(Self.count(daily["totals"], stage) == expected, "\(stage)")
                #expect(Self.count(daily["buckets"]?[0], stage) == expected, "\(stage)")
            }

            // Redemptions carry the database's time (now, not the test clock): the ranges below reach today.
            let today = Date()
            let untilToday = Self.text(today.addingTimeInterval(3_600))
            let todayStart = String((RFC3339.format(today) ?? "").prefix(10)) + "T00:00:00Z"

            // The product: every offer of monthly together (promo.half's purchase, both campaigns' redemptions).
            let product = try await Self.funnel(
                app.client, ["productId": "monthly", "from": .string(Self.h10), "to": untilToday])
            #expect(Self.count(product["totals"], "purchased") == 6)
            #expect(Self.count(product["totals"], "signed") == 5)
            #expect(Self.count(product["totals"], "redeemed") == 4)
            #expect(Self.count(product["totals"], "impressions") == 30)
            #expect(Self.count(product["totals"], "offered") == 160, "every answer was for monthly")

            // The campaign: its offer's stages, its own redemptions (not the other campaign's).
            let campaign = try await Self.funnel(
                app.client, ["campaignId": "fall", "from": .string(Self.h10), "to": untilToday])
            #expect(Self.count(campaign["totals"], "redeemed") == 3)
            #expect(Self.count(try Self.bucket(campaign, todayStart), "redeemed") == 3)
            let code = try await Self.funnel(
                app.client, ["offerId": "code.month", "from": .string(Self.h10), "to": untilToday])
            #expect(Self.count(code["totals"], "redeemed") == 4)
            #expect(Self.count(code["totals"], "claimed") == 2)
            #expect(Self.count(code["totals"], "purchased") == 1)
            let claims = try await Self.funnel(
                app.client,
                ["campaignId": "asc", "from": .string(Self.h10), "to": "2026-11-19T12:30:00Z", "bucket": "hour"])
            #expect(Self.count(try Self.bucket(claims, Self.h12), "claimed") == 2)
            #expect(Self.count(try Self.bucket(claims, Self.h11), "purchased") == 1)
            #expect(Self.count(claims["totals"], "redeemed") == 0, "the other campaigns' redemptions are not its")

            // The admin asks for the tenant by name and gets the same answer.
            let asAdmin = try await Self.funnel(
                app.admin,
                [
                    "tenant": .string(app.slug), "offerId": "promo.all", "from": "2026-11-19T00:00:00Z",
                    "to": "2026-11-20T00:00:00Z",
                ])
            #expect(asAdmin["totals"] == daily["totals"])
            for client in clients { client.close() }
        }
    }

    @Test("The same eventId is counted once: within a call, across calls, and from two connections at once")
    func duplicateEventIds() async throws {
        try await Self.withFunnel { app in
            func event(_ id: String?, _ kind: String = "impression") -> JSONValue {
                var object: JSONObject = [
                    "customerId": "c-1", "offerId": "promo.all", "event": .string(kind),
                    "at": .string("2026-11-19T10:15:00Z"),
                ]
                if let id { object["eventId"] = .string(id) }
                return .object(object)
            }
            let first = try await app.client.call(
                method: "events.record",
                params: ["events": [event("e1"), event("e2"), event("e1"), event("e3", "tap")]])
            #expect(first["recorded"]?.int64Value == Int64(3))
            #expect(first["duplicates"]?.int64Value == Int64(1))
            let again = try await app.client.call(
                method: "events.record", params: ["events": [event("e1"), event("e2"), event("e3", "tap")]])
            #expect(again["recorded"]?.int64Value == Int64(0))
            #expect(again["duplicates"]?.int64Value == Int64(3))
            // Two connections send the same 200 new ids at once.
            let other = try await app.gateway.tenant(try await Self.apiKey(app))
            let batch: JSONValue = .array((0..<200).map { event("race-\($0)") })
            async let one = app.client.call(method: "events.record", params: ["events": batch])
            async let two = other.call(method: "events.record", params: ["events": batch])
            let (a, b) = try await (one, two)
            #expect((a["recorded"]?.int64Value ?? -1) + (b["recorded"]?.int64Value ?? -1) == 200)
            // Without an eventId an event is not deduplicated.
            _ = try await app.client.call(method: "events.record", params: ["events": [event(nil), event(nil)]])
            let answer = try await Self.funnel(
                app.client, ["offerId": "promo.all", "from": "2026-11-19T10:00:00Z", "to": "2026-11-19T11:00:00Z"])
            #expect(Self.count(answer["totals"], "impressions") == 2 + 200 + 2)
            #expect(Self.count(answer["totals"], "taps") == 1)
            let tenant = try await app.gateway.tenantId(app.slug)
            #expect(
                try await app.gateway.count("SELECT count(*) FROM funnel_events WHERE tenant_id = \(tenant)") == 205)
            other.close()
        }
    }

    @Test("Bad input is -32602 naming the param, and stores nothing")
    func badInput() async throws {
        try await Self.withFunnel { app in
            let tenant = try await app.gateway.tenantId(app.slug)
            func good(_ n: Int) -> JSONValue {
                ["customerId": .string("c-\(n)"), "offerId": "promo.all", "event": "tap", "eventId": .string("g-\(n)")]
            }
            func stored() async throws -> Int {
                try await app.gateway.count(
                    "SELECT (SELECT count(*) FROM funnel_events WHERE tenant_id = \(tenant)) + (SELECT count(*) FROM funnel_rollups WHERE tenant_id = \(tenant))"
                )
            }
            var unknownOffer = good(2).objectValue ?? [:]
            unknownOffer["offerId"] = "no.such.offer"
            await expectRPCError(-32602, param: "params.events[2].offerId") {
                try await app.client.call(
                    method: "events.record", params: ["events": [good(0), good(1), .object(unknownOffer)]])
            }
            var wrongName = good(1).objectValue ?? [:]
            wrongName["event"] = "click"
            await expectRPCError(-32602, param: "params.events[1].event") {
                try await app.client.call(method: "events.record", params: ["events": [good(0), .object(wrongName)]])
            }
            await expectRPCError(-32602, param: "params.events") {
                try await app.client.call(
                    method: "events.record", params: ["events": .array((0..<1_001).map { good($0) })])
            }
            var future = good(0).objectValue ?? [:]
            future["at"] = "2026-11-21T12:00:00Z"
            await expectRPCError(-32602, param: "params.events[0].at") {
                try await app.client.call(method: "events.record", params: ["events": [.object(future)]])
            }
            var badCustomer = good(0).objectValue ?? [:]
            badCustomer["customerId"] = ""
            await expectRPCError(-32602, param: "params.events[0].customerId") {
                try await app.client.call(method: "events.record", params: ["events": [.object(badCustomer)]])
            }
            await expectRPCError(-32602) {
                try await app.client.call(method: "events.record", params: ["events": [["offerId": "promo.all"]]])
            }
            #expect(try await stored() == 0, "a refused call stores nothing")
            // Exactly 1,000 is fine.
            let thousand = try await app.client.call(
                method: "events.record", params: ["events": .array((0..<1_000).map { good($0) })])
            #expect(thousand["recorded"]?.int64Value == Int64(1_000))

            let range: JSONObject = ["from": "2026-11-19T00:00:00Z", "to": "2026-11-20T00:00:00Z"]
            func asking(_ extra: JSONObject) -> JSONObject {
                var params = range
                for member in extra { params[member.key] = member.value }
                return params
            }
            await expectRPCError(-32602, param: "params.offerId") {
                try await Self.funnel(app.client, asking(["offerId": "no.such.offer"]))
            }
            await expectRPCError(-32602, param: "params.campaignId") {
                try await Self.funnel(app.client, asking(["campaignId": "no-such-campaign"]))
            }
            await expectRPCError(-32602, param: "params.productId") {
                try await Self.funnel(app.client, asking(["productId": "no.such.product"]))
            }
            await expectRPCError(-32602, param: "params.from") {
                try await Self.funnel(app.client, ["from": "2026-11-20T00:00:00Z", "to": "2026-11-19T00:00:00Z"])
            }
            await expectRPCError(-32602, param: "params.bucket") {
                try await Self.funnel(app.client, asking(["bucket": "week"]))
            }
            await expectRPCError(-32602, param: "params.to") {
                try await Self.funnel(
                    app.client, ["from": "2020-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z", "bucket": "hour"])
            }
            await expectRPCError(-32602, param: "params.offerId") {
                try await Self.funnel(app.client, asking(["offerId": "promo.all", "campaignId": "fall"]))
            }
            await expectRPCError(-32602) { try await Self.funnel(app.client, ["from": "2026-11-19T00:00:00Z"]) }
        }
    }

    /// A new API key of the test tenant (rotated: `AppleTenant` keeps the first to itself; its connection stays
    /// authenticated). Call once per test: each call replaces the key before.
    static func apiKey(_ app: AppleTenant) async throws -> String {
        let rotated = try await app.admin.call(method: "tenants.rotateApiKey", params: ["tenant": .string(app.slug)])
        return try #require(rotated["apiKey"]?.stringValue)
    }
}
