import Foundation
import JSONRPC
import Testing

/// `offerctl campaign import`: App Store Connect's codes file into an appleOneTime campaign (issue 14 point 2).
@Suite struct AppleCodesImportTests {
    @Test func importReadsTheDownloadedFileReportsBadLinesAndAddsNothingTheSecondTime() async throws {
        try await TestGateway.with { gateway in
            #expect(try await gateway.ctl(["tenant", "create", "acme", "--bundle-id", "com.acme.app"]).status == 0)
            #expect(
                try await gateway.ctl(["catalog", "import", "acme", try gateway.file("P.storekit", testStoreKit)])
                    .status == 0)
            let created = try await gateway.ctl([
                "campaign", "create", "acme", "asc", "--offer", "code-y", "--kind", "appleOneTime",
                "--apple-reference-name", "Spring OTC",
            ])
            #expect(created.status == 0, "\(created)")
            #expect(created.stderr.contains("offerctl campaign import acme asc"), "\(created)")
            let usage = try await gateway.ctl([
                "campaign", "create", "acme", "x", "--offer", "code-y", "--kind", "custom", "--code", "X",
                "--apple-reference-name", "Nope",
            ])
            #expect(usage.status == 64, "\(usage)")

            // A CSV as downloaded: a header, the code in the first column, a duplicate and a bad line.
            let codes = (0..<25).map { String(format: "K7QW2M9XR4T%07d", $0) }
            var csv = "Code,Expiration Date\r\n"
            for code in codes { csv += "\(code),2027-05-31\r\n" }
            csv += "\(codes[3].lowercased()),2027-05-31\r\n" + "not a code!,2027-05-31\r\n"
            let file = try gateway.file("offer-codes.csv", csv)
            let first = try await gateway.ctl(["campaign", "import", "acme", "asc", file, "--batch-size", "10"])
            #expect(first.status == 0, "\(first)")
            #expect(first.stdout == "Imported 25 codes into campaign asc (0 already stored).\n", "\(first)")
            #expect(first.stderr.contains("1 duplicate lines: 27"), "\(first)")
            #expect(first.stderr.contains("1 invalid lines (skipped): 28"), "\(first)")
            // No code is ever printed.
            for code in codes { #expect(!first.stdout.contains(code) && !first.stderr.contains(code)) }

            // The same file again adds nothing; a plain one-code-per-line file works too.
            let again = try await gateway.ctl(["campaign", "import", "acme", "asc", file, "--json"])
            let json = try again.json()
            #expect(json["imported"] == 0 && json["alreadyStored"] == 25 && json["duplicateLines"] == [27])
            #expect(json["invalidLines"] == [28] && json["headerLine"] == 1)
            let plain = try gateway.file("codes.txt", "AAAA1111BBBB2222CC\n" + codes[0] + "\n")
            let third = try await gateway.ctl(["campaign", "import", "acme", "asc", plain, "--json"])
            #expect(try third.json()["imported"] == 1 && third.json()["alreadyStored"] == 1, "\(third)")
            let stats = try await gateway.ctl(["campaign", "stats", "acme", "asc", "--json"])
            #expect(try stats.json()["codesGenerated"] == 26, "\(stats)")

            // Exported codes land in a file only its owner may read.
            let out = gateway.scratch.appendingPathComponent("export.csv").path
            #expect(try await gateway.ctl(["campaign", "export", "acme", "asc", "--output", out]).status == 0)
            let mode = try FileManager.default.attributesOfItem(atPath: out)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            #expect(try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n").count == 27)

            let missing = try await gateway.ctl(["campaign", "import", "acme", "asc", "/nonexistent/codes.csv"])
            #expect(missing.status == 1, "\(missing)")
        }
    }
}
