import Foundation
import Synchronization

/// A token bucket: `rate` tokens a second, at most `burst` saved up. A pure value; time is a parameter.
struct TokenBucket: Sendable, Equatable {
    let rate: Double
    let burst: Double
    private(set) var tokens: Double
    private(set) var updatedAt: Double

    init(rate: Double, burst: Double, now: Double) {
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.updatedAt = now
    }

    /// Takes one token if there is one; otherwise says how long until there will be (milliseconds, rounded up).
    mutating func take(now: Double) -> TakeResult {
        if now > updatedAt {
            tokens = min(burst, tokens + (now - updatedAt) * rate)
            updatedAt = now
        }
        if tokens >= 1 {
            tokens -= 1
            return .allowed
        }
        let wait = (1 - tokens) / rate
        return .limited(retryAfterMs: max(1, Int((wait * 1000).rounded(.up))))
    }

    /// Returns a token taken for a request that was then not answered here after all (it is taken again where it
    /// is answered).
    mutating func giveBack() { tokens = min(burst, tokens + 1) }

    enum TakeResult: Equatable, Sendable {
        case allowed
        case limited(retryAfterMs: Int)
    }
}

/// Per-tenant rate limits for the whole process: one bucket per tenant, behind one lock (no `await` between
/// reading a bucket and writing it back).
final class RateLimiter: Sendable {
    private let rate: Double
    private let burst: Double
    private let buckets = Mutex<[String: TokenBucket]>([:])

    /// - Parameters:
    ///   - rate: requests a second per tenant; `0` or less turns limiting off.
    ///   - burst: how many requests may come at once after a quiet period.
    init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = max(burst, 1)
    }

    var isEnabled: Bool { rate > 0 }

    func take(tenant: String, now: Double = ProcessInfo.processInfo.systemUptime) -> TokenBucket.TakeResult {
        guard isEnabled else { return .allowed }
        return buckets.withLock { buckets in
            var bucket = buckets[tenant] ?? TokenBucket(rate: rate, burst: burst, now: now)
            let result = bucket.take(now: now)
            buckets[tenant] = bucket
            return result
        }
    }

    /// Gives back a token `take` took (see `TokenBucket.giveBack`).
    func giveBack(tenant: String) {
        guard isEnabled else { return }
        buckets.withLock { buckets in buckets[tenant]?.giveBack() }
    }
}
