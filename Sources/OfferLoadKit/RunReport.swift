import Foundation
import Metrics

/// Latency figures of a run in microseconds (within the histogram's < 0.8 % bound; min and max exact).
public struct LatencySummary: Sendable, Equatable, Codable {
    public let count: UInt64
    public let minMicros: UInt64
    public let meanMicros: Double
    public let p50Micros: UInt64
    public let p90Micros: UInt64
    public let p99Micros: UInt64
    public let p999Micros: UInt64
    public let maxMicros: UInt64

    public init(_ h: LatencyHistogram) {
        count = h.count
        minMicros = h.min
        meanMicros = h.mean
        p50Micros = h.percentile(50)
        p90Micros = h.percentile(90)
        p99Micros = h.percentile(99)
        p999Micros = h.percentile(99.9)
        maxMicros = h.max
    }
}

/// The load model of a run, as reported.
public struct ModelSummary: Sendable, Equatable, Codable {
    /// `closed` or `open`.
    public let kind: String
    public let connections: Int
    /// Requests in flight per connection (closed loop).
    public let depth: Int?
    /// Target requests per second (open loop).
    public let rate: Double?
    /// The gateway addresses, connections spread round-robin over them.
    public let targets: [String]
    /// `duration` or `requests`, and its amount (seconds or requests).
    public let stop: String
    public let stopAmount: Double
    public let warmupSeconds: Double

    public init(_ plan: LoadPlan) {
        switch plan.model {
        case .closed(let c, let d):
            (kind, connections, depth, rate) = ("closed", c, d, nil)
        case .open(let c, let r, _):
            (kind, connections, depth, rate) = ("open", c, nil, r)
        }
        targets = plan.targets
        switch plan.stop {
        case .duration(let s): (stop, stopAmount) = ("duration", s)
        case .requests(let n): (stop, stopAmount) = ("requests", Double(n))
        }
        warmupSeconds = plan.warmupSeconds
    }

    /// E.g. `closed loop, 64 connections × depth 8` or `open loop at 5000 req/s over 16 connections`.
    public var text: String {
        if kind == "closed" { return "closed loop, \(connections) connections × depth \(depth ?? 1)" }
        return "open loop at \(Format.number(rate ?? 0)) req/s over \(connections) connections"
    }
}

/// CPU per 1,000 requests of `offer-load` itself and of the gateway process(es) it drove, sampled from `/proc` over
/// the whole run (warm-up included, setup and checks not): whether the harness, not the gateway, was the bottleneck.
public struct CPUSummary: Sendable, Equatable, Codable {
    /// The requests the CPU time is spread over (warm-up and measured completions).
    public let requests: UInt64
    /// `offer-load`'s own user + system CPU, ms per 1,000 requests.
    public let offerLoadMsPer1000: Double
    /// The gateways' user + system CPU, ms per 1,000 requests; nil when no gateway process was found on this host
    /// (another host, or `--gateway-pid` not given for an address that cannot be traced).
    public let gatewayMsPer1000: Double?
    /// The gateway processes sampled.
    public let gatewayPIDs: [Int32]
    /// offer-load's CPU over the gateways': well below 1 means the harness was not the bottleneck.
    public let harnessToGateway: Double?

    public init(_ f: CPUFigures) {
        requests = f.requests
        offerLoadMsPer1000 = f.perThousand(f.offerLoadNanoseconds)
        gatewayMsPer1000 = f.gatewayNanoseconds.map { f.perThousand($0) }
        gatewayPIDs = f.gatewayPIDs
        if let g = f.gatewayNanoseconds, g > 0 {
            harnessToGateway = Double(f.offerLoadNanoseconds) / Double(g)
        } else {
            harnessToGateway = nil
        }
    }

    /// E.g. `offer-load 1.52 ms, gateway 6.10 ms (pid 4242); harness/gateway 0.25`.
    public var text: String {
        var out = "offer-load \(Format.fixed(offerLoadMsPer1000, digits: 2)) ms"
        if let g = gatewayMsPer1000 {
            let pids = gatewayPIDs.map(String.init).joined(separator: ", ")
            out += ", gateway \(Format.fixed(g, digits: 2)) ms (pid\(gatewayPIDs.count > 1 ? "s" : "") \(pids))"
        } else {
            out += ", gateway not measured (not found on this host; --gateway-pid)"
        }
        if let r = harnessToGateway { out += "; harness/gateway \(Format.fixed(r, digits: 2))" }
        return out
    }
}

