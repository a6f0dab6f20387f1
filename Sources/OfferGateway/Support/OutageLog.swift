import Foundation
import Synchronization

/// Keeps an outage of the database from flooding the log. During a failover every request in flight and every
/// retry fails the same way (-32050, retryable): hundreds of identical lines that hide everything else. So the
/// first such failure is logged in full, later ones only counted, and at most one line per `interval` says how many
/// there were (with the latest detail); the first success after them closes the outage with one last count. Every
/// other failure (`-32603` and the rest) is logged as before: only "unavailable" is summarised.
final class OutageLog: Sendable {
    /// A summary line to log: how many failures were not logged one by one, over how long, the latest detail.
    struct Summary: Equatable, Sendable {
        var suppressed: Int
        var over: Duration
        var latestDetail: String
        var recovered: Bool

        var metadata: [String: String] {
            let ms = Int64(over / .milliseconds(1))
            return [
                "outage.suppressed": String(suppressed), "outage.over_ms": String(ms),
                "error.detail": latestDetail,
            ]
        }

        var message: String {
            recovered
                ? "database available again; requests answered -32050 meanwhile were counted, not logged"
                : "database still unavailable; requests answered -32050 are counted, not logged"
        }
    }

    private struct State {
        /// When the last line (a failure in full or a summary) was logged.
        var lastLine: ContinuousClock.Instant?
        /// Failures counted, not logged, since then; the first one's time; the latest detail.
        var suppressed = 0
        var countingSince: ContinuousClock.Instant?
        var latestDetail = ""

        mutating func takeSummary(now: ContinuousClock.Instant, recovered: Bool) -> Summary? {
            defer {
                suppressed = 0
                countingSince = nil
            }
            guard suppressed > 0, let since = countingSince else { return nil }
            return Summary(suppressed: suppressed, over: now - since, latestDetail: latestDetail, recovered: recovered)
        }
    }

    let interval: Duration
    private let state = Mutex(State())
    /// Whether failures are being counted: lets `succeeded` skip the lock on every request of a healthy gateway.
    private let counting = Atomic<Bool>(false)

    init(interval: Duration = .seconds(5)) {
        self.interval = interval
    }

    /// An "unavailable" failure: `log` is true when it is to be logged in full (none was logged in the last
    /// `interval`; then `summary` holds the count since the previous line, if any), false when only counted.
    func failed(detail: String, now: ContinuousClock.Instant = .now) -> (log: Bool, summary: Summary?) {
        state.withLock { s in
            if let last = s.lastLine, now - last < interval {
                if s.suppressed == 0 { s.countingSince = now }
                s.suppressed += 1
                s.latestDetail = detail
                counting.store(true, ordering: .relaxed)
                return (false, nil)
            }
            s.lastLine = now
            return (true, s.takeSummary(now: now, recovered: false))
        }
    }

    /// A request that did not fail as "unavailable": once `interval` has passed since the last line, returns the
    /// count of failures not logged one by one (the outage is over); nil when there is nothing to say yet.
    func succeeded(now: ContinuousClock.Instant? = nil) -> Summary? {
        // Every answer passes here: no clock read unless an outage is being counted.
        guard counting.load(ordering: .relaxed) else { return nil }
        let now = now ?? .now
        return state.withLock { s in
            if s.suppressed == 0 {
                counting.store(false, ordering: .relaxed)
                return nil
            }
            if let last = s.lastLine, now - last < interval { return nil }
            counting.store(false, ordering: .relaxed)
            s.lastLine = now
            return s.takeSummary(now: now, recovered: true)
        }
    }
}
