import Foundation

// JSON shapes of API.md (`catalog.get`, `catalog.upsert`): money is flat (`"price": "4.99", "currency": "USD"`),
// win-back parameters sit on the offer itself. Dates use the encoder's/decoder's date strategy (the gateway sets
// ISO 8601).

extension Product {
    private enum CodingKeys: String, CodingKey {
        case id, groupId, period, price, currency, level
    }

    /// Decodes `{"id","groupId","period","price","currency","level"}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let price = try container.decode(String.self, forKey: .price)
        let currency = try container.decode(String.self, forKey: .currency)
        let money: Money
        do {
            money = try Money(price, currency: currency)
        } catch {
            throw DecodingError.dataCorruptedError(forKey: .price, in: container, debugDescription: error.description)
        }
        self.init(
            id: try container.decode(String.self, forKey: .id),
            groupId: try container.decode(String.self, forKey: .groupId),
            period: try container.decode(SubscriptionPeriod.self, forKey: .period),
            price: money,
            level: try container.decode(Int.self, forKey: .level))
    }

    /// Encodes `{"id","groupId","period","price","currency","level"}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(groupId, forKey: .groupId)
        try container.encode(period, forKey: .period)
        try container.encode(price.decimalString, forKey: .price)
        try container.encode(price.currency, forKey: .currency)
        try container.encode(level, forKey: .level)
    }
}

extension Offer {
    private enum CodingKeys: String, CodingKey {
        case id, type, productId, paymentMode, period, periodCount, price, currency, startsAt, endsAt
        case minPaidMonths, monthsSinceLapse, waitBetweenOffersMonths, audience, billingPlan
    }

    /// Decodes the API.md offer: `price` (decimal string) needs `currency`; a win-back offer carries
    /// `minPaidMonths`, `monthsSinceLapse {min,max}` and optional `waitBetweenOffersMonths`; `periodCount`
    /// defaults to 1.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        var money: Money?
        if let price = try container.decodeIfPresent(String.self, forKey: .price) {
            guard let currency = try container.decodeIfPresent(String.self, forKey: .currency) else {
                throw DecodingError.keyNotFound(
                    CodingKeys.currency,
                    .init(codingPath: container.codingPath, debugDescription: "an offer price needs its currency"))
            }
            do {
                money = try Money(price, currency: currency)
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: .price, in: container, debugDescription: error.description)
            }
        }
        var winBack: WinBackParameters?
        if let minPaid = try container.decodeIfPresent(Int.self, forKey: .minPaidMonths) {
            winBack = WinBackParameters(
                minPaidMonths: minPaid,
                monthsSinceLapse: try container.decode(WinBackParameters.MonthRange.self, forKey: .monthsSinceLapse),
                waitBetweenOffersMonths: try container.decodeIfPresent(Int.self, forKey: .waitBetweenOffersMonths))
        }
        self.init(
            id: try container.decode(String.self, forKey: .id),
            type: try container.decode(OfferType.self, forKey: .type),
            productId: try container.decode(String.self, forKey: .productId),
            paymentMode: try container.decode(PaymentMode.self, forKey: .paymentMode),
            period: try container.decode(SubscriptionPeriod.self, forKey: .period),
            periodCount: try container.decodeIfPresent(Int.self, forKey: .periodCount) ?? 1,
            price: money,
            startsAt: try container.decodeIfPresent(Date.self, forKey: .startsAt),
            endsAt: try container.decodeIfPresent(Date.self, forKey: .endsAt),
            winBack: winBack,
            audience: try container.decodeIfPresent(Set<PromotionalAudience>.self, forKey: .audience),
            billingPlan: try container.decodeIfPresent(BillingPlan.self, forKey: .billingPlan))
    }

    /// Encodes the API.md offer (absent optionals are omitted; `audience` sorted for stable output).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(type, forKey: .type)
        try container.encode(productId, forKey: .productId)
        try container.encode(paymentMode, forKey: .paymentMode)
        try container.encode(period, forKey: .period)
        try container.encode(periodCount, forKey: .periodCount)
        if let price {
            try container.encode(price.decimalString, forKey: .price)
            try container.encode(price.currency, forKey: .currency)
        }
        try container.encodeIfPresent(startsAt, forKey: .startsAt)
        try container.encodeIfPresent(endsAt, forKey: .endsAt)
        if let winBack {
            try container.encode(winBack.minPaidMonths, forKey: .minPaidMonths)
            try container.encode(winBack.monthsSinceLapse, forKey: .monthsSinceLapse)
            try container.encodeIfPresent(winBack.waitBetweenOffersMonths, forKey: .waitBetweenOffersMonths)
        }
        try container.encodeIfPresent(audience?.sorted(), forKey: .audience)
        try container.encodeIfPresent(billingPlan, forKey: .billingPlan)
    }
}
