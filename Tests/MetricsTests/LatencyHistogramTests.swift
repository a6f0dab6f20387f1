import Foundation
import Testing

@testable import Metrics

/// The exact value of rank ⌈p/100 × n⌉ of sorted values (the reference the histogram approximates).
func exactPercentile(_ sorted: [UInt64], _ p: Double) -> UInt64 {
    let rank = max(1, Int((p / 100 * Double(sorted.count) - 1e-9).rounded(.up)))
    return sorted[min(rank, sorted.count) - 1]
}

/// Asserts the documented bound: exact ≤ reported ≤ exact + exact/128.
func expectWithinBound(
    _ h: LatencyHistogram, _ sorted: [UInt64], _ p: Double,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let exact = exactPercentile(sorted, p)
    let reported = h.percentile(p)
    #expect(reported >= exact, "p\(p): \(reported) below exact \(exact)", sourceLocation: sourceLocation)
    #expect(
        reported <= exact + exact / 128, "p\(p): \(reported) above bound of \(exact)",
        sourceLocation: sourceLocation)
}

let standardPercentiles: [Double] = [1, 10, 25, 50, 75, 90, 99, 99.9, 99.99]

@Suite struct LatencyHistogramTests {
    @Test func emptyHistogramReportsZeros() {
        let h = LatencyHistogram()
        #expect(h.count == 0)
        #expect(h.percentile(50) == 0)
        #expect(h.mean == 0)
        #expect(h.buckets.isEmpty)
    }

    @Test func uniformOneToTenThousand() {
        var h = LatencyHistogram()
        for v in UInt64(1)...10_000 { h.record(microseconds: v) }
        #expect(h.count == 10_000)
        #expect(h.min == 1)
        #expect(h.max == 10_000)
        #expect(h.mean == 5_000.5)
        // Hand-computed bucket tops: 5000 lies in [4992, 5023] (width 32), 9000 in [8960, 9023] (width 64),
        // 9900 in [9856, 9919]; 9990 in [9984, 10047], clamped to the exact max 10000.
        #expect(h.percentile(50) == 5_023)
        #expect(h.percentile(90) == 9_023)
        #expect(h.percentile(99) == 9_919)
        #expect(h.percentile(99.9) == 10_000)
        #expect(h.percentile(100) == 10_000)
        #expect(h.percentile(0) == 1)
        let sorted = Array(UInt64(1)...10_000)
        for p in standardPercentiles { expectWithinBound(h, sorted, p) }
    }

    @Test func valuesBelow256AreExact() {
        var h = LatencyHistogram()
        for v in UInt64(0)..<256 { h.record(microseconds: v) }
        // 256 values 0...255: rank ⌈p × 2.56⌉ holds value rank - 1.
        #expect(h.percentile(50) == 127)
        #expect(h.percentile(90) == 230)
        #expect(h.percentile(99) == 253)
        #expect(h.buckets.count == 256)
        #expect(h.buckets.allSatisfy { $0.lowerBound == $0.upperBound && $0.count == 1 })
    }

