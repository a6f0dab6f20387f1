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

    /// Every method counted so far, by name (made at the gateway's start for its method table, and once for
    /// requests naming no method).
    private let methods = Mutex<[String: Method]>([:])
    private let started = Date()
    /// The same counts for Prometheus (`offergate_rpc_*`).
    let metrics: GatewayMetrics
    /// Requests naming no method the gateway has, counted together (their names are the caller's).
    let unknown: Method

    init(metrics: GatewayMetrics) {
        self.metrics = metrics
        self.unknown = Method("(unknown)", metrics: metrics)
        methods.withLock { $0[unknown.name] = unknown }
    }

    /// A method as its answers are counted: its `system.stats` entry and its `offergate_rpc_*` series, found once
    /// per method when the gateway starts, so that an answer takes their locks and no lookup by name or labels (an
    /// error answer still finds its `[method, code]` series of `offergate_rpc_errors_total`; docs/perf/README.md,
    /// section 1, session 38).
    final class Method: Sendable {
        let name: String
        fileprivate let stats = Mutex(MethodStats())
        fileprivate let requests: Counter.Series
        fileprivate let answeredAtOnce: Counter.Series
        fileprivate let duration: Histogram.Series

        fileprivate init(_ name: String, metrics: GatewayMetrics) {
            self.name = name
            requests = metrics.rpcRequests.series([name])
            answeredAtOnce = metrics.rpcAnsweredAtOnce.series([name])
            duration = metrics.rpcDuration.series([name])
        }
    }

    /// The counts of the method `name` (the same object for every call with one name).
    func method(_ name: String) -> Method {
        methods.withLock { all in
            if let known = all[name] { return known }
            let method = Method(name, metrics: metrics)
            all[name] = method
            return method
        }
    }

    func record(_ method: Method, micros: Int, errorCode: Int?, atOnce: Bool = false) {
        method.stats.withLock { $0.record(micros: micros, failed: errorCode != nil, atOnce: atOnce) }
        method.requests.increment()
        if atOnce { method.answeredAtOnce.increment() }
        method.duration.observe(Double(max(0, micros)) / 1_000_000)
        if let errorCode { metrics.rpcErrors.increment([method.name, String(errorCode)]) }
    }

    /// Counts and percentiles per method.
    var json: JSONValue {
        // The methods answered so far, by name.
        let counted = methods.withLock { $0 }.compactMap { name, method in
            let stats = method.stats.withLock { $0 }
            return stats.count > 0 ? (name: name, stats: stats) : nil
        }.sorted { $0.name < $1.name }
        var byName = JSONObject()
        for (name, stats) in counted {
            byName[name] = [
                "count": .int(stats.count), "errors": .int(stats.errors), "answeredAtOnce": .int(stats.atOnce),
                "p50Micros": .int(Int(stats.latency.percentile(50))),
                "p99Micros": .int(Int(stats.latency.percentile(99))), "maxMicros": .int(Int(stats.latency.max)),
            ]
        }
        return [
            "uptimeSeconds": .int(Int(Date().timeIntervalSince(started))),
            "requests": .int(counted.reduce(0) { $0 + $1.stats.count }),
            "methods": .object(byName),
        ]
    }
}
