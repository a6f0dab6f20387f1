import Foundation
import Testing

@testable import OfferDomain

@Suite("Money")
struct MoneyTests {
    @Test(
        "parses plain decimals exactly",
        arguments: [
            ("19.99", "19.99"), ("0", "0"), ("0.5", "0.5"), ("19.90", "19.9"), ("1000", "1000"),
            ("007.10", "7.1"), ("123456789012345", "123456789012345"), ("0.000001", "0.000001"),
        ])
    func parses(input: String, canonical: String) throws {
        let money = try Money(input, currency: "USD")
        #expect(money.decimalString == canonical)
        #expect(money.amount == Decimal(string: canonical, locale: Locale(identifier: "en_US_POSIX")))
        #expect(money.currency == "USD")
    }

    @Test(
        "rejects anything but a plain non-negative decimal",
        arguments: [
            "1e3", "abc", "-1", "-0.5", "+1", "", ".5", "5.", "1.2.3", "1,000", " 1", "1 ", "0x10", "NaN", "∞",
            "1234567890123456", "0.0000001", "١٢",
        ])
    func rejects(input: String) {
        do {
            _ = try Money(input, currency: "USD")
            Issue.record("accepted \(input)")
        } catch {
            #expect(error.code == .invalidMoney)
            #expect(error.field == "price")
        }
    }

    @Test("rejects malformed currency codes", arguments: ["usd", "US", "USDX", "", "U$D", "ÉUR"])
    func rejectsCurrency(code: String) {
        do {
            _ = try Money("1", currency: code)
            Issue.record("accepted \(code)")
        } catch {
            #expect(error.code == .invalidMoney)
            #expect(error.field == "currency")
        }
    }

    @Test("the field name is carried into the error")
    func fieldName() {
        do {
            _ = try Money("x", currency: "EUR", field: "offers[2].price")
            Issue.record("accepted")
        } catch {
            #expect(error.field == "offers[2].price")
            #expect(error.description.hasPrefix("invalid_money (offers[2].price): "))
        }
    }

