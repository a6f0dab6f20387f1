import Foundation
import JSONRPC
import Metrics
import Synchronization

/// Request counts and latencies per method, for `system.stats` (and, through `metrics`, for `/metrics`).
public final class GatewayStats: Sendable {
    struct MethodStats {
        var count = 0
        var errors = 0
        /// Answered at once from memory, on the transport's thread (`Gateway.answerNow`).
        var atOnce = 0
        /// 5 precision bits: percentiles within 3.2 % (the load harness's timeline sketches use the same).
        var latency = LatencyHistogram(precisionBits: 5)

        mutating func record(micros: Int, failed: Bool, atOnce: Bool) {
            count += 1
            if failed { errors += 1 }
            if atOnce { self.atOnce += 1 }
            latency.record(microseconds: UInt64(max(0, micros)))
        }
    }

    private let state = Mutex<[String: MethodStats]>([:])
    private let started = Date()
    /// The same counts for Prometheus (`offergate_rpc_*`).
    let metrics: GatewayMetrics

    init(metrics: GatewayMetrics) {
        self.metrics = metrics
    }

    /// A method as its answers are counted: its name, and its label values for the `offergate_rpc_*` families, made
    /// once per method rather than an array per request (three per answer before).
    struct Method: Sendable {
        let name: String
        let labels: [String]

        init(_ name: String) {
            self.name = name
            self.labels = [name]
        }

        /// Requests naming no method the gateway has, counted together (their names are the caller's).
        static let unknown = Method("(unknown)")
    }

    func record(_ method: Method, micros: Int, errorCode: Int?, atOnce: Bool = false) {
        metrics.recordRPC(
            method: method, seconds: Double(max(0, micros)) / 1_000_000, errorCode: errorCode, atOnce: atOnce)
        state.withLock { all in
            // In place (one lookup, the histogram's storage not copied).
            all[method.name, default: MethodStats()].record(micros: micros, failed: errorCode != nil, atOnce: atOnce)
        }
    }

    /// Counts and percentiles per method.
    var json: JSONValue {
        let snapshot = state.withLock { $0 }
        var methods = JSONObject()
        for name in snapshot.keys.sorted() {
            guard let stats = snapshot[name] else { continue }
            methods[name] = [
                "count": .int(stats.count), "errors": .int(stats.errors), "answeredAtOnce": .int(stats.atOnce),
                "p50Micros": .int(Int(stats.latency.percentile(50))),
                "p99Micros": .int(Int(stats.latency.percentile(99))), "maxMicros": .int(Int(stats.latency.max)),
            ]
        }
        return [
            "uptimeSeconds": .int(Int(Date().timeIntervalSince(started))),
            "requests": .int(snapshot.values.reduce(0) { $0 + $1.count }),
            "methods": .object(methods),
        ]
    }
}
