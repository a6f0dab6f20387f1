import Foundation
import JSONRPC
import Postgres
import Testing

@testable import OfferStore

/// API.md §2: a tenant can never see or touch another tenant's data. Tenants A and B share product ids and
/// customer ids; B also has products and offers A lacks.
@Suite("Tenant isolation")
struct TenantIsolationTests {
    static let bOnlyProduct: JSONValue = [
        "id": "b.only", "groupId": "premium", "period": "P1W", "price": "0.99", "currency": "USD", "level": 3,
    ]
    static let bOnlyOffer: JSONValue = [
        "id": "b.only.promo", "type": "promotional", "productId": "monthly", "paymentMode": "payUpFront",
        "period": "P1M", "price": "0.49",
    ]

    @Test("with A's key, every tenant method on B's tenant, products, offers and keys gets -32002/-32004, no effect")
    func isolation() async throws {
        try await TestGateway.with { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            let keyA = try await gw.createTenant("tenant-a", admin: admin)
            let keyB = try await gw.createTenant("tenant-b", admin: admin)
            try await gw.upsertStandardCatalog(tenant: "tenant-a", admin: admin)
            try await gw.upsertStandardCatalog(
                tenant: "tenant-b", admin: admin, extraProducts: [Self.bOnlyProduct], extraOffers: [Self.bOnlyOffer])
            try await gw.importKey(tenant: "tenant-a", keyId: "KEYA", admin: admin)
            try await gw.importKey(tenant: "tenant-b", keyId: "KEYB", admin: admin)
            let b = try await gw.tenant(keyB)
            defer { b.close() }
            // the same customer id at B: an at-risk subscriber, eligible for promotional offers there
            for (tx, product) in [("shared-tx", "monthly"), ("b-tx", "b.only")] {
                _ = try await b.call(
                    method: "subscriptions.record",
                    params: [
                        "customerId": "shared-customer", "productId": .string(product), "transactionId": .string(tx),
                        "purchaseDate": "2026-11-01T00:00:00Z", "expiresDate": "2026-12-01T00:00:00Z",
                        "autoRenew": false,
                    ])
            }
            _ = try await b.call(
                method: "offers.sign",
                params: [
                    "customerId": "shared-customer", "productId": "monthly", "offerId": "b.only.promo", "format": "v1",
                ])
            let idB = try await gw.tenantId("tenant-b")
            let before = try await Self.snapshot(gw, b: b, tenant: idB)

            let a = try await gw.tenant(keyA)
            defer { a.close() }
            let record: JSONObject = [
                "customerId": "shared-customer", "productId": "monthly", "transactionId": "a-tx",
                "purchaseDate": "2026-11-01T00:00:00Z", "expiresDate": "2026-12-01T00:00:00Z",
            ]
            let tenantCalls: [(String, JSONObject)] = [
                ("catalog.get", [:]),
                ("subscriptions.record", record),
                ("customers.get", ["customerId": "shared-customer"]),
                ("offers.eligibility", ["customerId": "shared-customer", "productId": "monthly"]),
                ("offers.best", ["customerId": "shared-customer", "productId": "monthly"]),
                ("offers.best", ["customerId": "shared-customer", "groupId": "premium"]),
                (
                    "offers.sign",
                    [
                        "customerId": "shared-customer", "productId": "monthly", "offerId": "promo.half",
                        "format": "v1",
                    ]
                ),
                (
                    "offers.introEligibility",
                    [
                        "customerId": "shared-customer", "productId": "monthly",
                        "transactionId": "shared-tx",
                    ]
                ),
            ]
            // 1. naming B as the tenant: -32002, whatever else is asked
            for (method, params) in tenantCalls {
                var p = params
                p["tenant"] = "tenant-b"
                let error = await expectRPCError(-32002) { try await a.call(method: method, params: .object(p)) }
                #expect(error?.reason == "other_tenant", "\(method)")
            }
            // a tenant param of the wrong type is a params error, its own slug is fine
            await expectRPCError(-32602, param: "params.tenant") {
                try await a.call(method: "catalog.get", params: ["tenant": 7])
            }
            #expect(
                try await a.call(method: "catalog.get", params: ["tenant": "tenant-a"])["products"]?.arrayValue?.count
                    == 2)
            // 2. B-only products and offers do not exist for A: -32004
            let bOnly: [(String, JSONObject)] = [
                ("subscriptions.record", record.merging(["productId": "b.only", "transactionId": "a-tx-2"])),
                ("offers.eligibility", ["customerId": "shared-customer", "productId": "b.only"]),
                ("offers.best", ["customerId": "shared-customer", "productId": "b.only"]),
                (
                    "offers.sign",
                    [
                        "customerId": "shared-customer", "productId": "b.only", "offerId": "promo.half",
                        "format": "v1",
                    ]
                ),
                (
                    "offers.sign",
                    [
                        "customerId": "shared-customer", "productId": "monthly", "offerId": "b.only.promo",
                        "format": "v1",
                    ]
                ),
                (
                    "offers.introEligibility",
                    [
                        "customerId": "shared-customer", "productId": "b.only",
                        "transactionId": "b-tx",
                    ]
                ),
            ]
            for (method, params) in bOnly {
                await expectRPCError(-32004) { try await a.call(method: method, params: .object(params)) }
            }
            // 3. admin methods on B (keys, catalog, api key): -32002 for a tenant key
            for (method, params) in [
                ("keys.list", ["tenant": "tenant-b"]), ("keys.retire", ["tenant": "tenant-b", "keyId": "KEYB"]),
                (
                    "keys.import",
                    [
                        "tenant": "tenant-b", "keyId": "EVIL",
                        "privateKeyPem": .string(try await SigningKeyFactory.pem()),
                    ]
                ),
                ("tenants.rotateApiKey", ["tenant": "tenant-b"]),
                ("catalog.upsert", ["tenant": "tenant-b", "products": []]),
                ("catalog.import", ["tenant": "tenant-b", "storekit": ["subscriptionGroups": []]]),
                ("tenants.list", [:]), ("tenants.create", ["slug": "x-evil", "bundleId": "x"]),
            ] as [(String, JSONObject)] {
                await expectRPCError(-32002) { try await a.call(method: method, params: .object(params)) }
            }
            // 4. with the same ids, A sees only its own data
            let customer = try await a.call(method: "customers.get", params: ["customerId": "shared-customer"])
            #expect(customer["groups"]?[0]?["state"]?.stringValue == "never")
            let catalog = try await a.call(method: "catalog.get", params: [:])
            #expect(!catalog.text.contains("b.only"))
            let best = try await a.call(
                method: "offers.best", params: ["customerId": "shared-customer", "groupId": "premium"])
            #expect(!best.text.contains("b.only"))
            #expect(best["offer"]?["type"]?.stringValue == "introductory")
            await expectRPCError(-32020) {
                try await a.call(
                    method: "offers.sign",
                    params: [
                        "customerId": "shared-customer", "productId": "monthly", "offerId": "promo.half",
                        "format": "v1",
                    ])
            }
            // A's own writes land at A only
            _ = try await a.call(method: "subscriptions.record", params: .object(record))
            #expect(try await Self.snapshot(gw, b: b, tenant: idB) == before)
            let keysB = try await admin.call(method: "keys.list", params: ["tenant": "tenant-b"])
            #expect(keysB["keys"]?.arrayValue?.map { $0["keyId"]?.stringValue } == ["KEYB"])
            #expect(keysB["keys"]?[0]?["state"]?.stringValue == "active")
            // B's key still works
            let b2 = try await gw.tenant(keyB)
            b2.close()
        }
    }

    /// B's rows and B's own view of its data.
    static func snapshot(_ gw: TestGateway, b: RPCClient, tenant: UUID) async throws -> [String] {
        var out: [String] = try await HostileInputTests.rowCounts(gw, tenant: tenant).map(String.init)
        out.append(try await b.call(method: "catalog.get", params: [:]).text)
        out.append(try await b.call(method: "customers.get", params: ["customerId": "shared-customer"]).text)
        let rows = try await gw.database.pool.query(
            "SELECT transaction_id, auto_renew::text, expires_date::text FROM subscription_transactions WHERE tenant_id = \(tenant) ORDER BY 1"
        )
        for row in rows {
            let (tx, renew, expires) = try row.decode(String.self, String.self, String.self)
            out.append("\(tx) \(renew) \(expires)")
        }
        return out
    }
}

extension JSONObject {
    func merging(_ other: JSONObject) -> JSONObject {
        var copy = self
        for member in other { copy[member.key] = member.value }
        return copy
    }
}
