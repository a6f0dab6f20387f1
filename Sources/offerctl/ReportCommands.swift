// `offerctl report funnel`: the offer funnel of a tenant (analytics.funnel) as an aligned table, as JSON, or as a
// self-contained HTML page for product managers.
import ByteCoding
import CLIKit
import Foundation
import JSONRPC

enum ReportCommands {
    static let funnel: Handler = { command, link in
        let query = try FunnelQuery(command)
        var params = query.params
        params["tenant"] = .string(command.arguments[0])
        let result = try await link.call("analytics.funnel", params)
        let report = try FunnelReport(result, tenant: command.arguments[0], subject: query.subject)
        if let path = command.value("html") {
            do {
                try Data(FunnelPage.render(report).utf8).write(to: URL(fileURLWithPath: path))
            } catch {
                throw Failure("cannot write \(path): \(error.localizedDescription)")
            }
            Console.error("wrote \(path)")
        }
        if command.flag("json") { return Output.json(result) }
        if command.value("html") == nil { Console.out(report.text()) }
    }
}

/// The command line of `report funnel`, checked before any connection is made.
struct FunnelQuery {
    /// What the funnel is of, as a person reads it (`offer promo.half`, `every offer`).
    let subject: String
    let params: JSONObject

    init(_ command: ParsedCommand) throws(UsageError) {
        let named = [("offer", "offerId"), ("campaign", "campaignId"), ("product", "productId")].compactMap {
            option, param in command.value(option).map { (option, param, $0) }
        }
        guard named.count <= 1 else {
            throw UsageError("give at most one of --offer, --campaign or --product", command: command.path)
        }
        var params: JSONObject = [:]
        if let (option, param, value) = named.first {
            params[param] = .string(value)
            subject = "\(option) \(value)"
        } else {
            subject = "every offer"
        }
        let bucket = command.value("bucket") ?? "day"
        guard bucket == "day" || bucket == "hour" else {
            throw UsageError("--bucket takes day or hour", command: command.path)
        }
        let to = try Self.time(command, "to") ?? Date()
        let from = try Self.time(command, "from") ?? to.addingTimeInterval(bucket == "day" ? -30 * 86_400 : -48 * 3_600)
        guard from < to else { throw UsageError("--from must be before --to", command: command.path) }
        params["from"] = .string(RFC3339.format(from) ?? "")
        params["to"] = .string(RFC3339.format(to) ?? "")
        params["bucket"] = .string(bucket)
        self.params = params
    }

    private static func time(_ command: ParsedCommand, _ option: String) throws(UsageError) -> Date? {
        guard let text = command.value(option) else { return nil }
        if let date = RFC3339.parse(text) { return date }
        // A bare day means its start, UTC.
        if let date = RFC3339.parse(text + "T00:00:00Z") { return date }
        throw UsageError("--\(option) takes an RFC 3339 time or a day (2026-11-30)", command: command.path)
    }
}

/// An `analytics.funnel` answer, read for people.
struct FunnelReport {
    struct Stage {
        let key: String
        let title: String
        let meaning: String
    }

    /// The stages shown, in funnel order.
    static let stages: [Stage] = [
        Stage(key: "offered", title: "Offered", meaning: "offers.best answers that chose the offer"),
        Stage(key: "impressions", title: "Impressions", meaning: "paywall showed it (events.record)"),
        Stage(key: "taps", title: "Taps", meaning: "customer tapped it (events.record)"),
        Stage(key: "signed", title: "Signed", meaning: "promotional signatures issued (offers.sign)"),
        Stage(key: "redeemed", title: "Redeemed", meaning: "offer codes redeemed (codes.redeem)"),
        Stage(key: "claimed", title: "Claimed", meaning: "Apple one-time codes handed out (codes.claim)"),
        Stage(key: "purchased", title: "Purchased", meaning: "verified App Store purchases that used the offer"),
        Stage(key: "renewed", title: "Renewed", meaning: "of those, renewed at full price later (by purchase time)"),
    ]

    struct Row {
        let start: String
        let counts: [Int]
    }

    let tenant: String
    let subject: String
    let bucket: String
    let from: String
    let to: String
    let rows: [Row]
    let totals: [Int]

