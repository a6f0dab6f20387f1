import Foundation
import JSONRPC
import OfferDomain

/// The catalog rows of a `catalog.upsert` or `catalog.import`, turned into domain values. Every failure names the
/// JSON path of the culprit (e.g. `params.offers[2].price`).
struct CatalogInput: Sendable {
    var groups: [SubscriptionGroup] = []
    var products: [Product] = []
    var offers: [Offer] = []
    /// Offers whose currency comes from their product, resolved once the merged catalog is known.
    var pendingOfferPrices: [(index: Int, price: String, path: String)] = []

    var isEmpty: Bool { groups.isEmpty && products.isEmpty && offers.isEmpty }

    /// Fills offer prices in with the currency of their product (from this input or the existing catalog).
    mutating func resolveOfferPrices(existing: Catalog) throws {
        var currencies: [String: String] = [:]
        for product in existing.products { currencies[product.id] = product.price.currency }
        for product in products { currencies[product.id] = product.price.currency }
        for pending in pendingOfferPrices {
            let offer = offers[pending.index]
            guard let currency = currencies[offer.productId] else {
                throw GatewayError.invalidParams(
                    param: pending.path + ".productId",
                    message: "unknown product '\(Validate.printable(offer.productId))'",
                    reason: "unknown_product")
            }
            offers[pending.index].price = try CatalogInput.money(
                pending.price, currency: currency, path: pending.path + ".price")
        }
        pendingOfferPrices.removeAll()
    }

    /// The existing catalog with these rows put in (same ids replaced; offers by product and id).
    func merged(into existing: Catalog) -> (groups: [SubscriptionGroup], products: [Product], offers: [Offer]) {
        func merge<T, Key: Hashable>(_ old: [T], _ new: [T], id: (T) -> Key) -> [T] {
            let replaced = Set(new.map(id))
            return old.filter { !replaced.contains(id($0)) } + new
        }
        return (
            merge(existing.groups, groups, id: \.id), merge(existing.products, products, id: \.id),
            merge(existing.offers, offers, id: \.key)
        )
    }

    static func money(_ text: String, currency: String, path: String) throws -> Money {
        do {
            return try Money(text, currency: currency)
        } catch {
            throw GatewayError.invalidParams(param: path, message: error.message, reason: error.code.rawValue)
        }
    }

    static func period(_ text: String, path: String) throws -> SubscriptionPeriod {
        do {
            return try SubscriptionPeriod.parse(text)
        } catch {
            throw GatewayError.invalidParams(param: path, message: error.message, reason: error.code.rawValue)
        }
    }
}

/// `catalog.upsert`'s own format (API.md §5).
struct UpsertParams: Decodable {
    struct Group: Decodable {
        let id: String
        let name: String
    }
    struct Product: Decodable {
        let id: String
        let groupId: String
        let period: String
        let price: String
        let currency: String
        let level: Int
    }
    struct LapseRange: Decodable {
        let min: Int
        let max: Int
    }
    struct Offer: Decodable {
        let id: String
        let type: String
        let productId: String
        let paymentMode: String
        let period: String
        let periodCount: Int?
        let price: String?
        let startsAt: Date?
        let endsAt: Date?
        let minPaidMonths: Int?
        let monthsSinceLapse: LapseRange?
        let waitBetweenOffersMonths: Int?
        let audience: [String]?
        let billingPlan: String?
    }

    let tenant: String
    let groups: [Group]?
    let products: [Product]?
    let offers: [Offer]?

    func input() throws -> CatalogInput {
        var input = CatalogInput()
        for (i, group) in (groups ?? []).enumerated() {
            let path = "params.groups[\(i)]"
            input.groups.append(
                SubscriptionGroup(
                    id: try Validate.identifier(group.id, param: path + ".id"),
                    name: try Validate.identifier(group.name, param: path + ".name")))
        }
        for (i, product) in (products ?? []).enumerated() {
            let path = "params.products[\(i)]"
            input.products.append(
                OfferDomain.Product(
                    id: try Validate.identifier(product.id, param: path + ".id"),
                    groupId: try Validate.identifier(product.groupId, param: path + ".groupId"),
                    period: try CatalogInput.period(product.period, path: path + ".period"),
                    price: try CatalogInput.money(product.price, currency: product.currency, path: path + ".price"),
                    level: product.level))
        }
        for (i, offer) in (offers ?? []).enumerated() {
            let path = "params.offers[\(i)]"
            guard let type = OfferType(rawValue: offer.type) else {
                throw GatewayError.invalidParams(
                    param: path + ".type", message: "type must be introductory, promotional, code or winBack")
            }
            guard let mode = PaymentMode(rawValue: offer.paymentMode) else {
                throw GatewayError.invalidParams(
                    param: path + ".paymentMode", message: "paymentMode must be freeTrial, payAsYouGo or payUpFront")
            }
            var winBack: WinBackParameters?
            if type == .winBack {
                guard let minPaid = offer.minPaidMonths, let lapse = offer.monthsSinceLapse else {
                    throw GatewayError.invalidParams(
                        param: path + (offer.minPaidMonths == nil ? ".minPaidMonths" : ".monthsSinceLapse"),
                        message: "a win-back offer needs minPaidMonths and monthsSinceLapse {min, max}",
                        reason: "missing_param")
                }
                winBack = WinBackParameters(
                    minPaidMonths: minPaid, monthsSinceLapse: .init(min: lapse.min, max: lapse.max),
                    waitBetweenOffersMonths: offer.waitBetweenOffersMonths)
            }
            var audience: Set<PromotionalAudience>?
            if let names = offer.audience {
                audience = Set(
                    try names.enumerated().map { j, name in
                        guard let value = PromotionalAudience(rawValue: name) else {
                            throw GatewayError.invalidParams(
                                param: "\(path).audience[\(j)]",
                                message: "audience entries are atRisk, billingRetry, lapsed or active")
                        }
                        return value
                    })
            }
            let billingPlan = try offer.billingPlan.map {
                try Validate.billingPlan($0, param: path + ".billingPlan")
            }
            input.offers.append(
                OfferDomain.Offer(
                    id: try Validate.identifier(offer.id, param: path + ".id"), type: type,
                    productId: try Validate.identifier(offer.productId, param: path + ".productId"), paymentMode: mode,
                    period: try CatalogInput.period(offer.period, path: path + ".period"),
                    periodCount: offer.periodCount ?? 1, price: nil, startsAt: offer.startsAt, endsAt: offer.endsAt,
                    winBack: winBack, audience: audience, billingPlan: billingPlan))
            if let price = offer.price {
                input.pendingOfferPrices.append((input.offers.count - 1, price, path))
            }
        }
        return input
    }
}