/// Everything `offer-load` reports about one run; its JSON form is what `--json` prints.
public struct RunReport: Sendable, Equatable, Codable {
    /// The scenario name (`redeem-hot`, `mixed(best=70,sign=30)`).
    public let scenario: String
    public let model: ModelSummary
    /// From the end of the warm-up to the last measured completion.
    public let measuredSeconds: Double
    /// Measured completions (successes and errors).
    public let requests: UInt64
    public let successes: UInt64
    /// Completions excluded as warm-up.
    public let warmupRequests: UInt64
    /// Measured completions per second.
    public let throughput: Double
    public let latency: LatencySummary
    /// Measured errors by JSON-RPC code (`"-32041"`) or `"transport"`.
    public let errors: [String: UInt64]
    public let timeline: [TimelinePoint]
    /// The non-empty histogram buckets (µs), for charts.
    public let histogram: [LatencyHistogram.Bucket]
    /// The invariant check after a redemption run; nil when none ran.
    public let invariants: InvariantReport?
    /// How retrying -32050 answers went (`--retry-unavailable`); nil when the run did not retry.
    public let retries: RetryFigures?
    /// CPU per 1,000 requests of offer-load and the gateway; nil only for results made without sampling.
    public let cpu: CPUSummary?
    /// 0, or 2 when an invariant was breached.
    public let exitStatus: Int32

    public init(scenario: String, plan: LoadPlan, result: RunResult, invariants: InvariantReport? = nil) {
        retries = plan.retryUnavailableSeconds == nil ? nil : result.retries
        self.scenario = scenario
        model = ModelSummary(plan)
        measuredSeconds = Double(result.measuredNanoseconds) / 1e9
        requests = result.measuredRequests
        successes = result.measuredSuccesses
        warmupRequests = result.warmupRequests
        throughput = result.throughput
        latency = LatencySummary(result.latency)
        errors = result.errors
        timeline = result.timeline.points
        histogram = result.latency.buckets
        self.invariants = invariants
        cpu = result.cpu.map(CPUSummary.init)
        exitStatus = invariants?.exitStatus ?? 0
    }

    /// The report as JSON (sorted keys, so runs diff cleanly).
    public func json(pretty: Bool = true) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Number and duration formatting shared by the renderers.
enum Format {
    /// A latency in µs in the most readable unit: `812 µs`, `1.24 ms`, `1.002 s`.
    static func micros(_ us: UInt64) -> String { micros(Double(us)) }

    static func micros(_ us: Double) -> String {
        if us < 1_000 { return "\(Int(us.rounded())) µs" }
        if us < 1_000_000 { return fixed(us / 1_000, digits: us < 10_000 ? 2 : us < 100_000 ? 1 : 0) + " ms" }
        return fixed(us / 1_000_000, digits: 3) + " s"
    }

    /// An axis tick in µs, without needless digits: `100 µs`, `1 ms`, `2.5 ms`, `1 s`.
    static func tick(_ us: Double) -> String {
        if us == 0 { return "0" }
        let (value, unit) = us < 1_000 ? (us, "µs") : us < 1_000_000 ? (us / 1_000, "ms") : (us / 1_000_000, "s")
        var text = fixed(value, digits: 2)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return "\(text) \(unit)"
    }

    /// A decimal with a fixed number of digits after the point (no locale).
    static func fixed(_ value: Double, digits: Int) -> String { String(format: "%.\(digits)f", value) }

    /// A count or rate with thousands separators: `12,345` / `12,345.6`.
    static func number(_ value: Double) -> String {
        let whole = value.rounded(.towardZero)
        let fraction = value - whole
        let text = grouped(UInt64(max(0, whole)))
        if fraction.magnitude < 0.05 || whole >= 10_000 { return text }
        return text + String(format: "%.1f", fraction).dropFirst()
    }

    static func number(_ value: UInt64) -> String { grouped(value) }

    private static func grouped(_ value: UInt64) -> String {
        let digits = Array(String(value))
        var out = ""
        for (i, d) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(d)
        }
        return out
    }
}
