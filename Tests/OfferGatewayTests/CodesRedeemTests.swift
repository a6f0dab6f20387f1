import Foundation
import JSONRPC
import Testing

@testable import OfferGateway
@testable import OfferStore

@Suite("codes.* methods")
struct CodesRedeemTests {
    static func date(_ offsetDays: Double) -> JSONValue {
        .string(RFC3339.format(Date().addingTimeInterval(offsetDays * 86_400)) ?? "")
    }

    @Test func redeemNormalisesAndEnforcesLimitsWithTheRightCodes() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "app-a")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "app-a", "campaignId": "spring", "offerId": "code1", "kind": "custom", "code": "SPRING26",
                    "totalLimit": 2, "perCustomerLimit": 1,
                ])
            let app = try await gateways.client(apiKey: key)
            let first = try await app.call(method: "codes.redeem", params: ["code": " spr-ing 26", "customerId": "u1"])
            #expect(first["campaignId"]?.stringValue == "spring")
            #expect(first["offerId"]?.stringValue == "code1")
            #expect(first["productId"]?.stringValue == "p1")
            #expect(first["replayed"]?.boolValue == false)
            let redemptionId = try #require(first["redemptionId"]?.stringValue)
            #expect(UUID(uuidString: redemptionId) != nil)

            func code(_ params: JSONValue, method: String = "codes.redeem") async throws -> Int? {
                try await RedemptionSupport.errorCode { try await app.call(method: method, params: params) }
            }
            #expect(try await code(["code": "SPRING26", "customerId": "u1"]) == -32043)
            #expect(try await code(["code": "NOPE", "customerId": "u1"]) == -32040)
            #expect(try await code(["code": "bad!code", "customerId": "u1"]) == -32040)
            #expect(try await code(["code": " - ", "customerId": "u1"]) == -32602)
            #expect(try await code(["code": "SPRING26", "customerId": ""]) == -32602)
            #expect(try await code(["code": "SPRING26", "customerId": "u2"]) == nil)
            #expect(try await code(["code": "SPRING26", "customerId": "u3"]) == -32041)

            // validate has no side effects and gives the reasons.
            let full = try await app.call(method: "codes.validate", params: ["code": "spring26", "customerId": "u4"])
            #expect(full["valid"]?.boolValue == false)
            #expect(full["reason"]?.stringValue == "code_exhausted")
            let unknown = try await app.call(method: "codes.validate", params: ["code": "zzz", "customerId": "u4"])
            #expect(unknown["valid"]?.boolValue == false)
            #expect(unknown["reason"]?.stringValue == "unknown_code")

            // Rollback gives capacity back and is idempotent.
            let rolled = try await app.call(
                method: "codes.rollback", params: ["redemptionId": .string(redemptionId), "reason": "purchase failed"])
            #expect(rolled["rolledBack"]?.boolValue == true)
            #expect(rolled["alreadyRolledBack"]?.boolValue == false)
            let again = try await app.call(method: "codes.rollback", params: ["redemptionId": .string(redemptionId)])
            #expect(again["rolledBack"]?.boolValue == true)
            #expect(again["alreadyRolledBack"]?.boolValue == true)
            #expect(try await code(["redemptionId": .string(UUID().uuidString)], method: "codes.rollback") == -32004)
            let valid = try await app.call(method: "codes.validate", params: ["code": "spring26", "customerId": "u4"])
            #expect(valid["valid"]?.boolValue == true)
            #expect(valid["productId"]?.stringValue == "p1")
            #expect(try await code(["code": "SPRING26", "customerId": "u4"]) == nil)
            #expect(try await code(["code": "SPRING26", "customerId": "u5"]) == -32041)
            let stats = try await admin.call(
                method: "campaigns.stats", params: ["tenant": "app-a", "campaignId": "spring"])
            #expect(stats["redeemed"]?.int64Value == 2)
            #expect(stats["rolledBack"]?.int64Value == 1)
            #expect(stats["remaining"]?.int64Value == 0)

            // Another tenant cannot see this tenant's code nor roll back its redemptions.
            let otherKey = try await RedemptionSupport.seedTenant(admin, slug: "app-b")
            let other = try await gateways.client(apiKey: otherKey)
            #expect(
                try await RedemptionSupport.errorCode {
                    try await other.call(method: "codes.redeem", params: ["code": "SPRING26", "customerId": "u9"])
                } == -32040)
            #expect(
                try await RedemptionSupport.errorCode {
                    try await other.call(method: "codes.rollback", params: ["redemptionId": .string(redemptionId)])
                } == -32004)
            let db = try gateways.database()
            #expect(
                try await RedemptionRows.read(db, campaignId: "spring")
                    == RedemptionRows(live: 2, rolledBack: 1, counter: 2))
            await db.pool.close()
        }
    }

    @Test func campaignStateAndEligibilityAreEnforced() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "app-a")
            for (id, extra) in [
                ("later", ["startsAt": Self.date(10)]), ("over", ["expiresAt": Self.date(-1)]),
                ("subs", ["eligibility": ["existing"] as JSONValue]),
                ("lapsed", ["eligibility": ["expired"] as JSONValue]),
            ] as [(String, [String: JSONValue])] {
                var params: JSONObject = [
                    "tenant": "app-a", "campaignId": .string(id), "offerId": "code1", "kind": "custom",
                    "code": .string(id.uppercased()),
                ]
                for (k, v) in extra { params[k] = v }
                _ = try await admin.call(method: "campaigns.create", params: .object(params))
            }
            let app = try await gateways.client(apiKey: key)
            // A current subscriber and a new customer.
            _ = try await app.call(
                method: "subscriptions.record",
                params: [
                    "customerId": "sub", "productId": "p1", "transactionId": "t1", "purchaseDate": Self.date(-5),
                    "expiresDate": Self.date(25),
                ])
            func code(_ c: String, _ customer: String) async throws -> Int? {
                try await RedemptionSupport.errorCode {
                    try await app.call(
                        method: "codes.redeem", params: ["code": .string(c), "customerId": .string(customer)])
                }
            }
            #expect(try await code("LATER", "new") == -32042)
            #expect(try await code("OVER", "new") == -32042)
            #expect(try await code("SUBS", "new") == -32020)
            #expect(try await code("LAPSED", "sub") == -32020)
            #expect(try await code("SUBS", "sub") == nil)
            let v = try await app.call(method: "codes.validate", params: ["code": "later", "customerId": "new"])
            #expect(v["reason"]?.stringValue == "campaign_not_started")
            let atStart = try await app.call(
                method: "codes.validate", params: ["code": "later", "customerId": "new", "at": Self.date(11)])
            #expect(atStart["valid"]?.boolValue == true)
            let notEligible = try await app.call(
                method: "codes.validate", params: ["code": "subs", "customerId": "new"])
            #expect(notEligible["reason"]?.stringValue == "not_in_campaign_eligibility")
        }
    }

    @Test func idempotencyKeysReplayTheFirstOutcomeAndRejectOtherParams() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "app-a")
            _ = try await admin.call(
                method: "campaigns.create",
                params: ["tenant": "app-a", "campaignId": "ot", "offerId": "code1", "kind": "oneTime"])
            _ = try await admin.call(
                method: "campaigns.generateCodes", params: ["tenant": "app-a", "campaignId": "ot", "count": 3])
            let page = try await admin.call(method: "campaigns.codes", params: ["tenant": "app-a", "campaignId": "ot"])
            let codes = try #require(page["codes"]?.arrayValue?.compactMap { $0["code"]?.stringValue })
            #expect(codes.count == 3)
            let app = try await gateways.client(apiKey: key)
            let first = try await app.call(
                method: "codes.redeem",
                params: ["code": .string(codes[0]), "customerId": "u1", "idempotencyKey": "k-1"])
            #expect(first["replayed"]?.boolValue == false)
            // Same key, same params (code typed differently): the first outcome, replayed.
            let replay = try await app.call(
                method: "codes.redeem",
                params: ["code": .string(codes[0].lowercased()), "customerId": "u1", "idempotencyKey": "k-1"])
            #expect(replay["replayed"]?.boolValue == true)
            #expect(replay["redemptionId"] == first["redemptionId"])
            // Same key, other params: conflict.
            let conflict = try await RedemptionSupport.errorCode {
                try await app.call(
                    method: "codes.redeem",
                    params: ["code": .string(codes[1]), "customerId": "u1", "idempotencyKey": "k-1"])
            }
            #expect(conflict == -32009)
            // The one-time code is used: another customer gets -32041.
            let used = try await RedemptionSupport.errorCode {
                try await app.call(method: "codes.redeem", params: ["code": .string(codes[0]), "customerId": "u2"])
            }
            #expect(used == -32041)
            // A rolled back one-time code can be redeemed again.
            _ = try await app.call(method: "codes.rollback", params: ["redemptionId": first["redemptionId"] ?? .null])
            let reused = try await app.call(
                method: "codes.redeem", params: ["code": .string(codes[0]), "customerId": "u2"])
            #expect(reused["replayed"]?.boolValue == false)
            let db = try gateways.database()
            #expect(
                try await RedemptionRows.read(db, campaignId: "ot")
                    == RedemptionRows(live: 1, rolledBack: 1, counter: 1))
            let records = try await db.pool.query("SELECT count(*) FROM idempotency_records").scalar(Int64.self)
            #expect(records == 1)
            await db.pool.close()
        }
    }
}
