import Foundation
import OfferDomain
import Postgres

/// A tenant's subscription groups, products and offers.
public struct CatalogRepository: Sendable {
    let pool: PostgresPool

    /// The tenant's whole catalog (as the domain sees it). Unknown tenants have an empty catalog.
    public func load(tenant: UUID) async throws(StoreError) -> Catalog {
        try await storeCall {
            try Self.decodeCatalog(try await pool.pipeline(Self.loadQueries(tenant: tenant), prepared: true))
        }
    }

    static func loadQueries(tenant: UUID) -> [PostgresQuery] {
        [
            "SELECT group_id, name FROM subscription_groups WHERE tenant_id = \(tenant) ORDER BY group_id",
            """
            SELECT product_id, group_id, period, price::text, currency, level
            FROM products WHERE tenant_id = \(tenant) ORDER BY product_id
            """,
            """
            SELECT o.offer_id, o.type, o.product_id, o.payment_mode, o.period, o.period_count,
                   o.price::text, p.currency, o.starts_at, o.ends_at, o.audience, o.min_paid_months,
                   o.months_since_lapse_min, o.months_since_lapse_max, o.wait_between_offers_months, o.billing_plan
            FROM offers o JOIN products p USING (tenant_id, product_id)
            WHERE o.tenant_id = \(tenant) AND o.active ORDER BY o.offer_id, o.product_id
            """,
        ]
    }

    static func decodeCatalog(_ results: [Result<PostgresRows, PostgresError>]) throws -> Catalog {
        let groups = try results[0].get().map { row in
            let (id, name) = try row.decode(String.self, String.self)
            return SubscriptionGroup(id: id, name: name)
        }
        let products = try results[1].get().map(Self.decodeProduct)
        let offers = try results[2].get().map(Self.decodeOffer)
        return Catalog(groups: groups, products: products, offers: offers)
    }

    /// Inserts or updates groups, products and offers in one transaction (rows not named are left alone). An offer is
    /// named by its product and id (migration 0006): the same id under another product is another offer.
    /// The caller validates the merged catalog first; the database's constraints are the last line.
    ///
    /// `check`, when given, sees the stored catalog inside the transaction, after changes of the same tenant are
    /// locked out (the tenant row is locked), and may throw to abort: so checks over the whole catalog (at most 10
    /// promotional offers per product) hold even when several upserts race. What it throws arrives wrapped as
    /// `.corrupt`; callers that need the original keep it themselves.
    public func upsert(
        tenant: UUID, groups: [SubscriptionGroup], products: [Product], offers: [Offer], actor: String,
        check: (@Sendable (Catalog) throws -> Void)? = nil
    ) async throws(StoreError) {
        try await storeCall {
            try await pool.withTransaction { tx in
                if let check {
                    try await tx.query("SELECT 1 FROM tenants WHERE tenant_id = \(tenant) FOR UPDATE")
                    try check(try Self.decodeCatalog(try await tx.pipeline(Self.loadQueries(tenant: tenant))))
                }
                var statements: [PostgresQuery] = []
                for group in groups {
                    statements.append(
                        """
                        INSERT INTO subscription_groups (tenant_id, group_id, name) VALUES (\(tenant), \(group.id), \(group.name))
                        ON CONFLICT (tenant_id, group_id) DO UPDATE SET name = EXCLUDED.name, updated_at = now()
                        WHERE subscription_groups.name IS DISTINCT FROM EXCLUDED.name
                        """)
                }
                for product in products {
                    let price = PostgresNumeric(product.price.decimalString)
                    statements.append(
                        """
                        INSERT INTO products (tenant_id, product_id, group_id, period, price, currency, level)
                        VALUES (\(tenant), \(product.id), \(product.groupId), \(product.period.iso8601), \(price),
                                \(product.price.currency), \(product.level))
                        ON CONFLICT (tenant_id, product_id) DO UPDATE SET
                            group_id = EXCLUDED.group_id, period = EXCLUDED.period, price = EXCLUDED.price,
                            currency = EXCLUDED.currency, level = EXCLUDED.level, updated_at = now()
                        """)
                }
                for offer in offers {
                    let price = offer.price.map { PostgresNumeric($0.decimalString) }
                    let audience = offer.audience.map { $0.map(\.rawValue).sorted() }
                    let winBack = offer.winBack
                    statements.append(
                        """
                        INSERT INTO offers (tenant_id, offer_id, product_id, type, payment_mode, period, period_count,
                                            price, starts_at, ends_at, audience, min_paid_months,
                                            months_since_lapse_min, months_since_lapse_max, wait_between_offers_months,
                                            billing_plan)
                        VALUES (\(tenant), \(offer.id), \(offer.productId), \(offer.type.rawValue),
                                \(offer.paymentMode.rawValue), \(offer.period.iso8601), \(offer.periodCount), \(price),
                                \(offer.startsAt), \(offer.endsAt), \(audience), \(winBack?.minPaidMonths),
                                \(winBack?.monthsSinceLapse.min), \(winBack?.monthsSinceLapse.max),
                                \(winBack?.waitBetweenOffersMonths), \(offer.billingPlan?.rawValue))
                        ON CONFLICT (tenant_id, product_id, offer_id) DO UPDATE SET
                            type = EXCLUDED.type,
                            payment_mode = EXCLUDED.payment_mode, period = EXCLUDED.period,
                            period_count = EXCLUDED.period_count, price = EXCLUDED.price,
                            starts_at = EXCLUDED.starts_at, ends_at = EXCLUDED.ends_at, audience = EXCLUDED.audience,
                            min_paid_months = EXCLUDED.min_paid_months,
                            months_since_lapse_min = EXCLUDED.months_since_lapse_min,
                            months_since_lapse_max = EXCLUDED.months_since_lapse_max,
                            wait_between_offers_months = EXCLUDED.wait_between_offers_months,
                            billing_plan = EXCLUDED.billing_plan,
                            active = true, updated_at = now()
                        """)
                }
                for result in try await tx.pipeline(statements) {
                    _ = try result.get()
                }
                try await Audit.record(
                    tx, tenant: tenant, actor: actor, action: "catalog.upsert",
                    detail: ["groups": "\(groups.count)", "products": "\(products.count)", "offers": "\(offers.count)"])
            }
        }
    }