    @Test("JSON round trip keeps the exact string")
    func codable() throws {
        let money = try Money("19.99", currency: "EUR")
        let data = try JSONEncoder().encode(money)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(#""price":"19.99""#))
        #expect(text.contains(#""currency":"EUR""#))
        #expect(try JSONDecoder().decode(Money.self, from: data) == money)
        #expect(throws: DecodingError.self) {
            _ = try JSONDecoder().decode(Money.self, from: Data(#"{"price":"1e3","currency":"EUR"}"#.utf8))
        }
    }

    @Test("equality is by value, the same bits compared first")
    func equality() {
        let one = Decimal(1)
        #expect(one.isIdentical(to: one))
        #expect(Decimal(string: "1.50")!.isIdentical(to: Decimal(3) / Decimal(2)), "Foundation compacts what it makes")
        #expect(!one.isIdentical(to: Decimal(2)))
        #expect(!one.isIdentical(to: -one))
        #expect(!Decimal.nan.isIdentical(to: Decimal.nan), "NaN is not equal to itself")

        let price = usd("19.99")
        let copy = price
        #expect(price == copy)
        #expect(usd("19.90") == usd("19.9"))
        #expect(usd("19.90").hashValue == usd("19.9").hashValue)
        #expect(usd("19.99") != usd("19.98"))
        #expect(usd("19.99") != money("19.99", "EUR"))
    }

    @Test("ordering and description")
    func ordering() {
        #expect(usd("1.99") < usd("2"))
        #expect(!(usd("2") < usd("1.99")))
        #expect(money("9", "EUR") < usd("1"))
        #expect(usd("4.99").description == "4.99 USD")
        #expect(Money.zero("JPY").decimalString == "0")
    }
}

@Suite("SubscriptionPeriod, PaymentMode, OfferType")
struct PeriodTests {
    @Test(
        "parses Apple's periods",
        arguments: [
            ("P3D", 3, SubscriptionPeriod.Unit.day, 3), ("P1W", 1, .week, 7), ("P2W", 2, .week, 14),
            ("P1M", 1, .month, 30), ("P2M", 2, .month, 60), ("P3M", 3, .month, 90), ("P6M", 6, .month, 180),
            ("P1Y", 1, .year, 360), ("P7D", 7, .day, 7), ("P999D", 999, .day, 999),
        ])
    func parses(text: String, value: Int, unit: SubscriptionPeriod.Unit, thirtieths: Int) throws {
        let parsed = try #require(SubscriptionPeriod(iso8601: text))
        #expect(parsed.value == value)
        #expect(parsed.unit == unit)
        #expect(parsed.iso8601 == text)
        #expect(parsed.description == text)
        #expect(parsed.thirtiethsOfMonth == thirtieths)
        #expect(parsed.monthsNormalised == Decimal(thirtieths) / 30)
    }

    @Test("parse returns the period")
    func parseThrowing() throws {
        #expect(try SubscriptionPeriod.parse("P6M") == period("P6M"))
    }

    @Test("months normalised per APPLE_OFFERS §4")
    func monthsNormalised() {
        #expect(period("P1M").monthsNormalised == 1)
        #expect(period("P6M").monthsNormalised == 6)
        #expect(period("P1Y").monthsNormalised == 12)
        #expect(period("P3D").monthsNormalised == Decimal(1) / 10)
        #expect(period("P1W").monthsNormalised == Decimal(7) / 30)
    }

    @Test(
        "rejects other durations",
        arguments: [
            "", "P", "1M", "p1m", "P0M", "P01M", "P1", "PM", "P1H", "P1Y2M", "PT1H", "P-1M", "P1000D", "P1.5M",
            " P1M", "P1m",
        ])
    func rejects(text: String) {
        #expect(SubscriptionPeriod(iso8601: text) == nil)
        do {
            _ = try SubscriptionPeriod.parse(text, field: "offers[0].period")
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.code == .invalidPeriod)
            #expect(error.field == "offers[0].period")
        }
    }

    @Test(
        "English durations: one unit singular, otherwise plural",
        arguments: [
            ("P1D", "1 day"), ("P3D", "3 days"), ("P1W", "1 week"), ("P2W", "2 weeks"), ("P1M", "1 month"),
            ("P6M", "6 months"), ("P1Y", "1 year"), ("P2Y", "2 years"),
        ])
    func english(text: String, words: String) {
        #expect(period(text).englishDuration == words)
    }

    @Test("multiplication and bounds")
    func times() {
        #expect(period("P1W").times(2) == period("P2W"))
        #expect(period("P1M").times(12) == period("P12M"))
        #expect(period("P1M").times(0) == nil)
        #expect(period("P999D").times(2) == nil)
        #expect(period("P2M").times(Int.max) == nil)
        #expect(SubscriptionPeriod(0, .day) == nil)
        #expect(SubscriptionPeriod(1000, .day) == nil)
    }

    @Test("JSON is the ISO string")
    func codable() throws {
        let data = try JSONEncoder().encode([period("P1W")])
        #expect(String(decoding: data, as: UTF8.self) == #"["P1W"]"#)
        #expect(try JSONDecoder().decode([SubscriptionPeriod].self, from: data) == [period("P1W")])
        #expect(throws: DecodingError.self) {
            _ = try JSONDecoder().decode([SubscriptionPeriod].self, from: Data(#"["P1X"]"#.utf8))
        }
    }

    @Test(
        "payment modes map Apple's offerDiscountType",
        arguments: [
            (PaymentMode.freeTrial, "FREE_TRIAL", "freeTrial"), (.payAsYouGo, "PAY_AS_YOU_GO", "payAsYouGo"),
            (.payUpFront, "PAY_UP_FRONT", "payUpFront"),
        ])
    func paymentModes(mode: PaymentMode, apple: String, raw: String) {
        #expect(PaymentMode(appleDiscountType: apple) == mode)
        #expect(mode.appleDiscountType == apple)
        #expect(mode.rawValue == raw)
    }

    @Test("unknown discount types are nil")
    func unknownMode() {
        #expect(PaymentMode(appleDiscountType: "free_trial") == nil)
    }

    @Test(
        "offer types map Apple's numbers 1-4 and rank",
        arguments: [
            (OfferType.introductory, 1, "introductory", 1), (.promotional, 2, "promotional", 2), (.code, 3, "code", 0),
            (.winBack, 4, "winBack", 3),
        ])
    func offerTypes(type: OfferType, number: Int, raw: String, priority: Int) {
        #expect(OfferType(appleNumber: number) == type)
        #expect(type.appleNumber == number)
        #expect(type.rawValue == raw)
        #expect(type.bestOfferPriority == priority)
    }

    @Test("other numbers are nil", arguments: [0, 5, -1])
    func unknownType(number: Int) {
        #expect(OfferType(appleNumber: number) == nil)
    }

    @Test("error description without a field")
    func errorDescription() {
        #expect(OfferDomainError(.invalidCode, "empty").description == "invalid_code: empty")
    }
}