    @Test func constantDistributionIsExactEverywhere() {
        var h = LatencyHistogram()
        for _ in 0..<1_000 { h.record(microseconds: 1_234) }
        for p in [0.0, 1, 50, 90, 99, 99.9, 100] { #expect(h.percentile(p) == 1_234) }
        #expect(h.mean == 1_234)
        #expect(h.buckets.count == 1)
        #expect(h.buckets.first?.count == 1_000)
        #expect(h.buckets.first.map { (1_232...1_239).contains($0.lowerBound) && $0.upperBound == 1_239 } == true)
    }

    @Test func exponentialDistributionWithinBound() {
        // 100,000 values at the quantiles of an exponential distribution of mean 1000 µs.
        let n = 100_000
        let values = (0..<n).map { i in UInt64((-1_000 * log(1 - (Double(i) + 0.5) / Double(n))).rounded()) }
        var h = LatencyHistogram()
        for v in values.shuffled() { h.record(microseconds: v) }
        let sorted = values.sorted()
        for p in standardPercentiles { expectWithinBound(h, sorted, p) }
        // And near the theory: median 1000·ln 2 ≈ 693, p99 ≈ 4605, p99.9 ≈ 6908.
        #expect((690...700).contains(h.percentile(50)))
        #expect((4_600...4_650).contains(h.percentile(99)))
        #expect((6_900...6_970).contains(h.percentile(99.9)))
        #expect(abs(h.mean - 1_000) < 5)
        #expect(h.max == sorted.last)
    }

    @Test func bimodalDistribution() {
        // 90 % fast (100 µs), 9 % slow (50 ms), 1 % very slow (200 ms).
        var h = LatencyHistogram()
        for _ in 0..<9_000 { h.record(microseconds: 100) }
        for _ in 0..<900 { h.record(microseconds: 50_000) }
        for _ in 0..<100 { h.record(microseconds: 200_000) }
        #expect(h.percentile(50) == 100)
        #expect(h.percentile(90) == 100)
        #expect(h.percentile(90.01) == 50_175)  // 50000 lies in [49920, 50175]
        #expect(h.percentile(99) == 50_175)
        #expect(h.percentile(99.9) == 200_000)
        #expect(h.max == 200_000)
        let expectedSum: Double = 9_000 * 100 + 900 * 50_000 + 100 * 200_000
        #expect(h.mean == expectedSum / 10_000)
        #expect(h.count(atOrBelow: 100) == 9_000)
        #expect(h.count(atOrBelow: 60_000) == 9_900)
    }

    @Test func coversOneHourAndClampsBeyondTheRange() {
        var h = LatencyHistogram()
        let hour: UInt64 = 3_600_000_000
        h.record(microseconds: 1)
        h.record(microseconds: hour)
        #expect(h.percentile(50) == 1)
        #expect(h.percentile(100) == hour)
        #expect(h.percentile(75) == hour)  // clamped to the exact max
        let bucket = h.buckets.last
        #expect(bucket.map { $0.lowerBound <= hour && hour <= $0.upperBound } == true)
        #expect(bucket.map { Double($0.upperBound - $0.lowerBound) <= Double($0.lowerBound) / 128 } == true)
        var huge = LatencyHistogram()
        huge.record(microseconds: UInt64.max / 2)
        #expect(huge.max == UInt64.max / 2)
        #expect(huge.buckets.count == 1)
    }

    @Test func nanosecondsRoundToTheNearestMicrosecond() {
        var h = LatencyHistogram()
        h.record(nanoseconds: 1_499)
        h.record(nanoseconds: 1_500)
        h.record(nanoseconds: 400)
        #expect(h.min == 0)
        #expect(h.max == 2)
        #expect(h.sum == 3)
    }

    @Test func mergeOfPerConnectionHistogramsEqualsOneHistogram() {
        var whole = LatencyHistogram()
        var parts = [LatencyHistogram](repeating: LatencyHistogram(), count: 4)
        for i in 0..<20_000 {
            let v = UInt64((i * 7_919) % 300_000)
            whole.record(microseconds: v)
            parts[i % 4].record(microseconds: v)
        }
        var merged = LatencyHistogram()
        for p in parts { merged.merge(p) }
        #expect(merged == whole)
        for p in standardPercentiles { #expect(merged.percentile(p) == whole.percentile(p)) }
        var empty = LatencyHistogram()
        empty.merge(LatencyHistogram())
        #expect(empty.count == 0)
    }

    @Test func mergeOfDifferentPrecisionKeepsCountsAndExtremes() {
        var fine = LatencyHistogram()
        var coarse = LatencyHistogram(precisionBits: 4)
        for v in UInt64(1_000)...2_000 { coarse.record(microseconds: v) }
        fine.record(microseconds: 5)
        fine.merge(coarse)
        #expect(fine.count == 1_002)
        #expect(fine.min == 5)
        #expect(fine.max == 2_000)
        #expect(fine.sum == 5 + (1_000 + 2_000) * 1_001 / 2)
    }

    @Test func bucketsAreOrderedContiguousAndHoldEveryValue() {
        var h = LatencyHistogram(precisionBits: 5)
        let values: [UInt64] = [0, 1, 63, 64, 65, 127, 128, 1_000, 65_535, 65_536, 10_000_000]
        for v in values { h.record(microseconds: v) }
        let buckets = h.buckets
        #expect(buckets.map(\.count).reduce(0, +) == UInt64(values.count))
        #expect(zip(buckets, buckets.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound })
        for v in values {
            #expect(buckets.contains { $0.lowerBound <= v && v <= $0.upperBound }, "no bucket holds \(v)")
        }
        // Every bucket index maps back to itself: lower and upper bounds land in the same bucket.
        let top = h.index(of: LatencyHistogram.highestTrackable)
        #expect(top == 32 * 34 + 63)  // 2⁴⁰ - 1: magnitude 34, mantissa 63
        #expect(h.upperBound(of: top) == LatencyHistogram.highestTrackable)
        for i in 0...top {
            #expect(h.index(of: h.lowerBound(of: i)) == i)
            #expect(h.index(of: h.upperBound(of: i)) == i)
            if i < top { #expect(h.upperBound(of: i) + 1 == h.lowerBound(of: i + 1)) }
        }
    }
}
