import Foundation

/// How long a decision made at one instant stays the decision (APPLE_OFFERS §4 rules are functions of time).
///
/// Every rule compares the decision time with instants taken from the inputs, or counts whole calendar months
/// since such an instant:
/// - a transaction counts from its purchase date; it is active until it expires or is revoked; a grace period and
///   the billing-retry window (expiry + ``CustomerHistory/billingRetryLimit``) end at fixed instants;
/// - paid months, months since a lapse and months since a win-back redemption count whole months from purchase,
///   expiry or revocation dates (``CalendarMonths/between(_:_:)`` steps exactly at `anchor + n months`);
/// - an offer's date window opens at `startsAt` and closes at `endsAt`.
///
/// So between two consecutive such instants nothing a rule looks at changes, and neither does any verdict, any
/// history, or the best offer. ``next(after:transactions:catalog:)`` returns the first of them after `at`: the
/// inputs decide the same way at every `t` with `at <= t < next`. It may be earlier than the first instant at
/// which a decision really changes (it considers every instant of every transaction and offer), never later.
public enum DecisionHorizon {
    /// The first instant after `at` at which a decision over these inputs may differ from the one made at `at`,
    /// or nil when none will (no transaction and no dated offer).
    public static func next(after at: Date, transactions: [Transaction], catalog: Catalog) -> Date? {
        var horizon: Date?
        func consider(_ instant: Date) {
            if instant > at, horizon.map({ instant < $0 }) ?? true { horizon = instant }
        }
        // A whole-month count from `anchor` changes when `anchor + (months so far + 1)` is reached.
        func considerMonths(from anchor: Date) {
            guard anchor <= at else { return consider(anchor) }
            consider(CalendarMonths.nextWholeMonth(from: anchor, after: at))
        }
        for transaction in transactions {
            considerMonths(from: transaction.purchaseDate)
            considerMonths(from: transaction.expiresDate)
            consider(transaction.expiresDate.addingTimeInterval(CustomerHistory.billingRetryLimit))
            if let grace = transaction.gracePeriodExpiresDate { consider(grace) }
            if let revocation = transaction.revocationDate { considerMonths(from: revocation) }
        }
        for offer in catalog.offers {
            if let startsAt = offer.startsAt { consider(startsAt) }
            if let endsAt = offer.endsAt { consider(endsAt) }
        }
        return horizon
    }
}
