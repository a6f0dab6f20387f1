import Foundation
import JSONRPC
import Synchronization

/// Request counts and latencies per method, for `system.stats`.
public final class GatewayStats: Sendable {
    struct MethodStats {
        var count = 0
        var errors = 0
        /// Log2 buckets of microseconds: bucket i holds latencies in [2^i, 2^(i+1)).
        var buckets = [Int](repeating: 0, count: 40)
        var maxMicros = 0
    }

    private let state = Mutex<[String: MethodStats]>([:])
    private let started = Date()

    func record(method: String, micros: Int, errorCode: Int?) {
        let bucket = micros <= 1 ? 0 : min(39, Int.bitWidth - (micros - 1).leadingZeroBitCount)
        state.withLock { all in
            var stats = all[method] ?? MethodStats()
            stats.count += 1
            if errorCode != nil { stats.errors += 1 }
            stats.buckets[bucket] += 1
            stats.maxMicros = max(stats.maxMicros, micros)
            all[method] = stats
        }
    }

    /// Counts and approximate percentiles (upper bound of the log2 bucket) per method.
    var json: JSONValue {
        let snapshot = state.withLock { $0 }
        var methods = JSONObject()
        for name in snapshot.keys.sorted() {
            guard let stats = snapshot[name] else { continue }
            func percentile(_ p: Double) -> Int {
                let rank = Int((Double(stats.count) * p).rounded(.up))
                var seen = 0
                for (index, count) in stats.buckets.enumerated() {
                    seen += count
                    if seen >= max(rank, 1) { return min(1 << index, stats.maxMicros) }
                }
                return stats.maxMicros
            }
            methods[name] = [
                "count": .int(stats.count), "errors": .int(stats.errors), "p50Micros": .int(percentile(0.5)),
                "p99Micros": .int(percentile(0.99)), "maxMicros": .int(stats.maxMicros),
            ]
        }
        return [
            "uptimeSeconds": .int(Int(Date().timeIntervalSince(started))),
            "requests": .int(snapshot.values.reduce(0) { $0 + $1.count }),
            "methods": .object(methods),
        ]
    }
}
