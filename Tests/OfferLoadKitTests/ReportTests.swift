import Foundation
import Metrics
import Testing

@testable import OfferLoadKit

/// A small but complete run result: 3 seconds, two latency modes, errors.
func sampleResult() -> RunResult {
    let origin: UInt64 = 10 * second
    var latency = LatencyHistogram()
    var timeline = Timeline(origin: origin)
    for i in 0..<3_000 {
        let nanos: UInt64 = i % 100 == 0 ? 20 * ms : 800_000
        latency.record(nanoseconds: nanos)
        timeline.record(completedAt: origin + UInt64(i) * ms, latencyNanoseconds: nanos, isError: i % 10 == 0)
    }
    return RunResult(
        latency: latency, timeline: timeline, errors: ["-32041": 300], measuredRequests: 3_000,
        measuredSuccesses: 2_700, warmupRequests: 42, measuredNanoseconds: 3 * second, redemptions: [])
}

let samplePlan = LoadPlan(
    model: .closed(connections: 64, depth: 8), stop: .duration(seconds: 3), warmupSeconds: 1,
    targets: ["unix:/tmp/g1.sock", "unix:/tmp/g2.sock"])

@Suite struct ReportTests {
    @Test func reportCarriesTheFigures() {
        let r = RunReport(scenario: "redeem-hot", plan: samplePlan, result: sampleResult())
        #expect(r.requests == 3_000)
        #expect(r.throughput == 1_000)
        #expect(r.latency.p50Micros == 803)  // the top of 800's bucket [800, 803]
        #expect(r.latency.p99Micros == 803)
        #expect(r.latency.p999Micros == 20_000)
        #expect(r.latency.maxMicros == 20_000)
        #expect(r.timeline.map(\.completions) == [1_000, 1_000, 1_000])
        #expect(r.timeline.map(\.errors) == [100, 100, 100])
        #expect(r.histogram.map(\.count) == [2_970, 30])
        #expect(r.model.text == "closed loop, 64 connections × depth 8")
        #expect(r.exitStatus == 0)
        #expect(r.invariants == nil)
    }

    @Test func cpuPerThousandRequestsIsInTheSummaryTheJSONAndTheHTML() throws {
        var result = sampleResult()
        // 3,042 requests (warm-up included): 1.5 ms of offer-load and 6 ms of gateway CPU per 1,000.
        result.cpu = CPUFigures(
            requests: 3_042, offerLoadNanoseconds: 4_563_000, gatewayNanoseconds: 18_252_000, gatewayPIDs: [4242])
        let r = RunReport(scenario: "ping", plan: samplePlan, result: result)
        let cpu = try #require(r.cpu)
        #expect(abs(cpu.offerLoadMsPer1000 - 1.5) < 1e-9)
        #expect(abs((cpu.gatewayMsPer1000 ?? 0) - 6) < 1e-9)
        #expect(abs((cpu.harnessToGateway ?? 0) - 0.25) < 1e-9)
        let line = "offer-load 1.50 ms, gateway 6.00 ms (pid 4242); harness/gateway 0.25"
        #expect(cpu.text == line)
        #expect(SummaryRenderer.render(r).contains("cpu / 1k requests  \(line)"))
        #expect(HTMLReport.render(r).contains("<th>CPU per 1,000 requests</th><td>\(line)</td>"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.json().utf8)) as? [String: Any])
        let json = try #require(object["cpu"] as? [String: Any])
        #expect(json["gatewayPIDs"] as? [Int] == [4242])
        #expect(json["requests"] as? Int == 3_042)
        #expect(try JSONDecoder().decode(RunReport.self, from: Data(r.json().utf8)) == r)

        // No gateway found on this host: offer-load's own figure still, and the gap said.
        result.cpu = CPUFigures(
            requests: 3_042, offerLoadNanoseconds: 4_563_000, gatewayNanoseconds: nil, gatewayPIDs: [])
        let alone = try #require(RunReport(scenario: "ping", plan: samplePlan, result: result).cpu)
        #expect(alone.text == "offer-load 1.50 ms, gateway not measured (not found on this host; --gateway-pid)")
        #expect(alone.harnessToGateway == nil)
    }

