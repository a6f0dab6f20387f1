// Prometheus metrics: counters, gauges and histograms with bounded label sets, rendered in the text exposition
// format (version 0.0.4). Pure: recording and rendering only; whoever serves /metrics does the IO.
import Synchronization

/// The metrics of one process. Families are registered once (at start-up) and rendered in registration order.
///
/// Label values must come from small fixed sets (method names, outcomes, reasons), never from input such as
/// customer ids or codes: as a backstop each family keeps at most `maxSeries` label sets, and folds any further
/// one into the label values `"_other"`.
public final class MetricsRegistry: Sendable {
    private let families = Mutex<[any MetricFamily]>([])

    public init() {}

    /// A counter (`name` should end in `_total`).
    public func counter(_ name: String, help: String, labels: [String] = [], maxSeries: Int = 500) -> Counter {
        let counter = Counter(name: name, help: help, labels: labels, maxSeries: maxSeries)
        register(counter)
        return counter
    }

    /// A gauge set by the code that owns the value.
    public func gauge(_ name: String, help: String, labels: [String] = [], maxSeries: Int = 500) -> Gauge {
        let gauge = Gauge(name: name, help: help, labels: labels, maxSeries: maxSeries)
        register(gauge)
        return gauge
    }

    /// A histogram of values in the unit of its name (seconds for durations), with upper bounds `buckets`
    /// (ascending; `+Inf` is added).
    public func histogram(
        _ name: String, help: String, labels: [String] = [], buckets: [Double] = Histogram.latencyBuckets,
        maxSeries: Int = 500
    ) -> Histogram {
        let histogram = Histogram(name: name, help: help, labels: labels, buckets: buckets, maxSeries: maxSeries)
        register(histogram)
        return histogram
    }

    /// Values sampled when the metrics are rendered (pool state, process memory): `sample` returns
    /// `(label values, value)` pairs for a gauge (`type: "gauge"`) or a counter (`type: "counter"`).
    public func sampled(
        _ name: String, help: String, type: SampledFamily.Kind = .gauge, labels: [String] = [],
        sample: @escaping @Sendable () -> [([String], Double)]
    ) {
        register(SampledFamily(name: name, help: help, kind: type, labels: labels, sample: sample))
    }

    private func register(_ family: any MetricFamily) {
        families.withLock { $0.append(family) }
    }

    /// The text exposition format (`Content-Type: text/plain; version=0.0.4`).
    public func exposition() -> String {
        let all = families.withLock { $0 }
        var out = ""
        for family in all {
            out += "# HELP \(family.name) \(Self.escapeHelp(family.help))\n# TYPE \(family.name) \(family.type)\n"
            family.render(into: &out)
        }
        return out
    }

    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    static func escapeHelp(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    static func escapeLabel(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\"": out += "\\\""
            default: out.append(c)
            }
        }
        return out
    }

    static func labelText(_ names: [String], _ values: [String], extra: (String, String)? = nil) -> String {
        var parts: [String] = []
        for (name, value) in zip(names, values) { parts.append("\(name)=\"\(escapeLabel(value))\"") }
        if let extra { parts.append("\(extra.0)=\"\(escapeLabel(extra.1))\"") }
        return parts.isEmpty ? "" : "{" + parts.joined(separator: ",") + "}"
    }

    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value == .infinity { return "+Inf" }
        if value == -.infinity { return "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }
}

protocol MetricFamily: Sendable {
    var name: String { get }
    var help: String { get }
    var type: String { get }
    func render(into out: inout String)
}

/// One label set's value in a family, in a box of its own: the family's table finds it by its label values, and a
/// caller that resolved it once (`Counter.series`, `Histogram.series`) records into it without that lookup. nil until
/// first set: a series resolved but never recorded into is not rendered.
final class SeriesBox<Value: Sendable>: Sendable {
    let labelValues: [String]
    private let value = Mutex<Value?>(nil)

    init(labelValues: [String]) {
        self.labelValues = labelValues
    }

