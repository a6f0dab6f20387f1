import Foundation
import OfferDomain
import Synchronization

/// `offers.best` answers, remembered until their inputs change or time alone could change them.
///
/// A decision is a pure function of the catalog, the customer's transactions and the decision time, and it stays
/// the same from the instant it was made until the next instant any rule looks at (``DecisionHorizon``). So an
/// answer made at `madeAt` is exact for every request with `madeAt <= at < until` over the same inputs. "The same
/// inputs" is identity: an answer keeps the catalog and transaction snapshots it was computed from, and is used
/// only while the caches still hold those very snapshots (their ``Residency``: one atomic load each, no lookup).
/// Any change to the catalog or to the customer's transactions (here, or NOTIFYed by another process) replaces or
/// drops the snapshot, so remembered answers over the old one are never served again. Bounded: the oldest answers
/// are dropped first.
final class DecisionMemo: Sendable {
    /// A question as its params spelled it, not normalised: a remembered answer is found before any param is
    /// checked or looked up in the catalog. That is sound because an answer is only remembered once its params
    /// passed every check, the checks of the same strings against the same catalog pass the same way, and the
    /// catalog is still the one it was made over (its residency). Spellings of one question (`en-US`, `en_US`) are
    /// remembered apart.
    struct Key: Hashable, Sendable {
        let tenant: UUID
        let customerId: String
        let productId: String?
        let groupId: String?
        let locale: String?
        /// The billing plan asked for (nil: every offer considered): answers for different plans differ.
        let billingPlan: String?
    }

    /// A reference: a lookup retains one object, not each of its parts.
    final class Answer: Sendable {
        let catalog: CatalogSnapshot
        let transactions: TransactionsSnapshot
        let madeAt: Date
        /// nil: no later instant changes it.
        let until: Date?
        let response: BestOfferAnswer

        init(
            catalog: CatalogSnapshot, transactions: TransactionsSnapshot, madeAt: Date, until: Date?,
            response: BestOfferAnswer
        ) {
            self.catalog = catalog
            self.transactions = transactions
            self.madeAt = madeAt
            self.until = until
            self.response = response
        }
    }

    private let answers: KeyedCache<Key, Answer>
    /// Distinct answers, by content: see ``shared(_:)``. Emptied when it reaches `sharedCapacity`.
    private let distinct = Mutex<[SharedKey: BestOfferAnswer]>([:])
    private let sharedCapacity: Int

    var lookupCount: CacheLookupCount { answers.lookupCount("decisions") }
    /// Whether anything is remembered (capacity > 0); histories derived for decisions are remembered with them.
    let isEnabled: Bool

    /// - Parameter capacity: answers kept at most; 0 remembers nothing.
    /// - Parameter sharedCapacity: distinct answers kept for sharing (``shared(_:)``) before the table starts over.
    init(capacity: Int, sharedCapacity: Int = 1024) {
        self.answers = KeyedCache(capacity: max(capacity, 1))
        self.isEnabled = capacity > 0
        self.sharedCapacity = max(sharedCapacity, 1)
    }

    /// An answer equal to `answer` decided before (same result and copy, whichever customer, catalog or tenant it
    /// was for), or `answer` itself, kept for the next. Most customers asking about a product share a handful of
    /// eligibility profiles, so thousands of remembered questions come down to tens of distinct answers: sharing
    /// them keeps one object and one encoding each (a first answer equal to one sent before costs no encoding),
    /// and a remembered answer's bytes are then read from memory other requests just read, not from a cold copy
    /// of their own (docs/perf/README.md, session 30). An answer is an immutable value, so which of two equal
    /// ones is sent cannot be told. The table holds at most `sharedCapacity` answers, and starts over when full
    /// (answers already shared stay shared through the memo's entries).
    func shared(_ answer: BestOfferAnswer) -> BestOfferAnswer {
        guard isEnabled else { return answer }
        let key = SharedKey(answer: answer)
        return distinct.withLock { table in
            if let known = table[key] { return known }
            if table.count >= sharedCapacity { table.removeAll(keepingCapacity: true) }
            table[key] = answer
            return answer
        }
    }

    /// Distinct answers kept for sharing now.
    var sharedCount: Int { distinct.withLock { $0.count } }

    /// An answer compared by content: its result and copy. The hash reads only what tells answers apart cheaply
    /// (the copy, and each considered offer's id, rank and number of reasons); equality compares everything.
    struct SharedKey: Hashable, Sendable {
        let answer: BestOfferAnswer

        static func == (lhs: SharedKey, rhs: SharedKey) -> Bool {
            lhs.answer === rhs.answer
                || (lhs.answer.displayText == rhs.answer.displayText && lhs.answer.result == rhs.answer.result)
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(answer.displayText)
            // Read in place: a copy of each considered offer would retain a dozen strings.
            answer.result.considered.withUnsafeBufferPointer { considered in
                hasher.combine(considered.count)
                for index in considered.indices {
                    hasher.combine(considered[index].offer.id)
                    hasher.combine(considered[index].rank)
                    hasher.combine(considered[index].verdict.reasons.count)
                }
            }
        }
    }

    /// The remembered answer for `key` at `at`, if the snapshots it was made over are still the caches' current
    /// ones and it still holds at `at`. `countMiss: false` for a look that will be repeated on a miss (the at-once
    /// path): one miss counted, not two.
    func answer(_ key: Key, at: Date, countMiss: Bool = true) -> BestOfferAnswer? {
        guard isEnabled else { return nil }
        guard let answer = answers.cached(key), answer.catalog.residency.isResident,
            answer.transactions.residency.isResident,
            answer.madeAt <= at, answer.until.map({ at < $0 }) ?? true
        else {
            if countMiss { answers.recordMiss() }
            return nil
        }
        answers.recordHit()
        return answer.response
    }

    func recordMiss() { answers.recordMiss() }

    /// Remembers an answer made at `madeAt` over these snapshots, exact until `until` (the horizon of the history
    /// it was decided from, ``DerivedHistory``).
    func remember(
        _ key: Key, _ response: BestOfferAnswer, catalog: CatalogSnapshot, transactions: TransactionsSnapshot,
        madeAt: Date, until: Date?
    ) {
        guard isEnabled else { return }
        answers.put(
            Answer(catalog: catalog, transactions: transactions, madeAt: madeAt, until: until, response: response),
            for: key)
    }

    var count: Int { answers.count }
}
