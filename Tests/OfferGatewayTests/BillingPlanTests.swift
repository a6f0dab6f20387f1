import Foundation
import JSONRPC
import OfferCrypto
import Testing

@testable import OfferGateway

/// API.md §3 billing plans end to end: the catalog stores an offer's plan, and the deciding methods consider only
/// the offers of the plan they are given.
@Suite("Billing plans through the gateway", .serialized)
struct BillingPlanGatewayTests {
    /// Two promotional offers on `yearly`: `yearly.up` for the up-front plan, `yearly.mo` (the larger saving) for
    /// the monthly plan; `intro.yearly` has no plan.
    static let planOffers: [JSONValue] = [
        [
            "id": "yearly.up", "type": "promotional", "productId": "yearly", "paymentMode": "payUpFront",
            "period": "P1Y", "price": "29.99", "billingPlan": "upFront",
        ],
        [
            "id": "yearly.mo", "type": "promotional", "productId": "yearly", "paymentMode": "payUpFront",
            "period": "P1Y", "price": "19.99", "billingPlan": "monthly",
        ],
    ]

    /// A tenant with the standard catalog plus `planOffers`, a signing key, and an at-risk customer `c1`.
    static func setUp(_ gw: TestGateway) async throws -> (admin: RPCClient, app: RPCClient) {
        let admin = try await gw.admin()
        let apiKey = try await gw.createTenant("plans", admin: admin)
        try await gw.upsertStandardCatalog(tenant: "plans", admin: admin, extraOffers: planOffers)
        try await gw.importKey(tenant: "plans", admin: admin)
        let app = try await gw.tenant(apiKey)
        _ = try await app.call(
            method: "subscriptions.record",
            params: [
                "customerId": "c1", "productId": "monthly", "transactionId": "t1",
                "purchaseDate": "2026-11-01T00:00:00Z", "expiresDate": "2026-12-01T00:00:00Z", "autoRenew": false,
            ])
        return (admin, app)
    }

    static func ids(_ list: JSONValue?) -> [String] {
        (list?.arrayValue ?? []).compactMap { $0["offerId"]?.stringValue }
    }

    @Test("catalog.upsert stores billingPlan, catalog.get returns it only where set; bad values are -32602")
    func catalogRoundTrip() async throws {
        try await TestGateway.with { gw in
            let (admin, app) = try await Self.setUp(gw)
            defer {
                admin.close()
                app.close()
            }
            let offers = try #require(try await app.call(method: "catalog.get", params: [:])["offers"]?.arrayValue)
            let plans = Dictionary(
                uniqueKeysWithValues: offers.map {
                    ($0["id"]?.stringValue ?? "", $0["billingPlan"]?.stringValue ?? "-")
                })
            #expect(plans["yearly.up"] == "upFront")
            #expect(plans["yearly.mo"] == "monthly")
            #expect(plans["intro.yearly"] == "-")
            #expect(plans["promo.half"] == "-")
            var bad = Self.planOffers[0].objectValue ?? [:]
            bad["billingPlan"] = "BILLED_UPFRONT"
            await expectRPCError(-32602, param: "params.offers[0].billingPlan") {
                try await admin.call(method: "catalog.upsert", params: ["tenant": "plans", "offers": [.object(bad)]])
            }
            // Re-upserting without a plan clears it: the row says what the last upsert said.
            var cleared = Self.planOffers[0].objectValue ?? [:]
            cleared["billingPlan"] = nil
            _ = try await admin.call(
                method: "catalog.upsert", params: ["tenant": "plans", "offers": [.object(cleared)]])
            let after = try #require(try await app.call(method: "catalog.get", params: [:])["offers"]?.arrayValue)
            #expect(after.first { $0["id"]?.stringValue == "yearly.up" }?["billingPlan"] == nil)
        }
    }

