/// A latency histogram in the style of HdrHistogram: log-linear buckets at microsecond resolution.
///
/// Values are whole microseconds. Values below `2 × subBuckets` (256 µs at the default precision) each have their
/// own bucket, so they are exact. Above that, every power-of-two range is cut into `subBuckets` equal buckets, so a
/// bucket's width is at most `1/subBuckets` of its lower bound (≤ 0.79 % at the default 128 sub-buckets, i.e. better
/// than two significant decimal digits). Values up to 2⁴⁰ µs (~12.7 days) are tracked; larger ones are clamped into
/// the top bucket (``max`` stays exact).
///
/// Error bound of ``percentile(_:)``: let `x` be the exact value of rank `⌈p/100 × count⌉` among the recorded
/// values. The reported value `r` satisfies `x ≤ r ≤ x + x/subBuckets` and `r ≤ max`: it is the highest value of
/// the bucket holding `x`. Values below `2 × subBuckets` µs are reported exactly.
///
/// Recording is O(1) (the bucket array grows lazily up to the highest bucket used, so histograms of small
/// latencies stay small). Histograms of equal precision merge by adding counts.
public struct LatencyHistogram: Sendable, Equatable {
    /// log2 of the number of sub-buckets per power of two (7 → 128 sub-buckets, < 0.8 % relative error).
    public let precisionBits: Int
    private var counts: [UInt64]
    /// Number of recorded values.
    public private(set) var count: UInt64 = 0
    /// Smallest recorded value in µs (0 when empty).
    public private(set) var min: UInt64 = 0
    /// Largest recorded value in µs (0 when empty), exact.
    public private(set) var max: UInt64 = 0
    /// Sum of recorded values in µs (exact up to 2⁶⁴ µs), for the mean.
    public private(set) var sum: UInt64 = 0

    /// The highest value tracked in its own bucket; larger values are clamped into the top bucket.
    public static let highestTrackable: UInt64 = (1 << 40) - 1

    /// - Parameter precisionBits: 7 (default) gives < 0.8 % error; 5 (< 3.2 %) suits per-second timeline sketches.
    ///   Clamped to 1...12.
    public init(precisionBits: Int = 7) {
        self.precisionBits = Swift.min(12, Swift.max(1, precisionBits))
        self.counts = []
    }

    private var subBuckets: UInt64 { 1 << UInt64(precisionBits) }

    /// The bucket index of a value: exact below `2 × subBuckets`, then `subBuckets` buckets per power of two.
    @inline(__always)
    func index(of value: UInt64) -> Int {
        let v = Swift.min(value, Self.highestTrackable)
        let exactLimit = subBuckets << 1
        if v < exactLimit { return Int(v) }
        let magnitude = 63 - v.leadingZeroBitCount - precisionBits  // ≥ 1
        return Int(subBuckets) * magnitude + Int(v >> UInt64(magnitude))
    }

    /// The lowest value of bucket `index`.
    func lowerBound(of index: Int) -> UInt64 {
        let sub = Int(subBuckets)
        if index < 2 * sub { return UInt64(index) }
        let magnitude = index / sub - 1
        let mantissa = index - sub * magnitude
        return UInt64(mantissa) << UInt64(magnitude)
    }

    /// The highest value of bucket `index`.
    func upperBound(of index: Int) -> UInt64 {
        let sub = Int(subBuckets)
        if index < 2 * sub { return UInt64(index) }
        let magnitude = index / sub - 1
        return lowerBound(of: index) + (UInt64(1) << UInt64(magnitude)) - 1
    }

    /// Records one latency in microseconds (`times` occurrences).
    public mutating func record(microseconds value: UInt64, times: UInt64 = 1) {
        guard times > 0 else { return }
        let i = index(of: value)
        if i >= counts.count {
            // Grow geometrically so recording stays amortised O(1).
            counts.append(contentsOf: repeatElement(0, count: Swift.max(i + 1 - counts.count, counts.count / 2)))
        }
        counts[i] &+= times
        if count == 0 {
            min = value
            max = value
        } else {
            if value < min { min = value }
            if value > max { max = value }
        }
        count &+= times
        sum &+= value &* times
    }

