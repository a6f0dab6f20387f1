import Metrics
import Testing

/// The text exposition format, line by line (the gateway's /metrics is also parsed by prometheus_client in
/// OfferGatewayTests).
@Suite("Prometheus registry")
struct PrometheusTests {
    @Test("counters, gauges and sampled families render with HELP, TYPE and escaped labels, in registration order")
    func rendering() {
        let registry = MetricsRegistry()
        let requests = registry.counter("app_requests_total", help: "Requests.\nSecond line", labels: ["method"])
        requests.increment(["a.b"])
        requests.increment(["a.b"], by: 2)
        requests.increment(["quote\"back\\slash\nnl"])
        requests.increment(["a.b"], by: -5)  // ignored: counters only go up
        let gauge = registry.gauge("app_level", help: "Level.")
        gauge.set(2.5)
        gauge.add(-1)
        registry.sampled("app_sampled", help: "Sampled.", type: .counter, labels: ["k"]) { [(["x"], 7)] }
        #expect(
            registry.exposition() == """
                # HELP app_requests_total Requests.\\nSecond line
                # TYPE app_requests_total counter
                app_requests_total{method="a.b"} 3
                app_requests_total{method="quote\\"back\\\\slash\\nnl"} 1
                # HELP app_level Level.
                # TYPE app_level gauge
                app_level 1.5
                # HELP app_sampled Sampled.
                # TYPE app_sampled counter
                app_sampled{k="x"} 7

                """)
        #expect(requests.value(["a.b"]) == 3)
    }

    @Test("histograms: cumulative buckets at their bounds, +Inf, sum and count")
    func histogram() {
        let registry = MetricsRegistry()
        let latency = registry.histogram("op_seconds", help: "Op.", labels: ["op"], buckets: [0.1, 1])
        for value in [0.05, 0.1, 0.5, 3] { latency.observe(value, ["x"]) }
        #expect(latency.count(["x"]) == 4)
        #expect(
            registry.exposition() == """
                # HELP op_seconds Op.
                # TYPE op_seconds histogram
                op_seconds_bucket{op="x",le="0.1"} 2
                op_seconds_bucket{op="x",le="1"} 3
                op_seconds_bucket{op="x",le="+Inf"} 4
                op_seconds_sum{op="x"} 3.65
                op_seconds_count{op="x"} 4

                """)
    }

    @Test("label sets beyond a family's cap fold into _other: input can never grow the series without bound")
    func boundedSeries() {
        let registry = MetricsRegistry()
        let counter = registry.counter("c_total", help: "C.", labels: ["k"], maxSeries: 3)
        for i in 0..<1_000 { counter.increment(["v\(i)"]) }
        #expect(counter.value(["v0"]) == 1 && counter.value(["v2"]) == 1)
        #expect(counter.value(["v3"]) == 0)
        #expect(counter.value(["_other"]) == 997)
        #expect(registry.exposition().split(separator: "\n").count == 2 + 4)
    }

    @Test("a series found once records into the same series as its label values, and is rendered once recorded")
    func seriesFoundOnce() {
        let registry = MetricsRegistry()
        let counter = registry.counter("c_total", help: "C.", labels: ["k"], maxSeries: 2)
        let latency = registry.histogram("h_seconds", help: "H.", labels: ["k"], buckets: [1])
        counter.increment(["negative"], by: -1)  // ignored, and makes no series: the cap's two slots stay free
        _ = counter.series(["idle"])  // found, never recorded into
        let a = counter.series(["a"])
        let timed = latency.series(["a"])
        #expect(
            registry.exposition()
                == "# HELP c_total C.\n# TYPE c_total counter\n# HELP h_seconds H.\n# TYPE h_seconds histogram\n")
        a.increment()
        counter.increment(["a"], by: 2)
        a.increment(by: -1)  // ignored: counters only go up
        timed.observe(0.5)
        latency.observe(2, ["a"])
        #expect(counter.value(["a"]) == 3 && counter.value(["idle"]) == 0 && latency.count(["a"]) == 2)
        // The idle series counts towards the cap (2): a third label set folds into _other.
        counter.increment(["b"])
        #expect(counter.value(["_other"]) == 1)
        #expect(
            registry.exposition() == """
                # HELP c_total C.
                # TYPE c_total counter
                c_total{k="a"} 3
                c_total{k="_other"} 1
                # HELP h_seconds H.
                # TYPE h_seconds histogram
                h_seconds_bucket{k="a",le="1"} 1
                h_seconds_bucket{k="a",le="+Inf"} 2
                h_seconds_sum{k="a"} 2.5
                h_seconds_count{k="a"} 2

                """)
    }
}
