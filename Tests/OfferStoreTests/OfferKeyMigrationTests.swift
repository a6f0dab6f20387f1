import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// Migration 0006 names offers by product and id: campaigns made before it keep exactly the offer they named, and
/// afterwards one id may sit on two products, never twice on one.
@Suite("Migration 0006: offers by product and id")
struct OfferKeyMigrationTests {
    @Test("campaigns made before 0006 get their offer's product; one id may then sit on two products")
    func campaignsKeepTheirOffer() async throws {
        try await TestDatabase.with { configuration in
            let before = OfferDatabase.migrations.filter { $0.version < 6 }
            #expect(before.count == 5)
            _ = try await Migrator(migrations: before).migrate(configuration: configuration)
            let pool = PostgresPool(configuration: configuration, maxConnections: 2)
            do {
                try await Self.check(pool, configuration: configuration)
            } catch {
                await pool.close()
                throw error
            }
            await pool.close()
        }
    }

    static func check(_ pool: PostgresPool, configuration: PostgresConfiguration) async throws {
        let tenant = UUID()
        try await pool.query(
            "INSERT INTO tenants (tenant_id, slug, bundle_id) VALUES (\(tenant), 'mig', 'com.example.mig')")
        try await pool.query(
            "INSERT INTO subscription_groups (tenant_id, group_id, name) VALUES (\(tenant), 'g', 'G')")
        for (product, offer) in [("monthly", "code-m"), ("yearly", "code-y")] {
            try await pool.query(
                """
                INSERT INTO products (tenant_id, product_id, group_id, period, price, currency, level)
                VALUES (\(tenant), \(product), 'g', 'P1M', 4.99, 'USD', 1)
                """)
            try await pool.query(
                """
                INSERT INTO offers (tenant_id, offer_id, product_id, type, payment_mode, period)
                VALUES (\(tenant), \(offer), \(product), 'code', 'freeTrial', 'P1M')
                """)
        }
        for (campaign, offer) in [("c-m", "code-m"), ("c-y", "code-y")] {
            try await pool.query(
                """
                INSERT INTO campaigns (tenant_id, campaign_id, offer_id, kind)
                VALUES (\(tenant), \(campaign), \(offer), 'oneTime')
                """)
        }
        // 0006 and every later migration apply now.
        let later = OfferDatabase.migrations.map(\.version).filter { $0 >= 6 }
        #expect(try await Migrator(migrations: OfferDatabase.migrations).migrate(configuration: configuration) == later)
        let rows = try await pool.query(
            "SELECT campaign_id, product_id FROM campaigns WHERE tenant_id = \(tenant) ORDER BY campaign_id")
        #expect(
            try rows.map { try $0.decode(String.self, String.self) }.map { "\($0.0)=\($0.1)" } == [
                "c-m=monthly", "c-y=yearly",
            ])
        // The same offer id under the other product is another offer; twice under one product is refused.
        try await pool.query(
            """
            INSERT INTO offers (tenant_id, offer_id, product_id, type, payment_mode, period)
            VALUES (\(tenant), 'code-m', 'yearly', 'code', 'freeTrial', 'P1M')
            """)
        await #expect(throws: PostgresError.self) {
            try await pool.query(
                """
                INSERT INTO offers (tenant_id, offer_id, product_id, type, payment_mode, period)
                VALUES (\(tenant), 'code-m', 'yearly', 'code', 'freeTrial', 'P1M')
                """)
        }
        // A campaign's offer is the pair: one naming a product without that offer is refused.
        await #expect(throws: PostgresError.self) {
            try await pool.query(
                """
                INSERT INTO campaigns (tenant_id, campaign_id, offer_id, product_id, kind)
                VALUES (\(tenant), 'c-x', 'code-y', 'monthly', 'oneTime')
                """)
        }
    }
}