    /// Records one latency given in nanoseconds, rounded to the nearest microsecond.
    public mutating func record(nanoseconds: UInt64) {
        record(microseconds: (nanoseconds &+ 500) / 1_000)
    }

    /// Adds every value of `other` (which must have the same precision; otherwise its buckets are re-recorded at
    /// their highest value, which keeps the bound of the coarser one).
    public mutating func merge(_ other: LatencyHistogram) {
        guard other.count > 0 else { return }
        if other.precisionBits != precisionBits {
            let (oMin, oMax, oSum) = (other.min, other.max, other.sum)
            let before = (count, min, max, sum)
            for bucket in other.buckets { record(microseconds: bucket.upperBound, times: bucket.count) }
            // Keep the exact extremes and sum of the other histogram.
            count = before.0 + other.count
            min = before.0 == 0 ? oMin : Swift.min(before.1, oMin)
            max = before.0 == 0 ? oMax : Swift.max(before.2, oMax)
            sum = before.3 &+ oSum
            return
        }
        if other.counts.count > counts.count {
            counts.append(contentsOf: repeatElement(0, count: other.counts.count - counts.count))
        }
        for (i, c) in other.counts.enumerated() where c > 0 { counts[i] &+= c }
        if count == 0 {
            min = other.min
            max = other.max
        } else {
            min = Swift.min(min, other.min)
            max = Swift.max(max, other.max)
        }
        count &+= other.count
        sum &+= other.sum
    }

    /// The mean of the recorded values in µs (exact: computed from the exact sum), 0 when empty.
    public var mean: Double { count == 0 ? 0 : Double(sum) / Double(count) }

    /// The value at percentile `p` (0...100) in µs, within the bound stated on the type. `p ≤ 0` gives ``min``,
    /// `p ≥ 100` gives ``max``; an empty histogram gives 0.
    public func percentile(_ p: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        if p <= 0 || p.isNaN { return min }
        if p >= 100 { return max }
        // Rank of the wanted value, 1-based: ⌈p/100 × count⌉, at least 1. Computed with a small tolerance so
        // that e.g. 99.9 % of 1000 is rank 999, not 1000 because of binary rounding.
        let exact = p / 100 * Double(count)
        var rank = UInt64(exact.rounded(.up))
        if Double(rank) - exact > 1 - 1e-9 { rank -= 1 }
        rank = Swift.max(1, Swift.min(rank, count))
        var seen: UInt64 = 0
        for (i, c) in counts.enumerated() where c > 0 {
            seen += c
            if seen >= rank { return Swift.max(min, Swift.min(upperBound(of: i), max)) }
        }
        return max
    }

    /// One non-empty bucket: every recorded value `v` in it has `lowerBound ≤ v ≤ upperBound` (µs).
    public struct Bucket: Sendable, Equatable, Codable {
        public let lowerBound: UInt64
        public let upperBound: UInt64
        public let count: UInt64
    }

    /// The non-empty buckets in increasing order of value, for charts.
    public var buckets: [Bucket] {
        counts.indices.compactMap { i in
            counts[i] == 0
                ? nil : Bucket(lowerBound: lowerBound(of: i), upperBound: upperBound(of: i), count: counts[i])
        }
    }

    /// Two histograms are equal when they hold the same values per bucket (however far their storage grew).
    public static func == (a: LatencyHistogram, b: LatencyHistogram) -> Bool {
        a.precisionBits == b.precisionBits && a.count == b.count && a.min == b.min && a.max == b.max
            && a.sum == b.sum && a.buckets == b.buckets
    }

    /// The number of recorded values `≤ value` µs, counted by bucket (values sharing `value`'s bucket count).
    public func count(atOrBelow value: UInt64) -> UInt64 {
        let last = index(of: value)
        var total: UInt64 = 0
        for i in counts.indices where i <= last { total += counts[i] }
        return total
    }
}