    init(_ result: JSONValue, tenant: String, subject: String) throws {
        guard let buckets = result["buckets"]?.arrayValue, let totals = result["totals"] else {
            throw Failure("the gateway's answer has no buckets (is offerctl older than the gateway?)")
        }
        func counts(_ value: JSONValue?) -> [Int] {
            Self.stages.map { Int(value?[$0.key]?.int64Value ?? 0) }
        }
        self.tenant = tenant
        self.subject = subject
        self.bucket = result["bucket"]?.stringValue ?? "day"
        self.from = result["from"]?.stringValue ?? ""
        self.to = result["to"]?.stringValue ?? ""
        self.rows = buckets.map { Row(start: $0["start"]?.stringValue ?? "", counts: counts($0)) }
        self.totals = counts(totals)
    }

    /// A bucket's start as people read it: the day, or the day and hour.
    func label(_ start: String) -> String {
        bucket == "hour" ? String(start.prefix(16)).replacingOccurrences(of: "T", with: " ") : String(start.prefix(10))
    }

    var title: String { "Funnel of \(subject), tenant \(tenant)" }

    var range: String { "\(label(from)) to \(label(to)) (UTC, by \(bucket))" }

    /// `part` as a percentage of `whole` ("-" when there is no whole).
    static func percent(_ part: Int, of whole: Int) -> String {
        guard whole > 0 else { return "-" }
        let value = Double(part) * 100 / Double(whole)
        return value >= 10 || value == 0 ? String(Int(value.rounded())) + " %" : String(format: "%.1f %%", value)
    }

    /// Stage `i`'s total as a share of the nearest earlier stage that counted anything ("-" when none did): a
    /// promotional offer's funnel skips the code stages, and its purchases are compared with its signatures.
    func ofPrevious(_ i: Int) -> String {
        guard let previous = (0..<i).last(where: { totals[$0] > 0 }) else { return "-" }
        return Self.percent(totals[i], of: totals[previous])
    }

    /// The aligned table: one row per bucket, then the totals, then each stage against the one before.
    func text() -> String {
        let headers = ["START"] + Self.stages.map { $0.title.uppercased() }
        var cells = rows.map { [label($0.start)] + $0.counts.map(String.init) }
        cells.append(["TOTAL"] + totals.map(String.init))
        // Numbers right-aligned: each column padded to its widest cell (TextTable aligns left).
        var widths = headers.map(\.count)
        for row in cells { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func pad(_ cell: String, _ i: Int) -> String {
            i == 0 ? cell : String(repeating: " ", count: widths[i] - cell.count) + cell
        }
        var table = TextTable(headers: headers.enumerated().map { pad($1, $0) })
        for row in cells { table.append(row.enumerated().map { pad($1, $0) }) }
        let out = "\(title)\n\(range)\n\n" + table.render() + "\n"
        var steps = TextTable(headers: ["STAGE", "COUNT", "OF OFFERED", "OF PREVIOUS"])
        for (i, stage) in Self.stages.enumerated() {
            steps.append([
                stage.title, String(totals[i]), Self.percent(totals[i], of: totals[0]),
                ofPrevious(i),
            ])
        }
        return out + steps.render()
    }
}

/// The `--html FILE` page: everything inline (CSS and SVG; no scripts, fonts or images from elsewhere), every text
/// from the gateway escaped.
enum FunnelPage {
    static let colours = ["#1f6feb", "#8250df", "#bf3989", "#d1242f", "#bc4c00", "#9a6700", "#1a7f37", "#0f766e"]

