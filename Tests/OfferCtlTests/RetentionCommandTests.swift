// offerctl retention configure|show against a real gateway, and its usage errors (exit 64 before any connection).
import Foundation
import JSONRPC
import Testing

@Suite(.serialized) struct RetentionCommandTests {
    @Test func configureAndShow() async throws {
        try await TestGateway.with { gateway in
            #expect(try await gateway.ctl(["tenant", "create", "acme", "--bundle-id", "com.acme.app"]).status == 0)
            let file = try gateway.file("Products.storekit", testStoreKit)
            #expect(try await gateway.ctl(["catalog", "import", "acme", file]).status == 0)

            let configured = try await gateway.ctl([
                "retention", "configure", "acme", "--default-message", "msg-default", "--offer", "promo-m=msg-promo",
                "--alternate", "com.acme.pro.yearly=msg-yearly", "--budget-ms", "300",
            ])
            #expect(configured.status == 0, "\(configured)")
            let lines = configured.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(
                lines.prefix(3) == ["tenant           acme", "default message  msg-default", "budget ms        300"])
            #expect(lines.contains("KIND       OFFER/PRODUCT        MESSAGE"), "\(configured)")
            #expect(lines.contains("offer      promo-m              msg-promo"), "\(configured)")
            #expect(lines.contains("alternate  com.acme.pro.yearly  msg-yearly"), "\(configured)")

            let shown = try await gateway.ctl(["retention", "show", "acme", "--json"])
            #expect(shown.status == 0, "\(shown)")
            let json = try shown.json()
            #expect(json["defaultMessageId"]?.stringValue == "msg-default")
            #expect(json["budgetMs"]?.int64Value == 300)
            #expect(json["offers"] == [["offerId": "promo-m", "messageId": "msg-promo"]])
            #expect(json["alternateProducts"] == [["productId": "com.acme.pro.yearly", "messageId": "msg-yearly"]])

            // The gateway refuses an offer the catalog does not have, names the param, and keeps the old settings.
            let refused = try await gateway.ctl([
                "retention", "configure", "acme", "--default-message", "other", "--offer", "promo-x=msg",
            ])
            #expect(refused.status == 1, "\(refused)")
            #expect(refused.stderr.contains("param: params.offers[0].offerId"), "\(refused)")
            let after = try await gateway.ctl(["retention", "show", "acme", "--json"])
            #expect(try after.json()["defaultMessageId"]?.stringValue == "msg-default")
        }
    }

    static let cases: [([String], String)] = [
        (["retention", "configure", "acme"], "missing --default-message"),
        (
            ["retention", "configure", "acme", "--default-message", "m", "--offer", "promo"],
            "--offer takes ID=MESSAGE, got 'promo'"
        ),
        (
            ["retention", "configure", "acme", "--default-message", "m", "--alternate", "=m"],
            "--alternate takes ID=MESSAGE, got '=m'"
        ),
        (
            ["retention", "configure", "acme", "--default-message", "m", "--budget-ms", "0"],
            "--budget-ms takes a whole number in 1...10000"
        ),
    ]

    @Test(arguments: 0..<cases.count)
    func refusedWithUsageStatus(index: Int) async throws {
        let (arguments, message) = Self.cases[index]
        let outcome = try await Spawn.offerctl(
            arguments, environment: ["OFFERGATE_CONNECT": "unix:/nonexistent/og.sock", "OFFERGATE_ADMIN_KEY": "k"])
        #expect(outcome.status == 64, "\(arguments): \(outcome)")
        #expect(outcome.stderr.split(separator: "\n").first.map(String.init) == "offerctl: \(message)", "\(outcome)")
    }
}
