import Foundation
import Metrics

/// Per-second figures of a run, for the latency-over-time chart: completions, errors and a coarse latency sketch
/// (a ``LatencyHistogram`` of 5 precision bits, < 3.2 % error) per second of the measured window.
public struct Timeline: Sendable, Equatable {
    /// The start of second 0, in the clock's nanoseconds.
    public let origin: UInt64
    private var seconds: [Second] = []

    struct Second: Sendable, Equatable {
        var completions: UInt64 = 0
        var errors: UInt64 = 0
        var latency = LatencyHistogram(precisionBits: 5)
    }

    /// - Parameter origin: the clock time (ns) where second 0 starts, normally the end of the warm-up.
    public init(origin: UInt64) {
        self.origin = origin
    }

    /// Records one completion at clock time `completedAt` (ns) with its latency (ns). Completions before the origin
    /// are ignored.
    public mutating func record(completedAt: UInt64, latencyNanoseconds: UInt64, isError: Bool) {
        guard completedAt >= origin else { return }
        let second = Int((completedAt - origin) / 1_000_000_000)
        if second >= seconds.count {
            seconds.append(contentsOf: repeatElement(Second(), count: second + 1 - seconds.count))
        }
        seconds[second].completions += 1
        if isError { seconds[second].errors += 1 }
        seconds[second].latency.record(nanoseconds: latencyNanoseconds)
    }

    /// Adds another timeline with the same origin second by second (per-connection timelines merged at the end).
    public mutating func merge(_ other: Timeline) {
        let shift = Int((Int64(bitPattern: other.origin) - Int64(bitPattern: origin)) / 1_000_000_000)
        for (i, s) in other.seconds.enumerated() {
            let target = i + shift
            guard target >= 0 else { continue }
            if target >= seconds.count {
                seconds.append(contentsOf: repeatElement(Second(), count: target + 1 - seconds.count))
            }
            seconds[target].completions += s.completions
            seconds[target].errors += s.errors
            seconds[target].latency.merge(s.latency)
        }
    }

    /// One point per second from 0 to the last second with a completion (seconds without completions included,
    /// with zero counts: a stall shows as a gap).
    public var points: [TimelinePoint] {
        seconds.enumerated().map { i, s in
            TimelinePoint(
                second: i, completions: s.completions, errors: s.errors,
                p50Micros: s.latency.percentile(50), p99Micros: s.latency.percentile(99), maxMicros: s.latency.max)
        }
    }
}

/// The figures of one second of a run (by completion time).
public struct TimelinePoint: Sendable, Equatable, Codable {
    /// Seconds since the end of the warm-up.
    public let second: Int
    /// Responses received in this second (successes and errors).
    public let completions: UInt64
    /// Of which errors (JSON-RPC error responses and transport failures).
    public let errors: UInt64
    /// Median latency of this second's completions (µs, < 3.2 % error).
    public let p50Micros: UInt64
    /// 99th percentile latency of this second's completions (µs, < 3.2 % error).
    public let p99Micros: UInt64
    /// Largest latency of this second's completions (µs, exact).
    public let maxMicros: UInt64

    public init(
        second: Int, completions: UInt64, errors: UInt64, p50Micros: UInt64, p99Micros: UInt64,
        maxMicros: UInt64
    ) {
        self.second = second
        self.completions = completions
        self.errors = errors
        self.p50Micros = p50Micros
        self.p99Micros = p99Micros
        self.maxMicros = maxMicros
    }
}
