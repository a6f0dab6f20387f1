import Foundation

/// A catalog together with the parts of the best-offer order that do not depend on the customer, computed once:
/// each offer's saving, its place in the order among eligible offers, and the offers of each product.
/// ``BestOffer/choose(scope:ranked:history:at:)`` then sorts candidates on integer keys instead of comparing savings
/// as fractions (Decimal cross-multiplication) on every comparison; same order, same results as
/// ``BestOffer/choose(scope:catalog:history:at:)``.
///
/// Build it once per catalog and keep it beside the catalog (the gateway caches it per tenant).
///
/// Why this is a separate value and not more stored properties of ``Catalog``: adding stored properties changes
/// `Catalog`'s size, and the native SwiftPM build does not recompile a target that uses `Catalog` only through a
/// module it depends on transitively (OfferStoreTests → OfferStore → OfferDomain): its stale object code keeps the
/// old, smaller layout and crashes with a bad pointer after `CatalogRepository.load` returns a catalog
/// (docs/decisions/003-stale-layout-after-incremental-build.md). Keeping `Catalog`'s layout unchanged lets this
/// land without anyone's existing build directory turning into a crash.
public struct RankedCatalog: Sendable {
    /// The catalog.
    public let catalog: Catalog
    /// Offer positions (indices into `catalog.offers`) per product id, in catalog order.
    private let offersByProduct: [String: [Int]]
    /// Per offer position: its saving against its product (the first product with that id), nil when the product
    /// is unknown.
    private let savings: [Saving?]
    /// Per offer position: its rank in the best-offer order among eligible offers (type priority, then larger
    /// saving, then offer id; smaller is better; offers that compare equal share a rank), nil when the product is
    /// unknown.
    private let ranks: [Int?]
    /// Per offer position: its rank in the order among ineligible offers (type priority, then offer id, then
    /// product id: no savings), for every offer; equal keys share a rank.
    private let ineligibleRanks: [Int]

    /// Computes the ranking of `catalog`'s offers (O(n log n) in the number of offers).
    public init(_ catalog: Catalog) {
        self.catalog = catalog
        let offers = catalog.offers
        var byProduct: [String: [Int]] = [:]
        for (position, offer) in offers.enumerated() { byProduct[offer.productId, default: []].append(position) }
        self.offersByProduct = byProduct
        var savings = [Saving?](repeating: nil, count: offers.count)
        var denominators = [Int](repeating: 1, count: offers.count)
        for (position, offer) in offers.enumerated() {
            if let product = catalog.product(offer.productId) {
                savings[position] = Saving(offer: offer, product: product)
                denominators[position] = product.period.thirtiethsOfMonth
            }
        }
        self.savings = savings
        let known: [(position: Int, saving: Saving)] = savings.enumerated().compactMap { position, saving in
            saving.map { (position, $0) }
        }
        // Comparing two savings cross-multiplies Decimals, and each Decimal multiplication allocates: ranking 200
        // offers made ~41,000 allocations per catalog load. Over one denominator common to the catalog, each
        // saving's numerator is scaled once and the sort compares plain Decimals: the same order, exactly.
        let keys = Self.commonDenominatorKeys(savings, denominators)
        func before(_ lhs: (position: Int, saving: Saving), _ rhs: (position: Int, saving: Saving)) -> Bool {
            if let keys {
                return BestOffer.isOrderedBefore(
                    offers[lhs.position], keys[lhs.position], offers[rhs.position], keys[rhs.position])
            }
            return BestOffer.isOrderedBefore(offers[lhs.position], lhs.saving, offers[rhs.position], rhs.saving)
        }
        let sorted = known.sorted(by: before)
        var ranks = [Int?](repeating: nil, count: offers.count)
        var rank = 0
        for (i, entry) in sorted.enumerated() {
            // Dense ranks: equal keys (only possible with duplicate offers) share a rank, so the final sort
            // falls back to the exact comparison and keeps such candidates in their original order.
            if i > 0 && before(sorted[i - 1], entry) { rank += 1 }
            ranks[entry.position] = rank
        }
        self.ranks = ranks
        func ineligibleBefore(_ lhs: Int, _ rhs: Int) -> Bool {
            BestOffer.isOrderedBefore(offers[lhs], Saving?.none, offers[rhs], Saving?.none)
        }
        let order = offers.indices.sorted(by: ineligibleBefore)
        var ineligibleRanks = [Int](repeating: 0, count: offers.count)
        rank = 0
        for (i, position) in order.enumerated() {
            if i > 0 && ineligibleBefore(order[i - 1], position) { rank += 1 }
            ineligibleRanks[position] = rank
        }
        self.ineligibleRanks = ineligibleRanks
    }

    /// Each saving's numerator over the least common multiple of the savings' denominators (a `Saving`'s denominator
    /// is its product's period in thirtieths of a month: 7, 30, 360…), so that keys order exactly as the savings do;
    /// nil when that multiple would exceed 10^9 (a catalog of unusual periods: then the savings are compared as
    /// they are).
    static func commonDenominatorKeys(_ savings: [Saving?], _ denominators: [Int]) -> [Decimal?]? {
        func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }
        var common = 1
        for (saving, denominator) in zip(savings, denominators) where saving != nil {
            guard denominator > 0 else { return nil }
            let (product, overflow) = (common / gcd(common, denominator)).multipliedReportingOverflow(by: denominator)
            guard !overflow, product <= 1_000_000_000 else { return nil }
            common = product
        }
        return zip(savings, denominators).map { saving, denominator in
            saving.map { saving in
                assert(saving.denominator == Decimal(denominator), "a saving's denominator is its product's period")
                return saving.numerator * Decimal(common / denominator)
            }
        }
    }

    /// Offer positions of a product, in catalog order.
    func offerPositions(forProduct productId: String) -> [Int] { offersByProduct[productId] ?? [] }

    /// The precomputed saving of the offer at `position`, valid for the product `catalog.product(productId)`.
    func saving(at position: Int) -> Saving? { savings[position] }

    /// The precomputed rank of the offer at `position` among eligible offers.
    func rank(at position: Int) -> Int? { ranks[position] }

    /// The precomputed rank of the offer at `position` among ineligible offers.
    func ineligibleRank(at position: Int) -> Int { ineligibleRanks[position] }
}
