import Foundation
import Testing

@testable import OfferLoadKit

@Suite struct TimelineTests {
    @Test func bucketsCompletionsBySecondFromTheOrigin() {
        let origin: UInt64 = 5_000_000_000
        var t = Timeline(origin: origin)
        t.record(completedAt: origin - 1, latencyNanoseconds: 1_000, isError: false)  // warm-up: ignored
        for i in 0..<100 {
            t.record(completedAt: origin + UInt64(i) * 10_000_000, latencyNanoseconds: 1_000_000, isError: false)
        }
        t.record(completedAt: origin + 3_200_000_000, latencyNanoseconds: 900_000_000, isError: true)
        let points = t.points
        #expect(points.map(\.second) == [0, 1, 2, 3])
        #expect(points.map(\.completions) == [100, 0, 0, 1])
        #expect(points.map(\.errors) == [0, 0, 0, 1])
        #expect(points[0].p50Micros == 1_000)
        #expect(points[0].p99Micros == 1_000)
        #expect(points[3].maxMicros == 900_000)
        #expect(points[3].p50Micros == 900_000)
        #expect(points[1].p99Micros == 0)
    }

    @Test func mergeAddsSecondBySecond() {
        var a = Timeline(origin: 0)
        var b = Timeline(origin: 0)
        a.record(completedAt: 500_000_000, latencyNanoseconds: 2_000, isError: false)
        b.record(completedAt: 700_000_000, latencyNanoseconds: 4_000_000, isError: true)
        b.record(completedAt: 2_100_000_000, latencyNanoseconds: 3_000, isError: false)
        a.merge(b)
        #expect(a.points.map(\.completions) == [2, 0, 1])
        #expect(a.points.map(\.errors) == [1, 0, 0])
        #expect(a.points[0].maxMicros == 4_000)
    }
}