    @Test func jsonRoundTripsWithStableKeys() throws {
        let inv = InvariantReport(checked: ["x"], breaches: [.overLimit(campaignId: "c", limit: 1, recorded: 2)])
        let r = RunReport(scenario: "redeem-hot", plan: samplePlan, result: sampleResult(), invariants: inv)
        let json = r.json()
        let back = try JSONDecoder().decode(RunReport.self, from: Data(json.utf8))
        #expect(back == r)
        #expect(back.exitStatus == 2)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(
            Set(object.keys) == [
                "scenario", "model", "measuredSeconds", "requests", "successes", "warmupRequests", "throughput",
                "latency", "errors", "timeline", "histogram", "invariants", "exitStatus",
            ])
        let latency = try #require(object["latency"] as? [String: Any])
        #expect(latency["p999Micros"] as? Int == 20_000)
        #expect(r.json() == json)  // sorted keys: the same bytes every time
    }

    @Test func summaryIsAnAlignedTable() {
        let r = RunReport(scenario: "redeem-hot", plan: samplePlan, result: sampleResult())
        let text = SummaryRenderer.render(r)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let labels = ["scenario", "model", "targets", "warm-up", "duration", "requests", "throughput"]
        let valueColumns = labels.compactMap { label -> Int? in
            guard let line = lines.first(where: { $0.hasPrefix("  \(label) ") }) else { return nil }
            let afterLabel = line.dropFirst(2 + label.count)
            return 2 + label.count + afterLabel.prefix(while: { $0 == " " }).count
        }
        #expect(valueColumns.count == labels.count)
        #expect(Set(valueColumns).count == 1, "values start at columns \(valueColumns)")
        #expect(text.contains("  throughput  1,000 req/s"))
        #expect(text.contains("3,000 (2,700 ok, 300 errors)"))
        #expect(text.contains("-32041  300"))
        // The latency table: headers right-aligned over their values.
        let header = lines.first { $0.contains("p99.9") }
        let values = header.flatMap { h in lines.firstIndex(of: h).map { lines[$0 + 1] } }
        #expect(header?.count == values?.count)
        #expect(values?.contains("803 µs") == true)
        #expect(values?.contains("20.0 ms") == true)
        #expect(!text.contains("INVARIANT"))
    }

    @Test func summaryIsLoudOnABreach() {
        let inv = InvariantReport(
            checked: ["a"], breaches: [.oneTimeCodeRedeemedTwice(codes: 3, worst: 2)])
        let r = RunReport(scenario: "redeem-onetime", plan: samplePlan, result: sampleResult(), invariants: inv)
        let text = SummaryRenderer.render(r)
        #expect(text.contains("!!! INVARIANT BREACH: 1 found !!!"))
        #expect(text.contains("[one_time_code_redeemed_twice] 3 one-time codes redeemed more than once"))
        #expect(text.contains("exit status 2"))
        let passing = RunReport(
            scenario: "redeem-onetime", plan: samplePlan, result: sampleResult(),
            invariants: InvariantReport(checked: ["a", "b"], breaches: []))
        #expect(SummaryRenderer.render(passing).contains("invariants: OK (2 checked)"))
    }

    @Test func htmlIsSelfContainedWithEveryChart() {
        let r = RunReport(scenario: "best", plan: samplePlan, result: sampleResult())
        let html = HTMLReport.render(r)
        #expect(html.hasPrefix("<!DOCTYPE html>"))
        #expect(html.hasSuffix("</html>\n"))
        #expect(html.components(separatedBy: "<svg").count - 1 == 3)  // throughput, latency over time, histogram
        #expect(html.components(separatedBy: "<polyline").count - 1 == 2)  // p50 and p99
        #expect(html.components(separatedBy: "<rect").count - 1 >= 2 + 2)  // legend + one bar per mode
        for label in [
            "seconds since warm-up", "latency (log scale)", "requests", ">p50<", ">p99<", "requests per second",
            ">completions<", ">errors<",
        ] {
            #expect(html.contains(label), "missing \(label)")
        }
        // Nothing fetched from elsewhere.
        for banned in ["http:", "https:", "<script", "<link", "@import", "url(", "<img", "<iframe", "src="] {
            #expect(!html.contains(banned), "found \(banned)")
        }
        // Decade ticks of the log axis: the modes are 800 µs and 20 ms.
        #expect(html.contains(">100 µs<"))
        #expect(html.contains(">1 ms<"))
        #expect(html.contains(">100 ms<"))
    }

    /// A 2.01 s run has 0.01 s in its third second: drawn as a whole second its few completions would look like a
    /// stall, so it is left out with a caption; a last second covering half a second is drawn as a rate over it.
    @Test func partialLastSecondIsNotDrawnAsAStall() {
        let points = [
            TimelinePoint(second: 0, completions: 1_000, errors: 0, p50Micros: 1, p99Micros: 2, maxMicros: 3),
            TimelinePoint(second: 1, completions: 1_000, errors: 0, p50Micros: 1, p99Micros: 2, maxMicros: 3),
            TimelinePoint(second: 2, completions: 10, errors: 0, p50Micros: 1, p99Micros: 2, maxMicros: 3),
        ]
        let short = HTMLReport.throughputChart(points, measuredSeconds: 2.01)
        #expect(short.contains("The last 0.01 s (10 completions)"))
        #expect(short.components(separatedBy: "<rect").count - 1 == 2 + 2)  // legend + 2 bars
        #expect(HTMLReport.withoutShortTail(points, 2.01).count == 2)
        let half = HTMLReport.throughputChart(points, measuredSeconds: 2.5)
        #expect(!half.contains("The last"))
        #expect(half.components(separatedBy: "<rect").count - 1 == 2 + 3)
        #expect(HTMLReport.withoutShortTail(points, 2.5).count == 3)
        // 10 completions over 0.5 s = 20/s: the y axis still tops at 1,000, the bars at full height for 1,000/s.
        #expect(half.contains(">1,000<"))
    }

    @Test func htmlEscapesEveryInsertedText() {
        var plan = samplePlan
        plan.targets = ["unix:/tmp/<b>&\"'.sock"]
        let inv = InvariantReport(
            checked: ["<i>checked</i>"],
            breaches: [.acknowledgedButMissing(campaignId: "<c>", count: 1, examples: ["x"])])
        var result = sampleResult()
        result.errors = ["<e>": 1]
        let r = RunReport(scenario: "<script>alert(1)</script>", plan: plan, result: result, invariants: inv)
        let html = HTMLReport.render(r)
        #expect(!html.contains("<script>"))
        #expect(!html.contains("<b>"))
        #expect(!html.contains("<c>"))
        #expect(!html.contains("<e>"))
        #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(html.contains("unix:/tmp/&lt;b&gt;&amp;&quot;&#39;.sock"))
        #expect(HTMLReport.escape("a<b>&\"'") == "a&lt;b&gt;&amp;&quot;&#39;")
    }

    @Test func emptyRunRendersWithoutCharts() {
        let empty = RunResult(
            latency: LatencyHistogram(), timeline: Timeline(origin: 0), errors: [:], measuredRequests: 0,
            measuredSuccesses: 0, warmupRequests: 0, measuredNanoseconds: 0, redemptions: [])
        let r = RunReport(scenario: "ping", plan: samplePlan, result: empty)
        #expect(r.throughput == 0)
        let html = HTMLReport.render(r)
        #expect(html.components(separatedBy: "no data").count - 1 == 3)
        #expect(SummaryRenderer.render(r).contains("requests    0 (0 ok, 0 errors)"))
    }

    @Test func latencyFormatting() {
        #expect(Format.micros(812 as UInt64) == "812 µs")
        #expect(Format.micros(1_240 as UInt64) == "1.24 ms")
        #expect(Format.micros(20_000 as UInt64) == "20.0 ms")
        #expect(Format.micros(250_000 as UInt64) == "250 ms")
        #expect(Format.micros(1_002_000 as UInt64) == "1.002 s")
        #expect(Format.number(1_234_567 as UInt64) == "1,234,567")
        #expect(Format.number(1_234.56) == "1,234.6")
        #expect(Format.number(0.0) == "0")
        #expect(Format.tick(100) == "100 µs")
        #expect(Format.tick(2_500) == "2.5 ms")
        #expect(Format.tick(1_000_000) == "1 s")
        #expect(Format.tick(0) == "0")
    }
}
