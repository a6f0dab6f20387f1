// The campaign commands against the real gateway (the client side alone is covered by CampaignClientTests).
import Foundation
import JSONRPC
import Testing

@Suite(.serialized)
struct CampaignCommandTests {
    /// A tenant with the test catalog (its code offer is `code-y`).
    func prepared(_ gateway: TestGateway) async throws {
        #expect(try await gateway.ctl(["tenant", "create", "acme", "--bundle-id", "com.acme.app"]).status == 0)
        let file = try gateway.file("Products.storekit", testStoreKit)
        let imported = try await gateway.ctl(["catalog", "import", "acme", file])
        #expect(imported.status == 0, "\(imported)")
    }

    @Test func oneTimeCampaignLifecycle() async throws {
        try await TestGateway.with { gateway in
            try await prepared(gateway)
            let created = try await gateway.ctl(
                ["campaign", "create", "acme", "launch", "--offer", "code-y", "--kind", "oneTime", "--limit", "10"])
            #expect(created.status == 0, "\(created)")
            #expect(created.stdout == "Created campaign launch of tenant acme (offer code-y, oneTime).\n")

            let generated = try await gateway.ctl(["campaign", "generate", "acme", "launch", "--count", "25"])
            #expect(generated.status == 0, "\(generated)")
            #expect(generated.stdout == "Generated 25 codes for campaign launch.\n")

            let stats = try await gateway.ctl(["campaign", "stats", "acme", "launch", "--json"])
            #expect(stats.status == 0, "\(stats)")
            let counters = try stats.json()
            #expect(counters["totalLimit"]?.int64Value == 10)
            #expect(counters["codesGenerated"]?.int64Value == 25)
            #expect(counters["redeemed"]?.int64Value == 0)
            #expect(counters["remaining"]?.int64Value == 10)

            // Export in pages of 7: header + 25 distinct codes, all unused, in the alphabet without 0/O/1/I/L.
            let exported = try await gateway.ctl(["campaign", "export", "acme", "launch", "--page-size", "7"])
            #expect(exported.status == 0, "\(exported)")
            let lines = exported.stdout.split(separator: "\n").map(String.init)
            #expect(lines.first == "code,state,redeemed_at")
            let rows = lines.dropFirst().map {
                $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            }
            #expect(rows.count == 25)
            #expect(Set(rows.map { $0[0] }).count == 25)
            #expect(rows.allSatisfy { $0.count == 3 && $0[2].isEmpty })
            #expect(rows.allSatisfy { !$0[0].contains(where: { "0O1IL".contains($0) }) })

            // Redeem one as the tenant: the export then shows it redeemed, with a time.
            let tenantKey = try #require(
                try await gateway.ctl(["tenant", "rotate-key", "acme", "--json"]).json()["apiKey"]?.stringValue)
            let client = try await RPCClient.connect(to: gateway.connect)
            defer { client.close() }
            _ = try await client.call(
                method: "session.authenticate", params: ["apiKey": .string(tenantKey)], timeout: .seconds(30))
            let code = try #require(rows.first?[0])
            _ = try await client.call(
                method: "codes.redeem",
                params: ["code": .string(code), "customerId": .string(UUID().uuidString.lowercased())],
                timeout: .seconds(30))
            let after = try await gateway.ctl(["campaign", "export", "acme", "launch"])
            let redeemed = after.stdout.split(separator: "\n").filter { $0.hasPrefix(code + ",") }
            #expect(redeemed.count == 1)
            #expect(
                redeemed.first.map {
                    $0.split(separator: ",", omittingEmptySubsequences: false).count == 3 && !$0.hasSuffix(",")
                } == true)

            let list = try await gateway.ctl(["campaign", "list", "acme", "--json"])
            let campaigns = try #require(try list.json()["campaigns"]?.arrayValue)
            #expect(campaigns.compactMap { $0["campaignId"]?.stringValue } == ["launch"])

            let show = try await gateway.ctl(["campaign", "show", "acme", "launch"])
            #expect(show.status == 0, "\(show)")
            #expect(show.stdout.contains("codes generated  25\n"), "\(show)")
            #expect(show.stdout.contains("redeemed         1\n"), "\(show)")

            let off = try await gateway.ctl(["campaign", "deactivate", "acme", "launch"])
            #expect(off.status == 0, "\(off)")
            let stopped = try await gateway.ctl(["campaign", "stats", "acme", "launch"])
            #expect(stopped.stdout.hasPrefix("state            deactivated\n"), "\(stopped)")
            let refused = try await client.call(
                method: "codes.validate", params: ["code": .string(rows[1][0]), "customerId": "someone"],
                timeout: .seconds(30))
            #expect(refused["valid"]?.boolValue == false)
        }
    }

    @Test func customCampaignAndErrors() async throws {
        try await TestGateway.with { gateway in
            try await prepared(gateway)
            let created = try await gateway.ctl(
                [
                    "campaign", "create", "acme", "spring", "--offer", "code-y", "--kind", "custom", "--code",
                    "SPRING26",
                    "--limit", "100", "--per-customer", "1", "--starts", "2026-01-01T00:00:00Z",
                    "--expires", "2027-01-01T00:00:00Z", "--eligibility", "new,expired", "--json",
                ])
            #expect(created.status == 0, "\(created)")
            _ = try created.json()

            let duplicate = try await gateway.ctl(
                ["campaign", "create", "acme", "spring", "--offer", "code-y", "--kind", "custom", "--code", "OTHER"])
            #expect(duplicate.status == 1)
            #expect(duplicate.stderr.contains("(code -32009"), "\(duplicate)")

            let unknownOffer = try await gateway.ctl(
                ["campaign", "create", "acme", "x", "--offer", "no-such-offer", "--kind", "oneTime"])
            #expect(unknownOffer.status == 1, "\(unknownOffer)")

            let unknownTenant = try await gateway.ctl(["campaign", "list", "nope"])
            #expect(unknownTenant.status == 1)
            #expect(unknownTenant.stderr == "offerctl: no tenant 'nope' (code -32004, reason unknown_tenant)\n")

            let unknownCampaign = try await gateway.ctl(["campaign", "stats", "acme", "nope"])
            #expect(unknownCampaign.status == 1)
            #expect(unknownCampaign.stderr.contains("(code -32004"), "\(unknownCampaign)")
        }
    }
}
