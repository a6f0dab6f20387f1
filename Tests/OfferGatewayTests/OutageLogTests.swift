import Testing

@testable import OfferGateway

/// A failover's storm of -32050 failures becomes a few lines: the first in full, then counts.
@Suite("Outage log")
struct OutageLogTests {
    let t0 = ContinuousClock.now

    @Test func aStormOfUnavailableFailuresIsLoggedOnceThenCounted() {
        let log = OutageLog(interval: .seconds(5))
        #expect(log.succeeded(now: t0) == nil)
        // The first failure of an outage is logged in full.
        let first = log.failed(detail: "unavailable: refused", now: t0)
        #expect(first.log && first.summary == nil)
        // 700 more within the interval are only counted; successes meanwhile say nothing yet.
        for i in 1...700 {
            #expect(!log.failed(detail: "unavailable: read-only \(i)", now: t0 + .milliseconds(i)).log)
        }
        #expect(log.succeeded(now: t0 + .seconds(1)) == nil)
        // After the interval, the first success closes the outage with the count and the latest detail.
        let closing = log.succeeded(now: t0 + .seconds(6))
        #expect(closing?.suppressed == 700)
        #expect(closing?.recovered == true)
        #expect(closing?.latestDetail == "unavailable: read-only 700")
        #expect(closing?.over == .milliseconds(6_000 - 1))
        // Nothing is left to say: later successes are silent.
        #expect(log.succeeded(now: t0 + .seconds(7)) == nil)
    }

    @Test func aLongOutageLogsOneFailureInFullPerIntervalWithTheCountBeforeIt() {
        let log = OutageLog(interval: .seconds(5))
        #expect(log.failed(detail: "a", now: t0).log)
        #expect(!log.failed(detail: "b", now: t0 + .seconds(1)).log)
        #expect(!log.failed(detail: "c", now: t0 + .seconds(2)).log)
        let next = log.failed(detail: "d", now: t0 + .seconds(5))
        #expect(next.log)
        #expect(next.summary?.suppressed == 2)
        #expect(next.summary?.recovered == false)
        #expect(next.summary?.latestDetail == "c")
        // A failure in full again only after another interval.
        #expect(!log.failed(detail: "e", now: t0 + .seconds(9)).log)
        #expect(log.failed(detail: "f", now: t0 + .seconds(10)).log)
    }

    @Test func aFlappingDatabaseStillGivesAtMostAboutOneLinePerInterval() {
        let log = OutageLog(interval: .seconds(5))
        var lines = 0
        for i in 0..<1_000 {
            let now = t0 + .milliseconds(10 * i)  // 10 s of alternating failures and successes
            if i.isMultiple(of: 2) {
                let (full, summary) = log.failed(detail: "x", now: now)
                lines += (full ? 1 : 0) + (summary == nil ? 0 : 1)
            } else if log.succeeded(now: now) != nil {
                lines += 1
            }
        }
        #expect(lines <= 4)
        #expect(lines >= 2)
    }
}