    /// Changes the value in place, made from `initial` the first time.
    func update(initial: @autoclosure () -> Value, _ change: (inout Value) -> Void) {
        value.withLock { value in
            if value == nil { value = initial() }
            change(&value!)  // in place: a histogram's counts are not copied
        }
    }

    var current: Value? { value.withLock { $0 } }
}

/// Label sets of one family, capped at `maxSeries` (further ones fold into `_other`).
struct SeriesTable<Value: Sendable> {
    let labelCount: Int
    let maxSeries: Int
    var series: [[String]: SeriesBox<Value>] = [:]
    /// Every box, in the order it was made (the order series are rendered in).
    var order: [SeriesBox<Value>] = []

    /// The box of `values` (made the first time; beyond the cap, the `_other` box).
    mutating func box(_ values: [String]) -> SeriesBox<Value> {
        var values = values
        if values.count != labelCount {
            values = Array((values + Array(repeating: "", count: labelCount)).prefix(labelCount))
        }
        if let box = series[values] { return box }
        if series.count >= maxSeries { values = Array(repeating: "_other", count: labelCount) }
        if let box = series[values] { return box }
        let box = SeriesBox<Value>(labelValues: values)
        series[values] = box
        order.append(box)
        return box
    }
}

extension Mutex {
    /// The box of `values` in a family's table (one lookup under the family's lock).
    fileprivate func box<V>(_ values: [String]) -> SeriesBox<V> where Value == SeriesTable<V> {
        withLock { $0.box(values) }
    }

    /// The boxes set so far, in order, with their values.
    fileprivate func setSeries<V>() -> [(labels: [String], value: V)] where Value == SeriesTable<V> {
        withLock { $0.order }.compactMap { box in box.current.map { (box.labelValues, $0) } }
    }
}

/// One `name{labels} value` line per series set, in the order they were made (counters and gauges).
private func renderLines(
    _ series: [(labels: [String], value: Double)], name: String, labels: [String], into out: inout String
) {
    for (values, value) in series {
        out += "\(name)\(MetricsRegistry.labelText(labels, values)) \(MetricsRegistry.number(value))\n"
    }
}

/// A monotonically increasing count.
public final class Counter: MetricFamily {
    let name: String
    let help: String
    let labels: [String]
    var type: String { "counter" }
    private let table: Mutex<SeriesTable<Double>>

    init(name: String, help: String, labels: [String], maxSeries: Int) {
        self.name = name
        self.help = help
        self.labels = labels
        self.table = Mutex(SeriesTable(labelCount: labels.count, maxSeries: maxSeries))
    }

    /// One series of this counter, found once: what a caller that records into the same label set on every request
    /// keeps, so that each increment takes the series' own lock and no lookup by label values.
    public struct Series: Sendable {
        let box: SeriesBox<Double>

        /// Adds `amount` (≥ 0).
        public func increment(by amount: Double = 1) {
            guard amount >= 0 else { return }
            box.update(initial: 0) { $0 += amount }
        }
    }

    /// The series of `labelValues` (in the order of the family's labels). It counts towards the family's cap, and
    /// is rendered once incremented.
    public func series(_ labelValues: [String] = []) -> Series {
        Series(box: table.box(labelValues))
    }

    /// Adds `amount` (≥ 0) to the series of `labelValues` (in the order of the family's labels).
    public func increment(_ labelValues: [String] = [], by amount: Double = 1) {
        guard amount >= 0 else { return }  // before the series is found: an ignored call makes no series
        series(labelValues).increment(by: amount)
    }

    /// The current value of one series (0 if never incremented).
    public func value(_ labelValues: [String] = []) -> Double {
        table.withLock { $0.series[labelValues] }?.current ?? 0
    }

    func render(into out: inout String) {
        renderLines(table.setSeries(), name: name, labels: labels, into: &out)
    }
}

/// A value that goes up and down.
public final class Gauge: MetricFamily {
    let name: String
    let help: String
    let labels: [String]
    var type: String { "gauge" }
    private let table: Mutex<SeriesTable<Double>>

