import Foundation
import OfferDomain
import Synchronization

/// Display copy per (offer, product, locale), remembered: formatting an amount through ICU is the costliest step
/// left in `offers.best`, and the copy depends only on catalog values, never on the customer. Keys hold the whole
/// offer and product values, so a changed catalog simply misses; the memo is emptied when it grows past `limit`.
final class DisplayTextCache: Sendable {
    private struct Key: Hashable {
        let offer: Offer
        let product: Product
        let locale: String
    }

    private let entries = Mutex<[Key: String]>([:])
    private let limit: Int

    init(limit: Int = 50_000) {
        self.limit = limit
    }

    func text(offer: Offer, product: Product, locale: Locale) -> String {
        let key = Key(offer: offer, product: product, locale: locale.identifier)
        if let known = entries.withLock({ $0[key] }) { return known }
        let text = DisplayText.make(offer: offer, product: product, locale: locale)
        entries.withLock { entries in
            if entries.count >= limit { entries.removeAll(keepingCapacity: true) }
            entries[key] = text
        }
        return text
    }
}
