import Foundation
import OfferDomain
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// The repositories against a real PostgreSQL: conflicts, not-found, idempotence and tenant scoping.
@Suite("OfferStore repositories")
struct RepositoryTests {
    static func withStore(maxConnections: Int = 4, _ body: (OfferDatabase) async throws -> Void) async throws {
        try await TestDatabase.with { configuration in
            let database = OfferDatabase(
                pool: PostgresPool(configuration: configuration, maxConnections: maxConnections))
            try await database.migrate()
            do {
                try await body(database)
            } catch {
                await database.pool.close()
                throw error
            }
            await database.pool.close()
        }
    }

    static func key(_ lookup: String) -> StoredApiKey {
        StoredApiKey(lookup: lookup, hash: Array(repeating: UInt8(lookup.utf8.count), count: 32))
    }

    /// A tenant `slug` whose catalog has one monthly product and one offer-code offer `code1` for campaigns.
    static func tenantWithCodeOffer(_ db: OfferDatabase, slug: String) async throws -> UUID {
        let tenant = try await db.tenants.create(
            slug: slug, bundleId: "com.\(slug)", name: nil, apiKey: key(String((slug + "lookup000000").prefix(12))))
        let product = Product(
            id: "monthly", groupId: "g", period: try SubscriptionPeriod.parse("P1M"),
            price: try Money("4.99", currency: "USD"), level: 1)
        let offer = Offer(
            id: "code1", type: .code, productId: "monthly", paymentMode: .freeTrial,
            period: try SubscriptionPeriod.parse("P1M"))
        try await db.catalog.upsert(
            tenant: tenant.id, groups: [SubscriptionGroup(id: "g", name: "G")], products: [product],
            offers: [offer], actor: "admin")
        return tenant.id
    }

    @Test("tenants: slug conflict, API key lookup, rotation revokes the old key")
    func tenants() async throws {
        try await Self.withStore { db in
            let tenant = try await db.tenants.create(
                slug: "acme", bundleId: "com.acme", name: nil, apiKey: Self.key("aaaaaaaaaaaa"))
            do {
                _ = try await db.tenants.create(
                    slug: "acme", bundleId: "x", name: nil, apiKey: Self.key("bbbbbbbbbbbb"))
                Issue.record("a taken slug must conflict")
            } catch StoreError.conflict {}
            #expect(try await db.tenants.find(slug: "acme") == tenant)
            #expect(try await db.tenants.find(slug: "ghost") == nil)
            #expect(try await db.tenants.findApiKey(lookup: "aaaaaaaaaaaa")?.tenant == tenant)
            try await db.tenants.rotateApiKey(tenant: tenant.id, newKey: Self.key("cccccccccccc"))
            #expect(try await db.tenants.findApiKey(lookup: "aaaaaaaaaaaa") == nil)
            #expect(try await db.tenants.findApiKey(lookup: "cccccccccccc")?.tenant.slug == "acme")
            #expect(try await db.tenants.list().map(\.slug) == ["acme"])
        }
    }

    @Test("signing keys: import makes the new key active and the old one standby; retire; conflicts")
    func signingKeys() async throws {
        try await Self.withStore { db in
            let tenant = try await db.tenants.create(
                slug: "acme", bundleId: "com.acme", name: nil, apiKey: Self.key("aaaaaaaaaaaa"))
            let other = try await db.tenants.create(
                slug: "other", bundleId: "com.o", name: nil, apiKey: Self.key("dddddddddddd"))
            for keyId in ["K1", "K2"] {
                try await db.signingKeys.importKey(
                    tenant: tenant.id, keyId: keyId, issuerId: nil, sealedPrivateKey: [1, 2, 3], masterKeyId: "m",
                    publicKeyPEM: "pem")
            }
            #expect(try await db.signingKeys.list(tenant: tenant.id).map(\.state) == [.standby, .active])
            #expect(try await db.signingKeys.active(tenant: tenant.id)?.keyId == "K2")
            do {
                try await db.signingKeys.importKey(
                    tenant: tenant.id, keyId: "K1", issuerId: nil, sealedPrivateKey: [1], masterKeyId: "m",
                    publicKeyPEM: "p")
                Issue.record("a taken key id must conflict")
            } catch StoreError.conflict {}
            // the same key id at another tenant is fine, and retiring is scoped to the tenant
            try await db.signingKeys.importKey(
                tenant: other.id, keyId: "K2", issuerId: nil, sealedPrivateKey: [9], masterKeyId: "m", publicKeyPEM: "p"
            )
            try await db.signingKeys.retire(tenant: tenant.id, keyId: "K2")
            #expect(try await db.signingKeys.active(tenant: tenant.id) == nil)
            #expect(try await db.signingKeys.active(tenant: other.id)?.keyId == "K2")
            do {
                try await db.signingKeys.retire(tenant: tenant.id, keyId: "nope")
                Issue.record("retiring an unknown key must be not found")
            } catch StoreError.notFound {}
        }
    }

    @Test("subscriptions: idempotent on transaction id, unknown product is not found, scoped per tenant")
    func subscriptions() async throws {
        try await Self.withStore { db in
            let a = try await db.tenants.create(
                slug: "tenant-a", bundleId: "a", name: nil, apiKey: Self.key("aaaaaaaaaaaa"))
            let b = try await db.tenants.create(
                slug: "tenant-b", bundleId: "b", name: nil, apiKey: Self.key("bbbbbbbbbbbb"))
            let product = Product(
                id: "monthly", groupId: "g", period: try SubscriptionPeriod.parse("P1M"),
                price: try Money("4.99", currency: "USD"), level: 1)
            for tenant in [a, b] {
                try await db.catalog.upsert(
                    tenant: tenant.id, groups: [SubscriptionGroup(id: "g", name: "G")], products: [product], offers: [],
                    actor: "admin")
            }
            let start = Date(timeIntervalSince1970: 1_790_000_000)
            var t = Transaction(
                transactionId: "t1", productId: "monthly", purchaseDate: start, expiresDate: start + 30 * 86_400)
            try await db.subscriptions.record(tenant: a.id, customerId: "c", t)
            t.autoRenew = false
            try await db.subscriptions.record(tenant: a.id, customerId: "c", t)
            let stored = try await db.customerRecords.records(tenant: a.id, customerId: "c").recorded
            #expect(stored.count == 1)
            #expect(stored.first?.autoRenew == false)
            #expect(stored.first?.purchaseDate == start)
            #expect(try await db.customerRecords.records(tenant: b.id, customerId: "c").recorded.isEmpty)
            t.productId = "ghost"
            t.transactionId = "t2"
            do {
                try await db.subscriptions.record(tenant: a.id, customerId: "c", t)
                Issue.record("an unknown product must be not found")
            } catch StoreError.notFound {}
            let catalog = try await db.catalog.load(tenant: b.id)
            #expect(catalog.products.map(\.id) == ["monthly"])
            #expect(catalog.products.first?.price.decimalString == "4.99")
        }
    }
}
