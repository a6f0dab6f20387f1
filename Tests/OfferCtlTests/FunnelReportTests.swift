// `offerctl report funnel` against a real gateway: the aligned table, --json, and the self-contained --html page.
import Foundation
import JSONRPC
import OfferTestSupport
import Testing

@Suite(.serialized) struct FunnelReportTests {
    /// A tenant from `testStoreKit` with 5 impressions of promo-m on 2026-11-20 and 3 taps on 2026-11-21.
    static func seeded(_ gateway: TestGateway) async throws {
        let created = try await gateway.ctl(["tenant", "create", "acme", "--bundle-id", "com.acme.app", "--json"])
        let key = try #require(try created.json()["apiKey"]?.stringValue)
        #expect(
            try await gateway.ctl(["catalog", "import", "acme", try gateway.file("P.storekit", testStoreKit)]).status
                == 0)
        let client = try await RPCClient.connect(to: gateway.connect)
        defer { client.close() }
        _ = try await client.call(method: "session.authenticate", params: ["apiKey": .string(key)])
        var events: [JSONValue] = (0..<5).map { n in
            [
                "customerId": .string("c\(n)"), "offerId": "promo-m", "event": "impression",
                "at": "2026-11-20T09:00:00Z", "eventId": .string("i\(n)"),
            ]
        }
        events += (0..<3).map { n in
            [
                "customerId": .string("c\(n)"), "offerId": "promo-m", "event": "tap", "at": "2026-11-21T09:00:00Z",
                "eventId": .string("t\(n)"),
            ]
        }
        _ = try await client.call(method: "events.record", params: ["events": .array(events)])
    }

    static let range = ["--from", "2026-11-20", "--to", "2026-11-22"]

    @Test func tableJSONAndHTML() async throws {
        try await TestGateway.with { gateway in
            try await Self.seeded(gateway)
            let table = try await gateway.ctl(["report", "funnel", "acme", "--offer", "promo-m"] + Self.range)
            #expect(table.status == 0, "\(table)")
            let lines = table.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(lines.first == "Funnel of offer promo-m, tenant acme", "\(table)")
            #expect(lines.dropFirst().first == "2026-11-20 to 2026-11-22 (UTC, by day)", "\(table)")
            let rows = lines.map { $0.split(separator: " ").map(String.init) }
            #expect(
                rows.first { $0.first == "START" }
                    == [
                        "START", "OFFERED", "IMPRESSIONS", "TAPS", "SIGNED", "REDEEMED", "CLAIMED", "PURCHASED",
                        "RENEWED",
                    ], "\(table)")
            #expect(
                rows.first { $0.first == "2026-11-20" && $0.count == 9 } == [
                    "2026-11-20", "0", "5", "0", "0", "0", "0", "0", "0",
                ])
            #expect(rows.first { $0.first == "2026-11-21" } == ["2026-11-21", "0", "0", "3", "0", "0", "0", "0", "0"])
            #expect(rows.first { $0.first == "TOTAL" } == ["TOTAL", "0", "5", "3", "0", "0", "0", "0", "0"])
            #expect(rows.first { $0.first == "Taps" } == ["Taps", "3", "-", "60", "%"], "\(table)")
            // Numbers are right-aligned: every TOTAL cell ends where its header ends.
            let header = try #require(lines.first { $0.hasPrefix("START") })
            let total = try #require(lines.first { $0.hasPrefix("TOTAL") })
            #expect(header.count == total.count, "\(table)")

            let json = try await gateway.ctl(["report", "funnel", "acme", "--offer", "promo-m", "--json"] + Self.range)
            let result = try json.json()
            #expect(result["totals"]?["impressions"]?.int64Value == Int64(5))
            #expect(result["totals"]?["taps"]?.int64Value == Int64(3))
            #expect(result["buckets"]?.arrayValue?.count == 2)

            let path = gateway.scratch.appendingPathComponent("funnel.html").path
            let html = try await gateway.ctl(
                ["report", "funnel", "acme", "--offer", "promo-m", "--html", path] + Self.range)
            #expect(html.status == 0, "\(html)")
            #expect(html.stdout == "", "with --html the table is not printed")
            let page = try String(contentsOfFile: path, encoding: .utf8)
            #expect(page.hasPrefix("<!DOCTYPE html>"))
            #expect(page.contains("<svg") && page.contains("<polyline"), "bars and lines are inline SVG")
            #expect(page.contains("Funnel of offer promo-m, tenant acme"))
            for outside in ["http:", "https:", "src=", "href=", "url(", "@import", "<script", "<link"] {
                #expect(!page.contains(outside), "the page refers to something outside itself: \(outside)")
            }

            // The whole tenant and a product; an unknown offer is the gateway's -32602, naming the param.
            let product = try await gateway.ctl(
                ["report", "funnel", "acme", "--product", "com.acme.pro.monthly", "--json"] + Self.range)
            #expect(try product.json()["totals"]?["impressions"]?.int64Value == Int64(5))
            let unknown = try await gateway.ctl(["report", "funnel", "acme", "--offer", "nope"] + Self.range)
            #expect(unknown.status == 1, "\(unknown)")
            #expect(unknown.stderr.contains("code -32602") && unknown.stderr.contains("params.offerId"), "\(unknown)")
        }
    }
}
