import Foundation

/// Deterministic customers with subscription histories for the `best` and `sign` scenarios: the
/// `subscriptions.record` requests the setup sends, and the customer ids the scenarios then use.
///
/// Customer `i` of `count` (ids `<runTag>-h<i>`), by `i % 10`:
/// - 0...3 active: bought 6 months before `now`, monthly renewals, the last expiring 15 days after `now`;
/// - 4...6 lapsed: bought 9 months before `now`, paid 6 months, expired 3 months before `now`, auto-renew off;
/// - 7 in billing retry: 4 paid months, the last expired 5 days before `now`, `inBillingRetry: true`;
/// - 8...9 never subscribed (no request; `offers.best` then considers introductory offers).
/// Each active or lapsed customer gets one `subscriptions.record` per paid month, so paid-months rules see a
/// real history. Products are used round-robin.
public struct HistorySeed: Sendable, Equatable {
    public let runTag: String
    public let count: Int
    public let products: [String]
    public let now: Date

    public init(runTag: String, count: Int, products: [String], now: Date) {
        self.runTag = runTag
        self.count = count
        self.products = products
        self.now = now
    }

    /// The customer ids, all of them (with or without history).
    public var customers: [String] { (0..<count).map { "\(runTag)-h\($0)" } }

    /// The `subscriptions.record` requests, in order; empty when there are no products.
    public var requests: [LoadRequest] {
        guard !products.isEmpty else { return [] }
        var out: [LoadRequest] = []
        for i in 0..<count {
            let customer = "\(runTag)-h\(i)"
            let product = products[i % products.count]
            let original = "\(runTag)-t\(i)-0"
            func record(month: Int, purchase: Date, expires: Date, autoRenew: Bool, retry: Bool) {
                out.append(
                    LoadRequest(
                        method: "subscriptions.record",
                        params: [
                            "customerId": .string(customer), "productId": .string(product),
                            "transactionId": .string("\(runTag)-t\(i)-\(month)"),
                            "originalTransactionId": .string(original), "purchaseDate": .string(Self.rfc3339(purchase)),
                            "expiresDate": .string(Self.rfc3339(expires)), "autoRenew": .bool(autoRenew),
                            "inBillingRetry": .bool(retry),
                        ]))
            }
            switch i % 10 {
            case 0...3:
                // Months counted back from `now`, so no calendar clamping drifts the last dates.
                for m in 0..<7 {
                    let to = m == 6 ? now.addingTimeInterval(15 * 86_400) : month(m - 5)
                    record(month: m, purchase: month(m - 6), expires: to, autoRenew: true, retry: false)
                }
            case 4...6:
                for m in 0..<6 {
                    record(month: m, purchase: month(m - 9), expires: month(m - 8), autoRenew: m < 5, retry: false)
                }
            case 7:
                for m in 0..<4 {
                    let to = m == 3 ? now.addingTimeInterval(-5 * 86_400) : month(m - 3)
                    record(month: m, purchase: month(m - 4), expires: to, autoRenew: true, retry: m == 3)
                }
            default:
                continue
            }
        }
        return out
    }

    /// `now` moved by whole calendar months (UTC).
    private func month(_ offset: Int) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar.date(byAdding: .month, value: offset, to: now) ?? now
    }

    /// `2026-11-30T12:00:00Z` (UTC, whole seconds).
    static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }
}
