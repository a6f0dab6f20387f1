import Foundation
import Testing

@testable import OfferDomain

@Suite("Display copy")
struct DisplayTextTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let productPeriod: String
        let productPrice: String
        let mode: PaymentMode
        let period: String
        let count: Int
        let price: String?
        let expected: String
        var testDescription: String { expected }
    }

    static let englishCases: [Case] = [
        // The examples of API.md.
        Case(
            productPeriod: "P1Y", productPrice: "19.99", mode: .freeTrial, period: "P7D", count: 1, price: nil,
            expected: "7 days free, then $19.99/year"),
        Case(
            productPeriod: "P1M", productPrice: "2.99", mode: .freeTrial, period: "P1M", count: 1, price: nil,
            expected: "1 month free, then $2.99/month"),
        Case(
            productPeriod: "P1M", productPrice: "4.99", mode: .payAsYouGo, period: "P1M", count: 3, price: "0.99",
            expected: "$0.99/month for 3 months, then $4.99/month"),
        Case(
            productPeriod: "P1Y", productPrice: "19.99", mode: .payUpFront, period: "P6M", count: 1, price: "9.99",
            expected: "$9.99 for 6 months, then $19.99/year"),
        // Every unit, singular and plural.
        Case(
            productPeriod: "P1M", productPrice: "4.99", mode: .freeTrial, period: "P1D", count: 1, price: nil,
            expected: "1 day free, then $4.99/month"),
        Case(
            productPeriod: "P1M", productPrice: "4.99", mode: .freeTrial, period: "P3D", count: 1, price: nil,
            expected: "3 days free, then $4.99/month"),
        Case(
            productPeriod: "P1M", productPrice: "4.99", mode: .freeTrial, period: "P1W", count: 1, price: nil,
            expected: "1 week free, then $4.99/month"),
        Case(
            productPeriod: "P1M", productPrice: "4.99", mode: .freeTrial, period: "P2W", count: 1, price: nil,
            expected: "2 weeks free, then $4.99/month"),
        Case(
            productPeriod: "P1Y", productPrice: "49", mode: .freeTrial, period: "P2M", count: 1, price: nil,
            expected: "2 months free, then $49.00/year"),
        Case(
            productPeriod: "P1Y", productPrice: "49", mode: .payUpFront, period: "P1Y", count: 1, price: "29.99",
            expected: "$29.99 for 1 year, then $49.00/year"),
        Case(
            productPeriod: "P1M", productPrice: "4.99", mode: .payUpFront, period: "P2Y", count: 1, price: "99",
            expected: "$99.00 for 2 years, then $4.99/month"),
        Case(
            productPeriod: "P1M", productPrice: "4.99", mode: .payAsYouGo, period: "P1M", count: 1, price: "0.99",
            expected: "$0.99/month for 1 month, then $4.99/month"),
        Case(
            productPeriod: "P1W", productPrice: "1.99", mode: .payAsYouGo, period: "P1W", count: 2, price: "0.99",
            expected: "$0.99/week for 2 weeks, then $1.99/week"),
        Case(
            productPeriod: "P1W", productPrice: "1.99", mode: .payAsYouGo, period: "P1W", count: 1, price: "0.99",
            expected: "$0.99/week for 1 week, then $1.99/week"),
        Case(
            productPeriod: "P1D", productPrice: "0.49", mode: .freeTrial, period: "P1D", count: 1, price: nil,
            expected: "1 day free, then $0.49/day"),
        // Billing periods of several units.
        Case(
            productPeriod: "P3M", productPrice: "14.99", mode: .payAsYouGo, period: "P3M", count: 2, price: "9.99",
            expected: "$9.99 every 3 months for 6 months, then $14.99 every 3 months"),
        Case(
            productPeriod: "P2W", productPrice: "2.99", mode: .freeTrial, period: "P1W", count: 1, price: nil,
            expected: "1 week free, then $2.99 every 2 weeks"),
        Case(
            productPeriod: "P1Y", productPrice: "1234.5", mode: .freeTrial, period: "P1M", count: 1, price: nil,
            expected: "1 month free, then $1,234.50/year"),
    ]

    static func render(_ c: Case, currency: String = "USD", locale: Locale) -> String {
        let product = Product(
            id: "p", groupId: "g", period: period(c.productPeriod), price: money(c.productPrice, currency), level: 1)
        let offer = Offer(
            id: "o", type: .promotional, productId: "p", paymentMode: c.mode, period: period(c.period),
            periodCount: c.count, price: c.price.map { money($0, currency) })
        return DisplayText.make(offer: offer, product: product, locale: locale)
    }

    @Test("English copy, en_US, every unit", arguments: englishCases)
    func english(_ c: Case) {
        #expect(Self.render(c, locale: Locale(identifier: "en_US")) == c.expected)
        #expect(!c.expected.contains("1 months") && !c.expected.contains("1 weeks"))
    }

    @Test("the default locale is en_US")
    func defaultLocale() {
        let product = Product(id: "p", groupId: "g", period: period("P1Y"), price: usd("19.99"), level: 1)
        let offer = Offer(id: "o", type: .introductory, productId: "p", paymentMode: .freeTrial, period: period("P1W"))
        #expect(DisplayText.make(offer: offer, product: product) == "1 week free, then $19.99/year")
        #expect(DisplayText.defaultLocaleIdentifier == "en_US")
    }

    // Pinned to what Foundation (swift-corelibs/ICU) produces on this Linux machine: de_DE and fr_FR put a
    // NO-BREAK SPACE (U+00A0) before €, fr_FR groups thousands with a NARROW NO-BREAK SPACE (U+202F), ja_JP writes
    // yen as U+00A5 with no decimals.
    @Test(
        "amounts in three currencies and four locales",
        arguments: [
            ("en_US", "USD", "19.99", "$19.99"),
            ("en_US", "USD", "1234.5", "$1,234.50"),
            ("de_DE", "EUR", "19.99", "19,99\u{00A0}€"),
            ("de_DE", "EUR", "1234.5", "1.234,50\u{00A0}€"),
            ("fr_FR", "EUR", "19.99", "19,99\u{00A0}€"),
            ("fr_FR", "EUR", "1234.5", "1\u{202F}234,50\u{00A0}€"),
            ("ja_JP", "JPY", "980", "\u{00A5}980"),
            ("ja_JP", "JPY", "12000", "\u{00A5}12,000"),
            ("en_US", "EUR", "4.99", "€4.99"),
            ("en_US", "JPY", "980", "¥980"),
            ("de_DE", "USD", "4.99", "4,99\u{00A0}$"),
        ])
    func amounts(locale: String, currency: String, amount: String, expected: String) {
        #expect(DisplayText.format(money(amount, currency), locale: Locale(identifier: locale)) == expected)
    }

    @Test(
        "whole sentences in EUR and JPY",
        arguments: [
            ("de_DE", "EUR", "7 days free, then 19,99\u{00A0}€/year"),
            ("fr_FR", "EUR", "7 days free, then 19,99\u{00A0}€/year"),
        ])
    func euroSentences(locale: String, currency: String, expected: String) {
        #expect(Self.render(Self.englishCases[0], currency: currency, locale: Locale(identifier: locale)) == expected)
    }

    @Test("yen sentences")
    func yen() {
        let c = Case(
            productPeriod: "P1M", productPrice: "980", mode: .payAsYouGo, period: "P1M", count: 3,
            price: "480", expected: "")
        #expect(
            Self.render(c, currency: "JPY", locale: Locale(identifier: "ja_JP"))
                == "\u{00A5}480/month for 3 months, then \u{00A5}980/month")
        let upFront = Case(
            productPeriod: "P1Y", productPrice: "9800", mode: .payUpFront, period: "P6M", count: 1,
            price: "3900", expected: "")
        #expect(
            Self.render(upFront, currency: "JPY", locale: Locale(identifier: "ja_JP"))
                == "\u{00A5}3,900 for 6 months, then \u{00A5}9,800/year")
    }

    @Test("per-period suffixes")
    func perPeriod() {
        #expect(DisplayText.perPeriod(period("P1M")) == "/month")
        #expect(DisplayText.perPeriod(period("P1Y")) == "/year")
        #expect(DisplayText.perPeriod(period("P6M")) == " every 6 months")
    }
}