    @Test("offers.best and offers.eligibility per plan; remembered answers never cross plans")
    func decisions() async throws {
        try await TestGateway.with { gw in
            let (admin, app) = try await Self.setUp(gw)
            defer {
                admin.close()
                app.close()
            }
            func best(_ plan: String?) async throws -> JSONValue {
                var params: JSONObject = ["customerId": "c1", "productId": "yearly"]
                if let plan { params["billingPlan"] = .string(plan) }
                return try await app.call(method: "offers.best", params: .object(params))
            }
            // Twice each, interleaved: the second round is answered from the memo and must stay per plan.
            for _ in 0..<2 {
                let any = try await best(nil)
                #expect(any["offer"]?["offerId"]?.stringValue == "yearly.mo")
                #expect(Self.ids(any["considered"]) == ["yearly.mo", "yearly.up", "intro.yearly"])
                let up = try await best("upFront")
                #expect(up["offer"]?["offerId"]?.stringValue == "yearly.up")
                #expect(Self.ids(up["considered"]) == ["yearly.up", "intro.yearly"])
                let monthly = try await best("monthly")
                #expect(monthly["offer"]?["offerId"]?.stringValue == "yearly.mo")
                #expect(Self.ids(monthly["considered"]) == ["yearly.mo", "intro.yearly"])
            }
            let group = try await app.call(
                method: "offers.best", params: ["customerId": "c1", "groupId": "premium", "billingPlan": "upFront"])
            #expect(!Self.ids(group["considered"]).contains("yearly.mo"))

            let eligibility = try await app.call(
                method: "offers.eligibility",
                params: ["customerId": "c1", "productId": "yearly", "billingPlan": "upFront"])
            #expect(Self.ids(eligibility["offers"]) == ["intro.yearly", "yearly.up"])
            let all = try await app.call(
                method: "offers.eligibility", params: ["customerId": "c1", "productId": "yearly"])
            #expect(Self.ids(all["offers"]) == ["intro.yearly", "yearly.mo", "yearly.up"])

            for bad in ["annual", "UPFRONT", ""] {
                await expectRPCError(-32602, param: "params.billingPlan") {
                    try await app.call(
                        method: "offers.best",
                        params: ["customerId": "c1", "productId": "yearly", "billingPlan": .string(bad)])
                }
                await expectRPCError(-32602, param: "params.billingPlan") {
                    try await app.call(
                        method: "offers.eligibility",
                        params: ["customerId": "c1", "productId": "yearly", "billingPlan": .string(bad)])
                }
            }
        }
    }

    @Test("offers.sign refuses (-32020) an offer of another plan, signs it for its own plan or with none")
    func sign() async throws {
        try await TestGateway.with { gw in
            let (admin, app) = try await Self.setUp(gw)
            defer {
                admin.close()
                app.close()
            }
            func sign(_ offer: String, _ plan: String?) async throws -> JSONValue {
                var params: JSONObject = [
                    "customerId": "c1", "productId": "yearly", "offerId": .string(offer), "format": "v1",
                ]
                if let plan { params["billingPlan"] = .string(plan) }
                return try await app.call(method: "offers.sign", params: .object(params))
            }
            let refused = await expectRPCError(-32020) { try await sign("yearly.mo", "upFront") }
            #expect(refused?.data?["reasons"] == ["billing_plan_mismatch"])
            #expect(try await sign("yearly.mo", "monthly")["offerId"]?.stringValue == "yearly.mo")
            #expect(try await sign("yearly.mo", nil)["offerId"]?.stringValue == "yearly.mo")
            #expect(try await sign("yearly.up", "upFront")["offerId"]?.stringValue == "yearly.up")
            await expectRPCError(-32602, param: "params.billingPlan") { try await sign("yearly.up", "weekly") }
            // Nothing was recorded for the refusals: three signatures in the ledger.
            let tenant = try await gw.tenantId("plans")
            #expect(try await gw.count("SELECT count(*)::int8 FROM issued_signatures WHERE tenant_id = \(tenant)") == 3)
        }
    }

