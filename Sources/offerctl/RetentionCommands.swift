// `offerctl retention configure|show`: a tenant's Retention Messaging configuration (API.md §12).
import CLIKit
import JSONRPC

let retentionSpec = CommandSpec(
    "retention", abstract: "Configure what Apple shows at a subscriber's cancel page (Retention Messaging).",
    subcommands: [
        CommandSpec(
            "configure",
            abstract: "Set the default message, the offers and alternate products with their approved messages.",
            options: [
                .option("default-message", "ID", "The approved message shown when nothing better applies (required)."),
                .option(
                    "offer", "OFFER=MESSAGE", "A promotional offer and its approved message.",
                    repeatable: true),
                .option(
                    "alternate", "PRODUCT=MESSAGE",
                    "Another product of the group to suggest, with its approved message.",
                    repeatable: true),
                .option("budget-ms", "MS", "How long an answer may take, in milliseconds (default: 500)."),
            ] + commonOptions,
            arguments: [ArgumentSpec("tenant", "The tenant's slug.")]),
        CommandSpec(
            "show", abstract: "Show a tenant's Retention Messaging configuration.", options: commonOptions,
            arguments: [ArgumentSpec("tenant", "The tenant's slug.")]),
    ])

enum RetentionCommands {
    static let configure: Handler = { command, link in
        show(try await link.call("retention.configure", try configureParams(command)), command)
    }

    static let show: Handler = { command, link in
        show(try await link.call("retention.get", ["tenant": .string(command.arguments[0])]), command)
    }

    /// The `retention.configure` params; a usage error for a missing default or a malformed pair.
    static func configureParams(_ command: ParsedCommand) throws(UsageError) -> JSONObject {
        func pairs(_ option: String, key: String) throws(UsageError) -> JSONValue {
            var list: [JSONValue] = []
            for text in command.values(option) {
                let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                    throw UsageError("--\(option) takes ID=MESSAGE, got '\(text)'", command: command.path)
                }
                list.append([key: .string(parts[0]), "messageId": .string(parts[1])])
            }
            return .array(list)
        }
        var params: JSONObject = [
            "tenant": .string(command.arguments[0]),
            "defaultMessageId": .string(try command.required("default-message")),
            "offers": try pairs("offer", key: "offerId"), "alternateProducts": try pairs("alternate", key: "productId"),
        ]
        if let budget = try command.integer("budget-ms", in: 1...10_000) { params["budgetMs"] = .int(budget) }
        return params
    }

    private static func show(_ result: JSONValue, _ command: ParsedCommand) {
        if command.flag("json") { return Output.json(result) }
        Console.out(
            TextTable.keyValue([
                ("tenant", Output.text(result["tenant"])), ("default message", Output.text(result["defaultMessageId"])),
                ("budget ms", Output.text(result["budgetMs"])), ("updated", Output.text(result["updatedAt"])),
            ]))
        var rows: [JSONValue] = []
        for entry in result["offers"]?.arrayValue ?? [] {
            rows.append(["kind": "offer", "id": entry["offerId"] ?? .null, "messageId": entry["messageId"] ?? .null])
        }
        for entry in result["alternateProducts"]?.arrayValue ?? [] {
            rows.append(
                ["kind": "alternate", "id": entry["productId"] ?? .null, "messageId": entry["messageId"] ?? .null])
        }
        if !rows.isEmpty {
            Console.out(
                "\n"
                    + Output.table(
                        rows, columns: [("kind", "KIND"), ("id", "OFFER/PRODUCT"), ("messageId", "MESSAGE")]))
        }
    }
}
