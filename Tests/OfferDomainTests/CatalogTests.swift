import Foundation
import Testing

@testable import OfferDomain

@Suite("Catalog lookups and validation")
struct CatalogTests {
    static let at = day("2026-06-01")

    @Test("the fixture is valid and lookups work")
    func lookups() throws {
        let catalog = Fixture.standard
        #expect(catalog.validate(at: Self.at).isEmpty)
        #expect(catalog.group("g1")?.name == "Premium")
        #expect(catalog.group("nope") == nil)
        #expect(catalog.product("yearly")?.level == 1)
        #expect(catalog.offer("promo-monthly", product: "monthly")?.periodCount == 3)
        #expect(catalog.offer("promo-monthly", product: "yearly") == nil)
        #expect(catalog.offer("nope", product: "monthly") == nil)
        #expect(catalog.offers(withId: "promo-monthly").map(\.productId) == ["monthly"])
        #expect(catalog.products(inGroup: "g1").map(\.id) == ["monthly", "yearly", "weekly"])
        #expect(
            catalog.offers(forProduct: "monthly").map(\.id)
                == ["intro-monthly", "promo-monthly", "code-monthly", "wb-monthly"])
        #expect(catalog.groupId(ofProduct: "pro") == "g2")
        _ = try Catalog(validating: Fixture.groups, products: Fixture.products, offers: [], at: Self.at)
    }

    @Test("one offer id on two products is two offers, each named by its product (Xcode allows it)")
    func offerIdSharedByProducts() throws {
        let offers = [Self.offer("shared"), Self.offer("shared", product: "yearly", price: usd("9.99"))]
        let catalog = try Catalog(validating: Fixture.groups, products: Fixture.products, offers: offers, at: Self.at)
        #expect(catalog.offer("shared", product: "monthly")?.price == usd("1.99"))
        #expect(catalog.offer("shared", product: "yearly")?.price == usd("9.99"))
        #expect(catalog.offer("shared", product: "weekly") == nil)
        #expect(catalog.offers(withId: "shared").map(\.productId) == ["monthly", "yearly"])
        // The same id twice on one product is still a duplicate.
        let errors = Fixture.catalog(offers + [Self.offer("shared", product: "yearly")]).validate(at: Self.at)
        #expect(errors.map(\.code) == [.duplicateIdentifier])
        #expect(errors.first?.field == "offers[2].id")
    }

    @Test("JSON round trip")
    func codable() throws {
        let data = try JSONEncoder().encode(Fixture.standard)
        let decoded = try JSONDecoder().decode(Catalog.self, from: data)
        #expect(decoded == Fixture.standard)
        #expect(decoded.offer("wb-monthly", product: "monthly")?.winBack?.monthsSinceLapse.max == 24)
    }

    static func json<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(type, from: Data(text.utf8))
    }

    @Test("API.md JSON shapes: flat money, win-back parameters on the offer")
    func apiShapes() throws {
        #expect(
            try Self.json(Fixture.monthly)
                == #"{"currency":"USD","groupId":"g1","id":"monthly","level":2,"period":"P1M","price":"4.99"}"#)
        #expect(
            try Self.json(Fixture.winBack("wb", minPaid: 3, lapse: (1, 6), wait: 2))
                == #"{"currency":"USD","id":"wb","minPaidMonths":3,"monthsSinceLapse":{"max":6,"min":1},"#
                + #""paymentMode":"payAsYouGo","period":"P1M","periodCount":3,"price":"1.99","productId":"monthly","#
                + #""type":"winBack","waitBetweenOffersMonths":2}"#)
        let promo = Offer(
            id: "p", type: .promotional, productId: "monthly", paymentMode: .freeTrial, period: period("P1W"),
            startsAt: day("2026-01-01"), endsAt: day("2026-02-01"), audience: [.lapsed, .atRisk])
        #expect(
            try Self.json(promo)
                == #"{"audience":["atRisk","lapsed"],"endsAt":"2026-02-01T00:00:00Z","id":"p","#
                + #""paymentMode":"freeTrial","period":"P1W","periodCount":1,"productId":"monthly","#
                + #""startsAt":"2026-01-01T00:00:00Z","type":"promotional"}"#)
        #expect(try Self.decode(Offer.self, Self.json(promo)) == promo)
        let decoded = try Self.decode(
            Offer.self,
            #"{"id":"wb","type":"winBack","productId":"monthly","paymentMode":"payUpFront","period":"P3M","#
                + #""price":"5","currency":"USD","minPaidMonths":6,"monthsSinceLapse":{"min":1,"max":12}}"#)
        #expect(decoded.periodCount == 1)
        #expect(decoded.price == usd("5"))
        #expect(
            decoded.winBack
                == WinBackParameters(
                    minPaidMonths: 6, monthsSinceLapse: .init(min: 1, max: 12),
                    waitBetweenOffersMonths: nil))
        #expect(try Self.decode(Product.self, Self.json(Fixture.yearly)) == Fixture.yearly)
    }

    @Test(
        "API.md JSON shapes: bad money is a decoding error",
        arguments: [
            #"{"id":"o","type":"promotional","productId":"m","paymentMode":"payUpFront","period":"P1M","price":"1"}"#,
            #"{"id":"o","type":"promotional","productId":"m","paymentMode":"payUpFront","period":"P1M","price":"1e3","#
                + #""currency":"USD"}"#,
            #"{"id":"m","groupId":"g","period":"P1M","price":"-1","currency":"USD","level":1}"#,
        ])
    func badMoney(text: String) {
        #expect(throws: DecodingError.self) {
            if text.contains("groupId") {
                _ = try Self.decode(Product.self, text)
            } else {
                _ = try Self.decode(Offer.self, text)
            }
        }
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let groups: [SubscriptionGroup]
        let products: [Product]
        let offers: [Offer]
        let code: OfferDomainError.Code
        let field: String
        var testDescription: String { name }
    }

    static func offer(
        _ id: String = "o", type: OfferType = .promotional, product: String = "monthly",
        mode: PaymentMode = .payUpFront, period: String = "P1M", count: Int = 1, price: Money? = usd("1.99"),
        starts: String? = nil, ends: String? = nil, winBack: WinBackParameters? = nil,
        audience: Set<PromotionalAudience>? = nil
    ) -> Offer {
        Offer(
            id: id, type: type, productId: product, paymentMode: mode, period: OfferDomainTests.period(period),
            periodCount: count, price: price, startsAt: starts.map(day), endsAt: ends.map(day), winBack: winBack,
            audience: audience)
    }

    static let g = Fixture.groups
    static let p = Fixture.products
    static let params = WinBackParameters(
        minPaidMonths: 1, monthsSinceLapse: .init(min: 1, max: 6),
        waitBetweenOffersMonths: nil)

    static let cases: [Case] = [
        Case(
            name: "empty group id", groups: g + [SubscriptionGroup(id: "", name: "x")], products: p, offers: [],
            code: .invalidIdentifier, field: "groups[2].id"),
        Case(
            name: "duplicate group", groups: g + [g[0]], products: p, offers: [], code: .duplicateIdentifier,
            field: "groups[2].id"),
        Case(
            name: "empty product id", groups: g,
            products: p + [Product(id: "", groupId: "g1", period: period("P1M"), price: usd("1"), level: 1)],
            offers: [], code: .invalidIdentifier, field: "products[4].id"),
        Case(
            name: "duplicate product", groups: g, products: p + [p[0]], offers: [], code: .duplicateIdentifier,
            field: "products[4].id"),
        Case(
            name: "unknown group", groups: g,
            products: p + [Product(id: "x", groupId: "g9", period: period("P1M"), price: usd("1"), level: 1)],
            offers: [], code: .unknownGroup, field: "products[4].groupId"),
        Case(
            name: "level zero", groups: g,
            products: p + [Product(id: "x", groupId: "g2", period: period("P1M"), price: usd("1"), level: 0)],
            offers: [], code: .invalidIdentifier, field: "products[4].level"),
        Case(
            name: "mixed currency in a group", groups: g,
            products: p + [Product(id: "x", groupId: "g2", period: period("P1M"), price: money("1", "EUR"), level: 2)],
            offers: [], code: .currencyMismatch, field: "products[4].price"),
        Case(
            name: "empty offer id", groups: g, products: p, offers: [offer("")], code: .invalidIdentifier,
            field: "offers[0].id"),
        Case(
            name: "duplicate offer", groups: g, products: p, offers: [offer(), offer()], code: .duplicateIdentifier,
            field: "offers[1].id"),
        Case(
            name: "unknown product", groups: g, products: p, offers: [offer(product: "zz")], code: .unknownProduct,
            field: "offers[0].productId"),
        Case(
            name: "free trial with a price", groups: g, products: p, offers: [offer(mode: .freeTrial)],
            code: .invalidOffer, field: "offers[0].price"),
        Case(
            name: "free trial of 2 periods", groups: g, products: p,
            offers: [offer(mode: .freeTrial, count: 2, price: nil)], code: .invalidOffer,
            field: "offers[0].periodCount"),
        Case(
            name: "pay up front without price", groups: g, products: p, offers: [offer(price: nil)],
            code: .invalidOffer, field: "offers[0].price"),
        Case(
            name: "pay up front of 2 periods", groups: g, products: p, offers: [offer(count: 2)],
            code: .invalidOffer, field: "offers[0].periodCount"),
        Case(
            name: "pay as you go without price", groups: g, products: p,
            offers: [offer(mode: .payAsYouGo, count: 3, price: nil)], code: .invalidOffer, field: "offers[0].price"),
        Case(
            name: "pay as you go 0 periods", groups: g, products: p, offers: [offer(mode: .payAsYouGo, count: 0)],
            code: .invalidOffer, field: "offers[0].periodCount"),
        Case(
            name: "pay as you go 13 periods", groups: g, products: p, offers: [offer(mode: .payAsYouGo, count: 13)],
            code: .invalidOffer, field: "offers[0].periodCount"),
        Case(
            name: "pay as you go period differs from product", groups: g, products: p,
            offers: [offer(mode: .payAsYouGo, period: "P1W", count: 2)], code: .invalidOffer,
            field: "offers[0].period"),
        Case(
            name: "offer price in another currency", groups: g, products: p,
            offers: [offer(price: money("1", "EUR"))], code: .currencyMismatch, field: "offers[0].price"),
        Case(
            name: "ends before it starts", groups: g, products: p,
            offers: [offer(starts: "2026-07-01", ends: "2026-07-01")], code: .invalidOffer, field: "offers[0].endsAt"),
        Case(
            name: "win-back without parameters", groups: g, products: p, offers: [offer(type: .winBack)],
            code: .invalidOffer, field: "offers[0].winBack"),
        Case(
            name: "parameters on a non-win-back", groups: g, products: p, offers: [offer(winBack: params)],
            code: .invalidOffer, field: "offers[0].winBack"),
        Case(
            name: "negative minPaidMonths", groups: g, products: p,
            offers: [
                offer(
                    type: .winBack,
                    winBack: .init(
                        minPaidMonths: -1, monthsSinceLapse: .init(min: 0, max: 1),
                        waitBetweenOffersMonths: nil))
            ], code: .invalidOffer, field: "offers[0].minPaidMonths"),
        Case(
            name: "lapse range inverted", groups: g, products: p,
            offers: [
                offer(
                    type: .winBack,
                    winBack: .init(
                        minPaidMonths: 0, monthsSinceLapse: .init(min: 3, max: 2),
                        waitBetweenOffersMonths: nil))
            ], code: .invalidOffer, field: "offers[0].monthsSinceLapse"),
        Case(
            name: "lapse min negative", groups: g, products: p,
            offers: [
                offer(
                    type: .winBack,
                    winBack: .init(
                        minPaidMonths: 0, monthsSinceLapse: .init(min: -1, max: 2),
                        waitBetweenOffersMonths: nil))
            ], code: .invalidOffer, field: "offers[0].monthsSinceLapse"),
        Case(
            name: "negative wait", groups: g, products: p,
            offers: [
                offer(
                    type: .winBack,
                    winBack: .init(
                        minPaidMonths: 0, monthsSinceLapse: .init(min: 0, max: 2),
                        waitBetweenOffersMonths: -1))
            ], code: .invalidOffer, field: "offers[0].waitBetweenOffersMonths"),
        Case(
            name: "audience on an intro offer", groups: g, products: p,
            offers: [offer(type: .introductory, audience: [.lapsed])], code: .invalidOffer,
            field: "offers[0].audience"),
        Case(
            name: "empty audience", groups: g, products: p, offers: [offer(audience: [])], code: .invalidOffer,
            field: "offers[0].audience"),
        Case(
            name: "two current intro offers", groups: g, products: p,
            offers: [offer("a", type: .introductory), offer("b", type: .introductory)], code: .invalidOffer,
            field: "offers[1].type"),
        Case(
            name: "eleven active promotional offers", groups: g, products: p,
            offers: (0..<11).map { offer("p\($0)") }, code: .tooManyPromotionalOffers, field: "offers[10].productId"),
    ]

    @Test("each rule names its field", arguments: cases)
    func invalid(_ c: Case) {
        let errors = Catalog(groups: c.groups, products: c.products, offers: c.offers).validate(at: Self.at)
        #expect(errors.count == 1, "\(errors)")
        #expect(errors.first?.code == c.code)
        #expect(errors.first?.field == c.field)
        do {
            _ = try Catalog(validating: c.groups, products: c.products, offers: c.offers, at: Self.at)
            Issue.record("validating init accepted \(c.name)")
        } catch {
            #expect(error.code == c.code)
        }
    }

    @Test("the 10-offer limit counts only promotional offers not yet ended")
    func promotionalLimitCountsActiveOnly() {
        var offers = (0..<10).map { Self.offer("p\($0)") }
        offers.append(Self.offer("ended", ends: "2026-05-31"))
        offers.append(Self.offer("ends-now", ends: "2026-06-01"))
        offers.append(Self.offer("other-product", product: "yearly"))
        offers.append(Self.offer("intro", type: .introductory, mode: .freeTrial, price: nil))
        offers.append(Self.offer("past-intro", type: .introductory, mode: .freeTrial, price: nil, ends: "2026-01-01"))
        let catalog = Fixture.catalog(offers)
        #expect(catalog.validate(at: Self.at).isEmpty)
        offers.append(Self.offer("scheduled", starts: "2026-09-01"))
        let errors = Fixture.catalog(offers).validate(at: Self.at)
        #expect(errors.map(\.code) == [.tooManyPromotionalOffers])
    }

    @Test("offer windows: start inclusive, end exclusive")
    func availability() {
        let o = Self.offer(starts: "2026-01-01", ends: "2026-02-01")
        #expect(!o.isAvailable(at: day("2025-12-31T23:59:59Z")))
        #expect(o.isAvailable(at: day("2026-01-01")))
        #expect(o.isAvailable(at: day("2026-01-31T23:59:59Z")))
        #expect(!o.isAvailable(at: day("2026-02-01")))
        #expect(Self.offer().isAvailable(at: .distantPast))
        #expect(Self.offer(count: 3).totalDuration == period("P3M"))
    }
}
