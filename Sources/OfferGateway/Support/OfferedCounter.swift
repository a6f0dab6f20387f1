import Foundation
import OfferStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Counts the `offers.best` answers that chose each offer, per tenant and UTC hour, in memory, and adds them to the
/// funnel's rollups every `interval` (and once more at shutdown): the `offered` stage of `analytics.funnel` without
/// a write on the `offers.best` path, which is often answered from the memo without touching the database.
///
/// Counting is lock-cheap: the counts are split over shards chosen by the calling thread, so the threads answering
/// requests almost never take the same lock (a shard's lock is held for one dictionary increment, and by the flush
/// for one swap). What a crash (SIGKILL, power loss) can lose: the counts made since the last flush that committed,
/// i.e. at most one interval (plus the flush in flight); nothing else of the funnel is kept here. A flush that fails
/// (database down) puts its counts back, to go with the next one.
///
/// A long-running part with one `run()` (started and stopped by `GatewayService`): `run` flushes every interval
/// until cancelled; `flush()` is called once more after it, when no request can count any more.
final class OfferedCounter: Sendable {
    struct Key: Hashable, Sendable {
        let tenant: UUID
        let offerId: String
        /// Hours since 1970-01-01T00:00Z.
        let hour: Int64
    }

    private final class Shard: Sendable {
        let counts = Mutex<[Key: Int64]>([:])
    }

    /// nil: counting is off (`--funnel-flush-ms 0`).
    let interval: Duration?
    private let repository: FunnelRepository
    private let logger: Logger
    private let shards: [Shard]
    private static let shardBits = 4

    init(repository: FunnelRepository, interval: Duration?, logger: Logger) {
        self.repository = repository
        self.interval = interval.flatMap { $0 > .zero ? $0 : nil }
        self.logger = logger
        self.shards = (0..<(1 << Self.shardBits)).map { _ in Shard() }
    }

    /// One answer chose `offerId` at `at` (the decision time). A no-op when counting is off.
    func count(tenant: UUID, offerId: String, at: Date) {
        guard interval != nil else { return }
        let hour = Int64((at.timeIntervalSince1970 / 3600).rounded(.down))
        shards[Self.shardIndex()].counts.withLock {
            $0[Key(tenant: tenant, offerId: offerId, hour: hour), default: 0] += 1
        }
    }

    /// The shard of the calling thread: a multiplicative hash of its pthread id (threads are long-lived pool and
    /// dispatch workers, so each keeps its shard).
    private static func shardIndex() -> Int {
        let id = UInt64(truncatingIfNeeded: pthread_self())
        return Int(truncatingIfNeeded: (id &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - shardBits))
    }

    /// The counts not yet flushed (for tests and stats).
    var pending: Int64 {
        shards.reduce(0) { sum, shard in sum + shard.counts.withLock { $0.values.reduce(0, +) } }
    }

    /// Flushes every interval until cancelled.
    func run() async {
        guard let interval else { return }
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            await flush()
        }
    }

    /// Adds the counts made so far to the rollups; on failure they are kept for the next flush. Returns whether
    /// everything counted before the call is now stored.
    @discardableResult
    func flush() async -> Bool {
        var merged: [Key: Int64] = [:]
        for shard in shards {
            let taken = shard.counts.withLock { counts in
                defer { counts = [:] }
                return counts
            }
            merged.merge(taken, uniquingKeysWith: +)
        }
        guard !merged.isEmpty else { return true }
        do {
            try await repository.addOffered(
                merged.map {
                    OfferedCount(tenant: $0.key.tenant, offerId: $0.key.offerId, hour: $0.key.hour, count: $0.value)
                })
            return true
        } catch {
            shards[0].counts.withLock { $0.merge(merged, uniquingKeysWith: +) }
            logger.warning(
                "funnel: could not store offers.best counts; kept for the next flush",
                ["error": "\(error)", "counts": String(merged.values.reduce(0, +))])
            return false
        }
    }
}