    static func render(_ report: FunnelReport) -> String {
        let e = HTMLText.escape
        var h = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>\(e(report.title))</title>
            <style>
            body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;color:#1f2328;max-width:62em;padding:0 1em}
            h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em}
            .sub{color:#59636e;margin-top:0}
            .cards{display:flex;gap:1em;flex-wrap:wrap;margin:1.5em 0}
            .card{border:1px solid #d1d9e0;border-radius:8px;padding:.8em 1.2em;min-width:9em}
            .card b{display:block;font-size:1.6em}.card span{color:#59636e;font-size:.9em}
            table{border-collapse:collapse;margin:1em 0;font-size:.9em}
            td,th{padding:.25em .7em;border-bottom:1px solid #e5e9ed;text-align:right}
            th:first-child,td:first-child{text-align:left}
            tr.total td{font-weight:bold;border-top:2px solid #1f2328}
            svg{display:block;margin:.5em 0}svg text{font-size:12px;fill:#1f2328}
            .legend span{display:inline-block;margin-right:1.2em;font-size:.9em}
            .legend i{display:inline-block;width:1.6em;height:.3em;vertical-align:middle;margin-right:.4em}
            dl{font-size:.9em;color:#59636e}dt{font-weight:bold;color:#1f2328;float:left;width:8em}dd{margin-left:8em}
            </style></head><body>
            <h1>\(e(report.title))</h1>
            <p class="sub">\(e(report.range))</p>

            """
        let t = report.totals
        let last = FunnelReport.stages.count - 2
        h += "<div class=\"cards\">"
        for (title, value) in [
            ("offered", String(t[0])), ("tapped after an impression", FunnelReport.percent(t[2], of: t[1])),
            ("purchased of offered", FunnelReport.percent(t[last], of: t[0])),
            ("renewed of purchased", FunnelReport.percent(t[last + 1], of: t[last])),
        ] {
            h += "<div class=\"card\"><b>\(e(value))</b><span>\(e(title))</span></div>"
        }
        h += "</div>\n<h2>The funnel</h2>\n" + bars(report)
        h += "<h2>Over time</h2>\n"
        h += "<p class=\"sub\">Top of the funnel: offered, impressions and taps per \(e(report.bucket)).</p>\n"
        h += lines(report, stages: [0, 1, 2])
        h +=
            "<p class=\"sub\">Bottom of the funnel: signed, redeemed, claimed, purchased and renewed per "
            + "\(e(report.bucket)).</p>\n"
        h += lines(report, stages: [3, 4, 5, 6, 7])
        h += "<h2>By \(e(report.bucket))</h2>\n<table><tr><th>start (UTC)</th>"
        for stage in FunnelReport.stages { h += "<th>\(e(stage.title))</th>" }
        h += "</tr>\n"
        for row in report.rows {
            h += "<tr><td>\(e(report.label(row.start)))</td>" + row.counts.map { "<td>\($0)</td>" }.joined() + "</tr>\n"
        }
        h += "<tr class=\"total\"><td>total</td>" + t.map { "<td>\($0)</td>" }.joined() + "</tr>\n</table>\n"
        h += "<h2>What the stages count</h2>\n<dl>"
        for stage in FunnelReport.stages { h += "<dt>\(e(stage.title))</dt><dd>\(e(stage.meaning))</dd>" }
        h += "</dl>\n</body></html>\n"
        return h
    }

    static func f(_ v: Double) -> String { String(format: "%.1f", v) }

    /// One horizontal bar per stage, as long as its count against the largest, with the share of the first stage
    /// and of the previous one.
    static func bars(_ report: FunnelReport) -> String {
        let e = HTMLText.escape
        let t = report.totals
        let width = 900.0
        let labelW = 110.0
        let barW = 520.0
        let rowH = 34.0
        let maxCount = Double(max(1, t.max() ?? 1))
        var s = "<svg width=\"\(Int(width))\" height=\"\(Int(rowH * Double(t.count) + 30))\" role=\"img\" "
        s += "aria-label=\"funnel bars\">\n"
        s += "<text x=\"\(f(labelW + barW + 90))\" y=\"14\" text-anchor=\"end\" fill=\"#59636e\">count</text>"
        s += "<text x=\"\(f(labelW + barW + 185))\" y=\"14\" text-anchor=\"end\">of offered</text>"
        s += "<text x=\"\(f(labelW + barW + 270))\" y=\"14\" text-anchor=\"end\">of previous</text>\n"
        for (i, stage) in FunnelReport.stages.enumerated() {
            let y = 22 + Double(i) * rowH
            let w = max(t[i] > 0 ? 2 : 0, barW * Double(t[i]) / maxCount)
            s += "<text x=\"\(f(labelW - 10))\" y=\"\(f(y + 17))\" text-anchor=\"end\">\(e(stage.title))</text>"
            s += "<rect x=\"\(f(labelW))\" y=\"\(f(y + 3))\" width=\"\(f(barW))\" height=\"22\" fill=\"#f3f4f6\"/>"
            s += "<rect x=\"\(f(labelW))\" y=\"\(f(y + 3))\" width=\"\(f(w))\" height=\"22\" fill=\"\(colours[i])\"/>"
            s += "<text x=\"\(f(labelW + barW + 90))\" y=\"\(f(y + 17))\" text-anchor=\"end\">\(t[i])</text>"
            s += "<text x=\"\(f(labelW + barW + 185))\" y=\"\(f(y + 17))\" text-anchor=\"end\">"
            s += "\(e(FunnelReport.percent(t[i], of: t[0])))</text>"
            s += "<text x=\"\(f(labelW + barW + 270))\" y=\"\(f(y + 17))\" text-anchor=\"end\">"
            s += "\(e(i == 0 ? "" : report.ofPrevious(i)))</text>\n"
        }
        return s + "</svg>\n"
    }

    /// The chosen stages per bucket as lines over time, with a legend.
    static func lines(_ report: FunnelReport, stages: [Int]) -> String {
        let e = HTMLText.escape
        let width = 900.0
        let height = 260.0
        let left = 60.0
        let right = 20.0
        let top = 12.0
        let bottom = 40.0
        let rows = report.rows
        let peak = rows.flatMap { row in stages.map { row.counts[$0] } }.max() ?? 0
        let yMax = niceCeiling(Double(max(peak, 1)))
        let plotW = width - left - right
        let plotH = height - top - bottom
        func x(_ i: Int) -> Double {
            rows.count <= 1 ? left + plotW / 2 : left + plotW * Double(i) / Double(rows.count - 1)
        }
        func y(_ v: Double) -> Double { top + plotH * (1 - v / yMax) }
        var s = "<div class=\"legend\">"
        for i in stages {
            s += "<span><i style=\"background:\(colours[i])\"></i>\(e(FunnelReport.stages[i].title))</span>"
        }
        s +=
            "</div>\n<svg width=\"\(Int(width))\" height=\"\(Int(height))\" role=\"img\" aria-label=\"stages over time\">\n"
        for g in 0...4 {
            let v = yMax * Double(g) / 4
            s +=
                "<line x1=\"\(f(left))\" y1=\"\(f(y(v)))\" x2=\"\(f(width - right))\" y2=\"\(f(y(v)))\" stroke=\"#e5e9ed\"/>"
            s += "<text x=\"\(f(left - 8))\" y=\"\(f(y(v) + 4))\" text-anchor=\"end\">\(Int(v))</text>\n"
        }
        let step = max(1, Int((Double(rows.count) / 8).rounded(.up)))
        for (i, row) in rows.enumerated() where i % step == 0 {
            s += "<text x=\"\(f(x(i)))\" y=\"\(f(height - bottom + 18))\" text-anchor=\"middle\">"
            s += "\(e(report.label(row.start)))</text>"
        }
        s +=
            "\n<line x1=\"\(f(left))\" y1=\"\(f(y(0)))\" x2=\"\(f(width - right))\" y2=\"\(f(y(0)))\" stroke=\"#59636e\"/>\n"
        for i in stages {
            let points = rows.enumerated().map { "\(f(x($0.offset))),\(f(y(Double($0.element.counts[i]))))" }
            s += "<polyline fill=\"none\" stroke=\"\(colours[i])\" stroke-width=\"2.5\" stroke-linejoin=\"round\" "
            s += "points=\"\(points.joined(separator: " "))\"/>\n"
            if rows.count <= 60 {
                for (j, row) in rows.enumerated() {
                    s +=
                        "<circle cx=\"\(f(x(j)))\" cy=\"\(f(y(Double(row.counts[i]))))\" r=\"3\" fill=\"\(colours[i])\">"
                    s +=
                        "<title>\(e(FunnelReport.stages[i].title)) \(e(report.label(row.start))): \(row.counts[i])</title>"
                    s += "</circle>"
                }
                s += "\n"
            }
        }
        return s + "</svg>\n"
    }

    /// A rounded-up axis maximum (1, 2 or 5 × 10ⁿ).
    static func niceCeiling(_ v: Double) -> Double {
        guard v > 1 else { return 1 }
        let magnitude = pow(10, floor(log10(v)))
        for step in [1.0, 2.0, 5.0, 10.0] where step * magnitude >= v { return step * magnitude }
        return 10 * magnitude
    }
}
