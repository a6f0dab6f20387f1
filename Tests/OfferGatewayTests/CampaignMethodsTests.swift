import Foundation
import JSONRPC
import OfferDomain
import Synchronization
import Testing

@testable import OfferGateway
@testable import OfferStore

@Suite("campaigns.* methods")
struct CampaignMethodsTests {
    @Test func createCustomCampaignNormalisesTheCodeAndWarnsAboutAppleCaps() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            _ = try await RedemptionSupport.seedTenant(admin, slug: "app-a")
            let created = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "app-a", "campaignId": "spring", "offerId": "code1", "kind": "custom",
                    "code": " spring-2026 ", "totalLimit": 2_000_000,
                ])
            #expect(created["code"]?.stringValue == "SPRING2026")
            #expect(created["kind"]?.stringValue == "custom")
            #expect(created["perCustomerLimit"]?.int64Value == 1)
            #expect(created["state"]?.stringValue == "active")
            #expect(created["eligibility"] == ["new", "existing", "expired"])
            let warnings = try #require(created["warnings"]?.arrayValue)
            #expect(warnings.count == 1)
            #expect(warnings.first?.stringValue?.contains("1,000,000") == true)

            // A oneTime campaign without an expiry within 6 months gets the validity warning.
            let oneTime = try await admin.call(
                method: "campaigns.create",
                params: ["tenant": "app-a", "campaignId": "ot", "offerId": "code1", "kind": "oneTime"])
            #expect(oneTime["warnings"]?.arrayValue?.count == 1)
            let shortLived = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "app-a", "campaignId": "ot2", "offerId": "code1", "kind": "oneTime",
                    "expiresAt": .string(RFC3339.format(Date().addingTimeInterval(86_400 * 30)) ?? ""),
                ])
            #expect(shortLived["warnings"] == [])

            // Conflicts: same id, same code (in any spelling); unknown offer; bad params.
            let again = try await RedemptionSupport.errorCode {
                try await admin.call(
                    method: "campaigns.create",
                    params: ["tenant": "app-a", "campaignId": "spring", "offerId": "code1", "kind": "oneTime"])
            }
            #expect(again == -32009)
            let sameCode = try await RedemptionSupport.errorCode {
                try await admin.call(
                    method: "campaigns.create",
                    params: [
                        "tenant": "app-a", "campaignId": "other", "offerId": "code1", "kind": "custom",
                        "code": "Spring2026",
                    ])
            }
            #expect(sameCode == -32009)
            let unknownOffer = try await RedemptionSupport.errorCode {
                try await admin.call(
                    method: "campaigns.create",
                    params: ["tenant": "app-a", "campaignId": "x", "offerId": "nope", "kind": "oneTime"])
            }
            #expect(unknownOffer == -32004)
            for bad: JSONValue in [
                ["tenant": "app-a", "campaignId": "x", "offerId": "code1", "kind": "weird"],
                ["tenant": "app-a", "campaignId": "x", "offerId": "code1", "kind": "custom"],
                ["tenant": "app-a", "campaignId": "x", "offerId": "code1", "kind": "oneTime", "code": "ABC"],
                ["tenant": "app-a", "campaignId": "x", "offerId": "code1", "kind": "oneTime", "totalLimit": 0],
                ["tenant": "app-a", "campaignId": "x", "offerId": "code1", "kind": "oneTime", "eligibility": ["vip"]],
                ["tenant": "app-a", "campaignId": "x", "offerId": "code1", "kind": "oneTime", "eligibility": []],
            ] {
                let code = try await RedemptionSupport.errorCode {
                    try await admin.call(method: "campaigns.create", params: bad)
                }
                #expect(code == -32602, "\(bad)")
            }
            // A tenant key cannot call admin methods.
            let b = try await RedemptionSupport.seedTenant(admin, slug: "app-b")
            let tenant = try await gateways.client(apiKey: b)
            let forbidden = try await RedemptionSupport.errorCode {
                try await tenant.call(method: "campaigns.list", params: ["tenant": "app-b"])
            }
            #expect(forbidden == -32002)
            // Two tenants may own the same code.
            let shared = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "app-b", "campaignId": "spring", "offerId": "code1", "kind": "custom",
                    "code": "SPRING2026",
                ])
            #expect(shared["code"]?.stringValue == "SPRING2026")
        }
    }

    @Test func generateCodesPagingStatsListAndDeactivate() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "app-a")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "app-a", "campaignId": "ot", "offerId": "code1", "kind": "oneTime", "totalLimit": 1000,
                ])
            let generated = try await admin.call(
                method: "campaigns.generateCodes",
                params: ["tenant": "app-a", "campaignId": "ot", "count": 2500, "pattern": "WIN-####-####"])
            #expect(generated["generated"]?.int64Value == 2500)

            var codes: [String] = []
            var after: JSONValue = .null
            repeat {
                let page = try await admin.call(
                    method: "campaigns.codes",
                    params: ["tenant": "app-a", "campaignId": "ot", "after": after, "limit": 1000])
                let items = try #require(page["codes"]?.arrayValue)
                codes += items.compactMap { $0["code"]?.stringValue }
                #expect(items.allSatisfy { $0["state"]?.stringValue == "available" && $0["redeemedAt"] == .null })
                after = page["next"] ?? .null
            } while !after.isNull
            #expect(codes.count == 2500)
            #expect(Set(codes).count == 2500)
            #expect(codes == codes.sorted())
            let alphabet = Set(CodeGenerator.alphabet)
            for code in codes {
                #expect(code.hasPrefix("WIN") && code.utf8.count == 11)
                #expect(code.utf8.dropFirst(3).allSatisfy { alphabet.contains($0) })
            }

            // Redeem one code, then see it in the listing and the stats.
            let tenant = try await gateways.client(apiKey: key)
            let redeemed = try await tenant.call(
                method: "codes.redeem", params: ["code": .string(codes[7].lowercased()), "customerId": "cust-1"])
            #expect(redeemed["campaignId"]?.stringValue == "ot")
            let page = try await admin.call(
                method: "campaigns.codes",
                params: ["tenant": "app-a", "campaignId": "ot", "after": .string(codes[6]), "limit": 2])
            #expect(page["codes"]?[0]?["code"]?.stringValue == codes[7])
            #expect(page["codes"]?[0]?["state"]?.stringValue == "redeemed")
            #expect(page["codes"]?[0]?["redeemedAt"]?.stringValue != nil)
            #expect(page["codes"]?[1]?["state"]?.stringValue == "available")

            let stats = try await admin.call(
                method: "campaigns.stats", params: ["tenant": "app-a", "campaignId": "ot"])
            #expect(stats["totalLimit"]?.int64Value == 1000)
            #expect(stats["redeemed"]?.int64Value == 1)
            #expect(stats["remaining"]?.int64Value == 999)
            #expect(stats["rolledBack"]?.int64Value == 0)
            #expect(stats["codesGenerated"]?.int64Value == 2500)
            #expect(stats["codesRedeemed"]?.int64Value == 1)

            // A custom campaign cannot generate codes; an unknown one is not found; a too-short pattern is refused.
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "app-a", "campaignId": "vanity", "offerId": "code1", "kind": "custom", "code": "HELLO",
                ])
            let custom = try await RedemptionSupport.errorCode {
                try await admin.call(
                    method: "campaigns.generateCodes", params: ["tenant": "app-a", "campaignId": "vanity", "count": 5])
            }
            #expect(custom == -32009)
            let unknown = try await RedemptionSupport.errorCode {
                try await admin.call(method: "campaigns.stats", params: ["tenant": "app-a", "campaignId": "nope"])
            }
            #expect(unknown == -32004)
            let short = try await RedemptionSupport.errorCode {
                try await admin.call(
                    method: "campaigns.generateCodes",
                    params: ["tenant": "app-a", "campaignId": "ot", "count": 100_000, "pattern": "####"])
            }
            #expect(short == -32602)

            let list = try await admin.call(method: "campaigns.list", params: ["tenant": "app-a"])
            #expect(list["campaigns"]?.arrayValue?.compactMap { $0["campaignId"]?.stringValue } == ["ot", "vanity"])

            let deactivated = try await admin.call(
                method: "campaigns.deactivate", params: ["tenant": "app-a", "campaignId": "vanity"])
            #expect(deactivated["state"]?.stringValue == "deactivated")
            let firstTime = deactivated["deactivatedAt"]
            let again = try await admin.call(
                method: "campaigns.deactivate", params: ["tenant": "app-a", "campaignId": "vanity"])
            #expect(again["deactivatedAt"] == firstTime)
            let refused = try await RedemptionSupport.errorCode {
                try await tenant.call(method: "codes.redeem", params: ["code": "hello", "customerId": "cust-1"])
            }
            #expect(refused == -32042)
        }
    }

    @Test func generatingCodesSendsProgressForLargeCounts() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            _ = try await RedemptionSupport.seedTenant(admin, slug: "app-a")
            _ = try await admin.call(
                method: "campaigns.create",
                params: ["tenant": "app-a", "campaignId": "ot", "offerId": "code1", "kind": "oneTime"])
            let seen = RedemptionTestLog<Int>()
            admin.onNotification { note in
                if note.method == "campaigns.generateCodes.progress",
                    let made = note.params?["generated"]?.int64Value
                {
                    seen.append(Int(made))
                }
            }
            let generated = try await admin.call(
                method: "campaigns.generateCodes", params: ["tenant": "app-a", "campaignId": "ot", "count": 100_000])
            #expect(generated["generated"]?.int64Value == 100_000)
            let progress = seen.value
            #expect(progress.count >= 2)
            #expect(progress.last == 100_000)
            #expect(progress == progress.sorted())
            let db = try gateways.database()
            let stored = try await db.pool.query(
                "SELECT count(DISTINCT code) FROM offer_codes WHERE campaign_id = 'ot'"
            )
            .scalar(Int64.self)
            #expect(stored == 100_000)
            await db.pool.close()
        }
    }
}

/// A lock-protected list for test callbacks.
final class RedemptionTestLog<Element: Sendable>: Sendable {
    private let items = Mutex<[Element]>([])
    var value: [Element] { items.withLock { $0 } }
    func append(_ item: Element) { items.withLock { $0.append(item) } }
}