    init(name: String, help: String, labels: [String], maxSeries: Int) {
        self.name = name
        self.help = help
        self.labels = labels
        self.table = Mutex(SeriesTable(labelCount: labels.count, maxSeries: maxSeries))
    }

    public func set(_ value: Double, _ labelValues: [String] = []) {
        table.box(labelValues).update(initial: 0) { $0 = value }
    }

    public func add(_ amount: Double, _ labelValues: [String] = []) {
        table.box(labelValues).update(initial: 0) { $0 += amount }
    }

    func render(into out: inout String) {
        renderLines(table.setSeries(), name: name, labels: labels, into: &out)
    }
}

/// Cumulative buckets, a sum and a count per label set.
public final class Histogram: MetricFamily {
    /// Seconds, from 0.5 ms to 10 s: the range of a request's latency.
    public static let latencyBuckets: [Double] = [
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    struct Values: Sendable {
        var counts: [UInt64]
        var sum: Double = 0
        var count: UInt64 = 0
    }

    let name: String
    let help: String
    let labels: [String]
    let buckets: [Double]
    var type: String { "histogram" }
    private let table: Mutex<SeriesTable<Values>>

    init(name: String, help: String, labels: [String], buckets: [Double], maxSeries: Int) {
        self.name = name
        self.help = help
        self.labels = labels
        self.buckets = buckets.filter { $0.isFinite }.sorted()
        self.table = Mutex(SeriesTable(labelCount: labels.count, maxSeries: maxSeries))
    }

    /// One series of this histogram, found once (as `Counter.Series`).
    public struct Series: Sendable {
        let box: SeriesBox<Values>
        let buckets: [Double]

        /// Records one value (seconds for durations).
        public func observe(_ value: Double) {
            // The first bucket whose bound is ≥ value (linear: bucket lists are short).
            let index = buckets.firstIndex { value <= $0 } ?? buckets.count
            let width = buckets.count + 1
            box.update(initial: Values(counts: Array(repeating: 0, count: width))) { series in
                series.counts[index] += 1
                series.sum += value
                series.count += 1
            }
        }
    }

    /// The series of `labelValues`; it counts towards the family's cap, and is rendered once observed.
    public func series(_ labelValues: [String] = []) -> Series {
        Series(box: table.box(labelValues), buckets: buckets)
    }

    /// Records one value (seconds for durations).
    public func observe(_ value: Double, _ labelValues: [String] = []) {
        series(labelValues).observe(value)
    }

    /// The number of values recorded in one series.
    public func count(_ labelValues: [String] = []) -> UInt64 {
        table.withLock { $0.series[labelValues] }?.current?.count ?? 0
    }

    func render(into out: inout String) {
        for (key, s) in table.setSeries() {
            var cumulative: UInt64 = 0
            for (i, bound) in buckets.enumerated() {
                cumulative += s.counts[i]
                let labelText = MetricsRegistry.labelText(labels, key, extra: ("le", MetricsRegistry.number(bound)))
                out += "\(name)_bucket\(labelText) \(cumulative)\n"
            }
            let inf = MetricsRegistry.labelText(labels, key, extra: ("le", "+Inf"))
            out += "\(name)_bucket\(inf) \(s.count)\n"
            let plain = MetricsRegistry.labelText(labels, key)
            out += "\(name)_sum\(plain) \(MetricsRegistry.number(s.sum))\n"
            out += "\(name)_count\(plain) \(s.count)\n"
        }
    }
}

/// A family whose values are read when rendered.
public struct SampledFamily: MetricFamily {
    public enum Kind: String, Sendable { case gauge, counter }

    let name: String
    let help: String
    let kind: Kind
    let labels: [String]
    let sample: @Sendable () -> [([String], Double)]
    var type: String { kind.rawValue }

    func render(into out: inout String) {
        for (values, value) in sample() {
            out += "\(name)\(MetricsRegistry.labelText(labels, values)) \(MetricsRegistry.number(value))\n"
        }
    }
}
