import ByteCoding
import Foundation
import Metrics

/// The `--report FILE.html` page: one self-contained document (no scripts, stylesheets, fonts or images from
/// elsewhere) with the summary table, the per-second throughput chart, the latency-over-time chart (p50 and p99
/// per second) and the latency histogram (log-scaled latency against count), all as inline SVG. Every text from
/// the run is escaped.
public enum HTMLReport {
    public static func render(_ r: RunReport) -> String {
        let title = "offer-load: \(r.scenario)"
        var h = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>\(escape(title))</title>
            <style>
            body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:60em}
            table{border-collapse:collapse;margin:1em 0}
            td,th{padding:.2em .8em;text-align:left;border-bottom:1px solid #ddd}
            td.n{text-align:right;font-variant-numeric:tabular-nums}
            .breach{color:#b00;font-weight:bold}.ok{color:#070}
            svg{background:#fafafa;border:1px solid #ddd}svg text{font-size:11px;fill:#333}
            </style></head><body>
            <h1>\(escape(title))</h1>

            """
        h += "<h2>Summary</h2>\n<table>\n"
        var rows: [(String, String)] = [
            ("scenario", r.scenario), ("model", r.model.text), ("targets", r.model.targets.joined(separator: ", ")),
            ("warm-up", "\(Format.fixed(r.model.warmupSeconds, digits: 1)) s, \(r.warmupRequests) requests excluded"),
            ("measured", "\(Format.fixed(r.measuredSeconds, digits: 2)) s"),
            ("requests", "\(Format.number(r.requests)) (\(Format.number(r.successes)) ok)"),
            ("throughput", "\(Format.number(r.throughput)) req/s"),
        ]
        if let cpu = r.cpu { rows.append(("CPU per 1,000 requests", cpu.text)) }
        for (k, v) in rows { h += "<tr><th>\(escape(k))</th><td>\(escape(v))</td></tr>\n" }
        h += "</table>\n<h2>Latency</h2>\n<table><tr>"
        let l = r.latency
        let cells = [
            ("min", l.minMicros), ("p50", l.p50Micros), ("p90", l.p90Micros), ("p99", l.p99Micros),
            ("p99.9", l.p999Micros), ("max", l.maxMicros),
        ]
        for (k, _) in cells { h += "<th>\(k)</th>" }
        h += "<th>mean</th></tr>\n<tr>"
        for (_, v) in cells { h += "<td class=\"n\">\(escape(Format.micros(v)))</td>" }
        h += "<td class=\"n\">\(escape(Format.micros(l.meanMicros)))</td></tr></table>\n"
        if !r.errors.isEmpty {
            h += "<h2>Errors by code</h2>\n<table><tr><th>code</th><th>count</th></tr>\n"
            for (code, count) in r.errors.sorted(by: { $0.key < $1.key }) {
                h += "<tr><td>\(escape(code))</td><td class=\"n\">\(Format.number(count))</td></tr>\n"
            }
            h += "</table>\n"
        }
        if let inv = r.invariants {
            h += "<h2>Invariants</h2>\n"
            if inv.passed {
                h += "<p class=\"ok\">All \(inv.checked.count) invariants hold.</p>\n<ul>"
                for c in inv.checked { h += "<li>\(escape(c))</li>" }
                h += "</ul>\n"
            } else {
                h +=
                    "<p class=\"breach\">INVARIANT BREACH: \(inv.breaches.count) found (exit status "
                    + "\(inv.exitStatus))</p>\n<ul>"
                for b in inv.breaches { h += "<li class=\"breach\">\(escape(b.name)): \(escape(b.description))</li>" }
                h += "</ul>\n"
            }
        }
        h += "<h2>Throughput over time</h2>\n" + throughputChart(r.timeline, measuredSeconds: r.measuredSeconds) + "\n"
        h += "<h2>Latency over time</h2>\n" + timelineChart(withoutShortTail(r.timeline, r.measuredSeconds)) + "\n"
        h += "<h2>Latency histogram</h2>\n" + histogramChart(r.histogram) + "\n"
        h += "</body></html>\n"
        return h
    }

    /// The points without a last second that covers less than a quarter of a second of the measured window (its
    /// few stragglers would draw a misleading final point).
    static func withoutShortTail(_ points: [TimelinePoint], _ measuredSeconds: Double) -> [TimelinePoint] {
        guard let last = points.last, points.count > 1, measuredSeconds - Double(last.second) < 0.25 else {
            return points
        }
        return Array(points.dropLast())
    }

    /// Escapes text for HTML element content and attribute values.
    public static func escape(_ s: String) -> String { HTMLText.escape(s) }

    // MARK: Charts

    static let width = 800.0
    static let height = 320.0
    static let left = 80.0
    static let right = 20.0
    static let top = 20.0
    static let bottom = 50.0

    static func n(_ v: Double) -> String { Format.fixed(v, digits: 1) }

    private static func frame(_ label: String, _ body: String, xLabel: String, yLabel: String) -> String {
        let plotBottom = height - bottom
        return """
            <svg width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" \
            role="img" aria-label="\(escape(label))">
            <line x1="\(n(left))" y1="\(n(top))" x2="\(n(left))" y2="\(n(plotBottom))" stroke="#333"/>
            <line x1="\(n(left))" y1="\(n(plotBottom))" x2="\(n(width - right))" y2="\(n(plotBottom))" stroke="#333"/>
            \(body)
            <text x="\(n((left + width - right) / 2))" y="\(n(height - 8))" text-anchor="middle">\
            \(escape(xLabel))</text>
            <text x="14" y="\(n((top + plotBottom) / 2))" text-anchor="middle" \
            transform="rotate(-90 14 \(n((top + plotBottom) / 2)))">\(escape(yLabel))</text>
            </svg>
            """
    }

    private static func noData(_ label: String) -> String {
        frame(
            label, "<text x=\"\(n(width / 2))\" y=\"\(n(height / 2))\" text-anchor=\"middle\">no data</text>",
            xLabel: "", yLabel: "")
    }

    /// A rounded-up axis maximum (1, 2 or 5 × 10ⁿ).
    static func niceCeiling(_ v: Double) -> Double {
        guard v > 0 else { return 1 }
        let magnitude = pow(10, floor(log10(v)))
        for step in [1.0, 2.0, 5.0, 10.0] where step * magnitude >= v { return step * magnitude }
        return 10 * magnitude
    }

    /// Five labelled horizontal grid lines from 0 up to `yMax` (every chart has them).
    private static func horizontalGrid(yMax: Double, y: (Double) -> Double, label: (Double) -> String) -> String {
        var body = ""
        for i in 0...4 {
            let v = yMax * Double(i) / 4
            body +=
                "<line x1=\"\(n(left - 4))\" y1=\"\(n(y(v)))\" x2=\"\(n(width - right))\" y2=\"\(n(y(v)))\" "
                + "stroke=\"#ddd\"/><text x=\"\(n(left - 6))\" y=\"\(n(y(v) + 4))\" text-anchor=\"end\">"
                + "\(escape(label(v)))</text>\n"
        }
        return body
    }

    /// The axes both time charts share: five labelled horizontal grid lines up to `yMax`, and a tick every few
    /// seconds along the bottom.
    private static func secondsAxes(
        maxSecond: Double, yMax: Double, x: (Double) -> Double, y: (Double) -> Double, label: (Double) -> String
    ) -> String {
        var body = horizontalGrid(yMax: yMax, y: y, label: label)
        let xStep = max(1, Int(niceCeiling(maxSecond / 10)))
        for s in stride(from: 0, through: Int(maxSecond), by: xStep) {
            body +=
                "<line x1=\"\(n(x(Double(s))))\" y1=\"\(n(height - bottom))\" x2=\"\(n(x(Double(s))))\" "
                + "y2=\"\(n(height - bottom + 4))\" stroke=\"#333\"/><text x=\"\(n(x(Double(s))))\" "
                + "y=\"\(n(height - bottom + 16))\" text-anchor=\"middle\">\(s)</text>\n"
        }
        return body
    }

    /// p50 and p99 per second (µs, linear y) over seconds since the warm-up.
    static func timelineChart(_ points: [TimelinePoint]) -> String {
        let label = "Latency over time: p50 and p99 per second"
        guard !points.isEmpty else { return noData(label) }
        let plotW = width - left - right
        let plotH = height - top - bottom
        let maxSecond = Double(max(1, points.count))
        let yMax = niceCeiling(Double(points.map(\.p99Micros).max() ?? 1))
        func x(_ second: Double) -> Double { left + plotW * second / maxSecond }
        func y(_ us: Double) -> Double { top + plotH * (1 - us / yMax) }
        var body = secondsAxes(maxSecond: maxSecond, yMax: yMax, x: x, y: y, label: Format.tick)
        // Each point sits in the middle of its second; seconds without completions are left out of the lines.
        func line(_ value: (TimelinePoint) -> UInt64, _ colour: String) -> String {
            let coords = points.filter { $0.completions > 0 }.map {
                "\(n(x(Double($0.second) + 0.5))),\(n(y(Double(value($0)))))"
            }
            return "<polyline fill=\"none\" stroke=\"\(colour)\" stroke-width=\"1.5\" points=\""
                + coords.joined(separator: " ") + "\"/>\n"
        }
        body += line(\.p50Micros, "#1f77b4") + line(\.p99Micros, "#d62728")
        body +=
            "<rect x=\"\(n(width - right - 110))\" y=\"\(n(top + 6))\" width=\"10\" height=\"3\" fill=\"#1f77b4\"/>"
            + "<text x=\"\(n(width - right - 95))\" y=\"\(n(top + 11))\">p50</text>"
            + "<rect x=\"\(n(width - right - 60))\" y=\"\(n(top + 6))\" width=\"10\" height=\"3\" fill=\"#d62728\"/>"
            + "<text x=\"\(n(width - right - 45))\" y=\"\(n(top + 11))\">p99</text>\n"
        return frame(label, body, xLabel: "seconds since warm-up", yLabel: "latency")
    }

    /// Completions and errors per second (linear y) over seconds since the warm-up.
    ///
    /// The last second of a run is usually cut short (a 5.01 s run has 0.01 s in second 5). Drawn as a full
    /// second it would look like a stall, so a partial last second is drawn as a rate over the part measured
    /// (a narrower bar), or left out with a caption when it covers less than a quarter of a second.
    static func throughputChart(_ all: [TimelinePoint], measuredSeconds: Double = .infinity) -> String {
        let label = "Throughput over time: completions and errors per second"
        var points = all
        var caption = ""
        var lastFraction = 1.0
        if let last = points.last, measuredSeconds.isFinite, Double(last.second) + 1 > measuredSeconds {
            lastFraction = max(0, measuredSeconds - Double(last.second))
            if lastFraction < 0.25 {
                points.removeLast()
                caption =
                    "<p>The last \(Format.fixed(lastFraction, digits: 2)) s (\(Format.number(last.completions)) "
                    + "completions) is too short a window for a per-second rate and is not drawn.</p>\n"
                lastFraction = 1
            }
        }
        guard !points.isEmpty else { return noData(label) + caption }
        func scale(_ p: TimelinePoint, _ v: UInt64) -> Double {
            p.second == points.last?.second ? Double(v) / lastFraction : Double(v)
        }
        let plotW = width - left - right
        let plotH = height - top - bottom
        let maxSecond = Double(max(1, points.count))
        let yMax = niceCeiling(points.map { scale($0, $0.completions) }.max() ?? 1)
        func x(_ second: Double) -> Double { left + plotW * second / maxSecond }
        func y(_ count: Double) -> Double { top + plotH * (1 - count / yMax) }
        var body = secondsAxes(maxSecond: maxSecond, yMax: yMax, x: x, y: y, label: Format.number)
        // One bar per second: completions in blue, the errors among them in red from the baseline.
        let barW = max(1, plotW / maxSecond - 2)
        for p in points {
            let x0 = x(Double(p.second)) + 1
            let w = p.second == points.last?.second ? max(1, barW * lastFraction) : barW
            let completions = scale(p, p.completions)
            let errors = scale(p, p.errors)
            body +=
                "<rect x=\"\(n(x0))\" y=\"\(n(y(completions)))\" width=\"\(n(w))\" "
                + "height=\"\(n(y(0) - y(completions)))\" fill=\"#1f77b4\"/>"
            if p.errors > 0 {
                body +=
                    "<rect x=\"\(n(x0))\" y=\"\(n(y(errors)))\" width=\"\(n(w))\" "
                    + "height=\"\(n(y(0) - y(errors)))\" fill=\"#d62728\"/>"
            }
            body += "\n"
        }
        body +=
            "<rect x=\"\(n(width - right - 150))\" y=\"\(n(top + 4))\" width=\"10\" height=\"8\" fill=\"#1f77b4\"/>"
            + "<text x=\"\(n(width - right - 135))\" y=\"\(n(top + 11))\">completions</text>"
            + "<rect x=\"\(n(width - right - 60))\" y=\"\(n(top + 4))\" width=\"10\" height=\"8\" fill=\"#d62728\"/>"
            + "<text x=\"\(n(width - right - 45))\" y=\"\(n(top + 11))\">errors</text>\n"
        return frame(label, body, xLabel: "seconds since warm-up", yLabel: "requests per second") + caption
    }

    /// Count of requests per latency bin, latency on a log₁₀ x axis (10 bins per decade).
    static func histogramChart(_ buckets: [LatencyHistogram.Bucket]) -> String {
        let label = "Latency histogram: requests per latency bin, log scale"
        guard !buckets.isEmpty else { return noData(label) }
        let binsPerDecade = 10.0
        func bin(_ us: UInt64) -> Int { Int((log10(Double(max(1, us))) * binsPerDecade).rounded(.down)) }
        var bins: [Int: UInt64] = [:]
        for b in buckets { bins[bin(b.lowerBound), default: 0] += b.count }
        let lowDecade = floor(Double(bin(buckets.first?.lowerBound ?? 1)) / binsPerDecade)
        let highDecade = max(lowDecade + 1, ceil(Double(bin(buckets.last?.upperBound ?? 1) + 1) / binsPerDecade))
        let plotW = width - left - right
        let plotH = height - top - bottom
        let yMax = niceCeiling(Double(bins.values.max() ?? 1))
        func x(_ logValue: Double) -> Double { left + plotW * (logValue - lowDecade) / (highDecade - lowDecade) }
        func y(_ count: Double) -> Double { top + plotH * (1 - count / yMax) }
        var body = horizontalGrid(yMax: yMax, y: y, label: Format.number)
        for decade in Int(lowDecade)...Int(highDecade) {
            let px = x(Double(decade))
            body +=
                "<line x1=\"\(n(px))\" y1=\"\(n(height - bottom))\" x2=\"\(n(px))\" "
                + "y2=\"\(n(height - bottom + 4))\" stroke=\"#333\"/><text x=\"\(n(px))\" "
                + "y=\"\(n(height - bottom + 16))\" text-anchor=\"middle\">"
                + "\(escape(Format.tick(pow(10, Double(decade)))))</text>\n"
        }
        for (b, count) in bins.sorted(by: { $0.key < $1.key }) {
            let x0 = x(Double(b) / binsPerDecade)
            let x1 = x(Double(b + 1) / binsPerDecade)
            body +=
                "<rect x=\"\(n(x0))\" y=\"\(n(y(Double(count))))\" width=\"\(n(max(0.5, x1 - x0 - 0.5)))\" "
                + "height=\"\(n(y(0) - y(Double(count))))\" fill=\"#1f77b4\"><title>\(count)</title></rect>\n"
        }
        return frame(label, body, xLabel: "latency (log scale)", yLabel: "requests")
    }
}
