// campaign *: written against API.md's campaigns.* shapes (create/list/stats/deactivate/generateCodes/codes),
// tolerant of extra fields and of a list returned bare or under its name.
import CLIKit
import Foundation
import JSONRPC
import OfferDomain
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

enum CampaignCommands {
    static let eligibilityGroups: Set<String> = ["new", "existing", "expired"]

    /// The params of campaigns.create, checked locally (usage errors exit 64 before any connection).
    static func createParams(_ command: ParsedCommand) throws -> JSONObject {
        let kind = try command.required("kind")
        guard kind == "oneTime" || kind == "custom" || kind == "appleOneTime" else {
            throw UsageError("--kind takes oneTime, custom or appleOneTime", command: command.path)
        }
        var params: JSONObject = [
            "tenant": .string(command.arguments[0]), "campaignId": .string(command.arguments[1]),
            "offerId": .string(try command.required("offer")), "kind": .string(kind),
        ]
        if let product = command.value("product") { params["productId"] = .string(product) }
        if let code = command.value("code") {
            guard kind == "custom" else {
                throw UsageError("--code is for --kind custom (one-time codes are generated)", command: command.path)
            }
            params["code"] = .string(code)
        }
        if let name = command.value("apple-reference-name") {
            guard kind == "appleOneTime" else {
                throw UsageError("--apple-reference-name is for --kind appleOneTime", command: command.path)
            }
            params["appleReferenceName"] = .string(name)
        }
        if let limit = try command.integer("limit", in: 1...1_000_000_000) { params["totalLimit"] = .int(limit) }
        if let each = try command.integer("per-customer", in: 1...1_000_000) { params["perCustomerLimit"] = .int(each) }
        for (option, key) in [("starts", "startsAt"), ("expires", "expiresAt")] {
            guard let text = command.value(option) else { continue }
            guard RFC3339.parse(text) != nil else {
                throw UsageError(
                    "--\(option) takes an RFC 3339 time such as 2026-12-01T00:00:00Z", command: command.path)
            }
            params[key] = .string(text)
        }
        if let list = command.value("eligibility") {
            let groups = list.split(separator: ",", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard !groups.isEmpty, groups.allSatisfy(eligibilityGroups.contains) else {
                throw UsageError(
                    "--eligibility takes a comma-separated list of new, existing, expired", command: command.path)
            }
            params["eligibility"] = .array(groups.map { .string($0) })
        }
        return params
    }

    /// Warnings in a result: strings, or objects with a `message`.
    static func warnings(_ result: JSONValue) -> [String] {
        (result["warnings"]?.arrayValue ?? []).map { $0.stringValue ?? $0["message"]?.stringValue ?? $0.description }
    }

    static let create: Handler = { command, link in
        let params = try createParams(command)
        let result = try await link.call("campaigns.create", params)
        for warning in warnings(result) { Console.error("warning: \(warning)") }
        if command.flag("json") { return Output.json(result) }
        let kind = params["kind"]?.stringValue ?? ""
        Console.out(
            "Created campaign \(command.arguments[1]) of tenant \(command.arguments[0])"
                + " (offer \(params["offerId"]?.stringValue ?? ""), \(kind)).\n")
        if kind == "oneTime" {
            Console.error("next: offerctl campaign generate \(command.arguments[0]) \(command.arguments[1]) --count N")
        }
        if kind == "appleOneTime" {
            Console.error("next: offerctl campaign import \(command.arguments[0]) \(command.arguments[1]) CODES_FILE")
        }
    }

    static let listColumns: [(key: String, header: String)] = [
        ("campaignId", "CAMPAIGN"), ("offerId", "OFFER"), ("kind", "KIND"), ("code", "CODE"), ("state", "STATE"),
        ("active", "ACTIVE"), ("totalLimit", "LIMIT"), ("perCustomerLimit", "PER CUSTOMER"), ("redeemed", "REDEEMED"),
        ("startsAt", "STARTS"), ("expiresAt", "EXPIRES"),
    ]

    /// Shown by `campaign show` besides the list's columns.
    static let detailColumns: [(key: String, header: String)] = [
        ("eligibility", "ELIGIBILITY"), ("deactivatedAt", "DEACTIVATED"), ("createdAt", "CREATED"),
    ]

    static let list: Handler = { command, link in
        let result = try await link.call("campaigns.list", ["tenant": .string(command.arguments[0])])
        if command.flag("json") { return Output.json(result) }
        Console.out(Output.table(try Output.list(result, key: "campaigns"), columns: listColumns))
    }

    static func statsLines(_ stats: JSONValue) -> [(String, String)] {
        func count(_ key: String, unlimited: Bool = false) -> String {
            guard let value = stats[key] else { return "-" }
            return unlimited && value.isNull ? "unlimited" : Output.text(value)
        }
        return [
            ("total limit", count("totalLimit", unlimited: true)), ("redeemed", count("redeemed")),
            ("remaining", count("remaining", unlimited: true)), ("rolled back", count("rolledBack")),
            ("codes generated", count("codesGenerated")), ("codes redeemed", count("codesRedeemed")),
        ]
    }

    static func statsParams(_ command: ParsedCommand) -> JSONObject {
        ["tenant": .string(command.arguments[0]), "campaignId": .string(command.arguments[1])]
    }

    static let stats: Handler = { command, link in
        let result = try await link.call("campaigns.stats", statsParams(command))
        if command.flag("json") { return Output.json(result) }
        let state: [(String, String)] = result["state"].map { [("state", Output.text($0))] } ?? []
        Console.out(TextTable.keyValue(state + statsLines(result)))
    }

    /// The campaign's definition (from campaigns.list: the API has no single-campaign read) and its counters.
    static let show: Handler = { command, link in
        let stats = try await link.call("campaigns.stats", statsParams(command))
        let listed = try await link.call("campaigns.list", ["tenant": .string(command.arguments[0])])
        let campaign = try Output.list(listed, key: "campaigns").first {
            $0["campaignId"]?.stringValue == command.arguments[1] || $0["id"]?.stringValue == command.arguments[1]
        }
        if command.flag("json") { return Output.json(["campaign": campaign ?? .null, "stats": stats]) }
        var lines: [(String, String)] = [("campaign", command.arguments[1]), ("tenant", command.arguments[0])]
        if let object = campaign?.objectValue {
            for (key, header) in listColumns + detailColumns where key != "campaignId" && key != "redeemed" {
                guard let value = object[key] else { continue }
                lines.append(
                    (header.lowercased(), key == "totalLimit" && value.isNull ? "unlimited" : Output.text(value)))
            }
        }
        Console.out(TextTable.keyValue(lines + statsLines(stats)))
    }

    static let deactivate: Handler = { command, link in
        let result = try await link.call("campaigns.deactivate", statsParams(command))
        if command.flag("json") { return Output.json(result) }
        Console.out("Deactivated campaign \(command.arguments[1]) of tenant \(command.arguments[0]).\n")
    }

    static let progressMethod = "campaigns.generateCodes.progress"

    /// Generates codes; the gateway's progress notifications (if any) drive a bar on stderr when it is a terminal.
    static let generate: Handler = { command, link in
        let count = try command.integer("count", in: 1...100_000_000) ?? 0
        var params = statsParams(command)
        params["count"] = .int(count)
        if let pattern = command.value("pattern") { params["pattern"] = .string(pattern) }
        let bar = ProgressBar(total: count, label: "generating")
        let shown = Mutex(0)
        link.client.onNotification { request in
            guard request.method == progressMethod, let params = request.params else { return }
            let done = params["generated"]?.int64Value ?? params["done"]?.int64Value ?? params["completed"]?.int64Value
            guard let done else { return }
            // Never draw backwards (notifications of one call arrive in order, but be safe).
            let draw = shown.withLock { seen -> Int? in
                guard Int(done) > seen else { return nil }
                seen = Int(done)
                return seen
            }
            if let draw { bar.update(draw) }
        }
        bar.update(0)
        // Generating millions of codes takes a while: no per-call timeout (a dead gateway closes the connection).
        let result = try await link.call(
            "campaigns.generateCodes", params, timeout: max(link.timeout, .seconds(max(60, count / 1_000))))
        bar.finish()
        if command.flag("json") { return Output.json(result) }
        Console.out("Generated \(Output.text(result["generated"])) codes for campaign \(command.arguments[1]).\n")
    }

    /// The largest codes file read (App Store Connect makes at most 150,000 codes per request; this leaves room).
    static let maxCodesFileBytes = 64 << 20

    /// Reads App Store Connect's codes file (see `AppleCodeFile`) and sends its codes in batches; reports duplicate
    /// and invalid lines by number, never a code. The valid codes are imported even when some lines are invalid.
    static let importCodes: Handler = { command, link in
        let batchSize = try command.integer("batch-size", in: 1...10_000) ?? 10_000
        let path = command.arguments[2]
        let data = try readInputFile(path, what: "codes file", maxBytes: maxCodesFileBytes)
        guard let text = String(data: data, encoding: .utf8) else { throw Failure("codes file \(path) is not UTF-8") }
        let file = AppleCodeFile(parsing: text)
        guard !file.codes.isEmpty else {
            throw Failure("no codes in \(path) (\(file.invalidLines.count) invalid lines)")
        }
        var imported = 0
        var duplicates = 0
        var start = 0
        while start < file.codes.count {
            let end = min(start + batchSize, file.codes.count)
            var params = statsParams(command)
            params["codes"] = .array(file.codes[start..<end].map { .string($0) })
            let result = try await link.call("campaigns.importCodes", params)
            imported += Int(result["imported"]?.int64Value ?? 0)
            duplicates += Int(result["duplicates"]?.int64Value ?? 0)
            start = end
        }
        if command.flag("json") {
            return Output.json([
                "campaignId": .string(command.arguments[1]), "imported": .int(imported),
                "duplicates": .int(duplicates + file.duplicateLines.count),
                "alreadyStored": .int(duplicates), "duplicateLines": .array(file.duplicateLines.map { .int($0) }),
                "invalidLines": .array(file.invalidLines.map { .int($0) }),
                "headerLine": file.headerLine.map { .int($0) } ?? .null,
            ])
        }
        Console.out(
            "Imported \(imported) codes into campaign \(command.arguments[1]) (\(duplicates) already stored).\n")
        func lines(_ numbers: [Int]) -> String {
            numbers.prefix(20).map(String.init).joined(separator: ", ") + (numbers.count > 20 ? ", ..." : "")
        }
        if !file.duplicateLines.isEmpty {
            Console.error("warning: \(file.duplicateLines.count) duplicate lines: \(lines(file.duplicateLines))")
        }
        if !file.invalidLines.isEmpty {
            Console.error("warning: \(file.invalidLines.count) invalid lines (skipped): \(lines(file.invalidLines))")
        }
    }

    /// Streams the codes as CSV page by page (campaigns.codes with `after`); never holds more than one page.
    static let export: Handler = { command, link in
        let pageSize = try command.integer("page-size", in: 1...1000) ?? 1000
        var fd: Int32 = 1
        let output = command.value("output")
        if let output {
            fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw Failure("cannot create \(output): \(String(cString: strerror(errno)))") }
        }
        defer { if fd != 1 { close(fd) } }
        try Console.write(CSV.record(["code", "state", "redeemed_at"]), to: fd)
        var after: String?
        var written = 0
        while true {
            var params = statsParams(command)
            params["limit"] = .int(pageSize)
            if let after { params["after"] = .string(after) }
            let page = try await link.call("campaigns.codes", params)
            let rows = try Output.list(page, key: "codes")
            var text = ""
            for row in rows {
                guard let code = row.stringValue ?? row["code"]?.stringValue else {
                    throw Failure("the gateway's answer has a code entry without 'code'")
                }
                let redeemedAt = row["redeemedAt"]?.stringValue ?? ""
                let state = row["state"]?.stringValue ?? (redeemedAt.isEmpty ? "available" : "redeemed")
                text += CSV.record([code, state, redeemedAt])
            }
            try Console.write(text, to: fd)
            written += rows.count
            // The cursor: the gateway's `next` (null = done) when it gives one, else the last code of a full page.
            let next: String?
            if let object = page.objectValue,
                let key = ["next", "nextAfter", "cursor"].first(where: { object[$0] != nil })
            {
                next = object[key]?.stringValue
            } else {
                next = rows.count >= pageSize ? (rows.last?.stringValue ?? rows.last?["code"]?.stringValue) : nil
            }
            guard let next, !rows.isEmpty, next != after else { break }
            after = next
        }
        if let output { Console.error("exported \(written) codes to \(output)") }
    }
}
