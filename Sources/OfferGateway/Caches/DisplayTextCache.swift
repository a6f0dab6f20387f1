import Foundation
import OfferDomain

/// Display copy per (offer, product, locale), remembered: formatting an amount through ICU is the costliest step
/// left in `offers.best`, and the copy depends only on catalog values, never on the customer. Keys hold the whole
/// offer and product values, so a changed catalog simply misses; the oldest entries go first past `limit`.
final class DisplayTextCache: Sendable {
    private struct Key: Hashable, Sendable {
        let offer: Offer
        let product: Product
        let locale: String
    }

    private let entries: KeyedCache<Key, String>

    init(limit: Int = 50_000) {
        entries = KeyedCache(capacity: max(limit, 1))
    }

    func text(offer: Offer, product: Product, locale: Locale) -> String {
        let key = Key(offer: offer, product: product, locale: locale.identifier)
        if let known = entries.cached(key) { return known }
        let text = DisplayText.make(offer: offer, product: product, locale: locale)
        entries.put(text, for: key)
        return text
    }
}