    @Test("catalog.import reads an offer's billingPlanType; an unknown one is skipped with its path")
    func storeKitImport() async throws {
        try await TestGateway.with { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            let apiKey = try await gw.createTenant("sk-plans", admin: admin)
            func promo(_ id: String, _ plan: JSONValue?) -> JSONValue {
                var object: JSONObject = [
                    "offerID": .string(id), "paymentMode": "payUpFront", "subscriptionPeriod": "P1Y",
                    "numberOfPeriods": 1, "displayPrice": "29.99",
                ]
                if let plan { object["billingPlanType"] = plan }
                return .object(object)
            }
            let storekit: JSONValue = [
                "identifier": "plans", "version": ["major": 5, "minor": 0],
                "billingPlans": [["billingPlanType": "UPFRONT"], ["billingPlanType": "MONTHLY"]],
                "subscriptionGroups": [
                    [
                        "id": "g1", "name": "Plans",
                        "subscriptions": [
                            [
                                "productID": "yearly", "type": "RecurringSubscription",
                                "recurringSubscriptionPeriod": "P1Y", "displayPrice": "39.99", "groupNumber": 1,
                                "adHocOffers": [
                                    promo("up", "UPFRONT"), promo("billed", "BILLED_UPFRONT"), promo("mo", "MONTHLY"),
                                    promo("none", nil), promo("odd", "QUARTERLY"), promo("num", 3),
                                ],
                            ]
                        ],
                    ]
                ],
            ]
            let summary = try await admin.call(
                method: "catalog.import", params: ["tenant": "sk-plans", "storekit": storekit])
            #expect(summary["imported"]?["offers"] == 4, "\(summary.text)")
            let base = "params.storekit.subscriptionGroups[0].subscriptions[0].adHocOffers"
            let skipped = (summary["skipped"]?.arrayValue ?? []).compactMap { $0["path"]?.stringValue }
            #expect(skipped == ["\(base)[4].billingPlanType", "\(base)[5].billingPlanType"])
            let app = try await gw.tenant(apiKey)
            defer { app.close() }
            let offers = try #require(try await app.call(method: "catalog.get", params: [:])["offers"]?.arrayValue)
            let plans = Dictionary(
                uniqueKeysWithValues: offers.map {
                    ($0["id"]?.stringValue ?? "", $0["billingPlan"]?.stringValue ?? "-")
                })
            #expect(plans == ["up": "upFront", "billed": "upFront", "mo": "monthly", "none": "-"])
        }
    }

    @Test("The plan from Apple's renewal info (billingPlanType) decides when the client names none")
    func planFromAppleData() async throws {
        try await AppleDataTests.withApple(extraOffers: Self.planOffers) { app in
            /// An at-risk customer whose latest renewal info says `plan` (nil: no billingPlanType).
            func customer(_ id: String, _ plan: String?, token: String? = nil, signed: Date = days(-1)) async throws
                -> String
            {
                let token = token ?? UUID().uuidString.lowercased()
                var renewal = app.payloads.renewal(original: id, autoRenewStatus: 0, signed: signed).objectValue ?? [:]
                if let plan { renewal["billingPlanType"] = .string(plan) }
                try await app.transactions(
                    [
                        app.payloads.transaction(
                            id: id, purchase: days(-27), expires: days(3), token: token, signed: days(-27))
                    ],
                    renewals: [.object(renewal)])
                return token
            }
            func best(_ customer: String, _ plan: String? = nil) async throws -> JSONValue {
                var params: JSONObject = ["customerId": .string(customer), "productId": "yearly"]
                if let plan { params["billingPlan"] = .string(plan) }
                return try await app.client.call(method: "offers.best", params: .object(params))
            }
            let monthly = try await customer("8001", "MONTHLY")
            #expect(try await app.group(monthly)["billingPlan"]?.stringValue == "monthly")
            #expect(Self.ids(try await best(monthly)["considered"]) == ["yearly.mo", "intro.yearly"])
            // The client's plan wins over Apple's.
            #expect(try await best(monthly, "upFront")["offer"]?["offerId"]?.stringValue == "yearly.up")
            let eligibility = try await app.client.call(
                method: "offers.eligibility", params: ["customerId": .string(monthly), "productId": "yearly"])
            #expect(Self.ids(eligibility["offers"]) == ["intro.yearly", "yearly.mo"])
            let refused = await expectRPCError(-32020) {
                try await app.client.call(
                    method: "offers.sign",
                    params: [
                        "customerId": .string(monthly), "productId": "yearly", "offerId": "yearly.up", "format": "v1",
                    ])
            }
            #expect(refused?.data?["reasons"] == ["billing_plan_mismatch"])

            let upFront = try await customer("8002", "BILLED_UPFRONT")
            #expect(try await app.group(upFront)["billingPlan"]?.stringValue == "upFront")
            #expect(try await best(upFront)["offer"]?["offerId"]?.stringValue == "yearly.up")

            let unknown = try await customer("8003", nil)
            #expect(try await app.group(unknown)["billingPlan"] == .null)
            #expect(Self.ids(try await best(unknown)["considered"]) == ["yearly.mo", "yearly.up", "intro.yearly"])

            // A newer renewal info moving the chain to the up-front plan: the remembered answer is not served again.
            _ = try await customer("8001", "BILLED_UPFRONT", token: monthly, signed: TestGateway.now)
            #expect(try await app.group(monthly)["billingPlan"]?.stringValue == "upFront")
            #expect(try await best(monthly)["offer"]?["offerId"]?.stringValue == "yearly.up")
        }
    }
}