    static func decodeProduct(_ row: PostgresRow) throws -> Product {
        let (id, groupId, period, price, currency, level) = try row.decode(
            String.self, String.self, String.self, String.self, String.self, Int.self)
        return Product(
            id: id, groupId: groupId, period: try SubscriptionPeriod.parse(period),
            price: try Money(price, currency: currency), level: level)
    }

    static func decodeOffer(_ row: PostgresRow) throws -> Offer {
        let (id, type, productId, mode, period, periodCount, price, currency) = try row.decode(
            String.self, String.self, String.self, String.self, String.self, Int.self, String?.self, String.self)
        let startsAt = try row.decode(Date?.self, at: 8)
        let endsAt = try row.decode(Date?.self, at: 9)
        let audience = try row.decode([String]?.self, at: 10)
        let minPaid = try row.decode(Int?.self, at: 11)
        let lapseMin = try row.decode(Int?.self, at: 12)
        let lapseMax = try row.decode(Int?.self, at: 13)
        let wait = try row.decode(Int?.self, at: 14)
        let plan = try row.decode(String?.self, at: 15)
        guard let offerType = OfferType(rawValue: type), let paymentMode = PaymentMode(rawValue: mode) else {
            throw StoreError.corrupt("offer \(id) type/payment mode")
        }
        var billingPlan: BillingPlan?
        if let plan {
            guard let parsed = BillingPlan(rawValue: plan) else { throw StoreError.corrupt("offer \(id) billing plan") }
            billingPlan = parsed
        }
        var winBack: WinBackParameters?
        if let minPaid, let lapseMin, let lapseMax {
            winBack = WinBackParameters(
                minPaidMonths: minPaid, monthsSinceLapse: .init(min: lapseMin, max: lapseMax),
                waitBetweenOffersMonths: wait)
        }
        let parsedAudience = try audience.map { names in
            Set(
                try names.map { name in
                    guard let value = PromotionalAudience(rawValue: name) else {
                        throw StoreError.corrupt("offer \(id) audience")
                    }
                    return value
                })
        }
        return Offer(
            id: id, type: offerType, productId: productId, paymentMode: paymentMode,
            period: try SubscriptionPeriod.parse(period), periodCount: periodCount,
            price: try price.map { try Money($0, currency: currency) }, startsAt: startsAt, endsAt: endsAt,
            winBack: winBack, audience: parsedAudience, billingPlan: billingPlan)
    }
}
