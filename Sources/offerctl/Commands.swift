// The verbs: each turns its command line into JSON-RPC params, calls the gateway, and prints the result.
import CLIKit
import Foundation
import JSONRPC
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One verb's body, run on an authenticated admin link.
typealias Handler = @Sendable (ParsedCommand, GatewayLink) async throws -> Void

/// The verbs that talk to a gateway, by command path.
let handlers: [[String]: Handler] = [
    ["tenant", "create"]: TenantCommands.create,
    ["tenant", "list"]: TenantCommands.list,
    ["tenant", "rotate-key"]: TenantCommands.rotateKey,
    ["tenant", "update"]: TenantCommands.update,
    ["key", "import"]: KeyCommands.importKey,
    ["key", "list"]: KeyCommands.list,
    ["key", "retire"]: KeyCommands.retire,
    ["catalog", "import"]: CatalogCommands.importFile,
    ["catalog", "show"]: CatalogCommands.show,
    ["customer", "show"]: CustomerCommands.show,
    ["campaign", "create"]: CampaignCommands.create,
    ["campaign", "list"]: CampaignCommands.list,
    ["campaign", "show"]: CampaignCommands.show,
    ["campaign", "stats"]: CampaignCommands.stats,
    ["campaign", "deactivate"]: CampaignCommands.deactivate,
    ["campaign", "generate"]: CampaignCommands.generate,
    ["campaign", "export"]: CampaignCommands.export,
    ["campaign", "import"]: CampaignCommands.importCodes,
    ["report", "funnel"]: ReportCommands.funnel,
    ["retention", "configure"]: RetentionCommands.configure,
    ["retention", "show"]: RetentionCommands.show,
]

/// Checks a verb's local input before any connection is made (so usage errors exit 64 without a gateway).
let validators: [[String]: @Sendable (ParsedCommand) throws -> Void] = [
    ["tenant", "create"]: { _ = try $0.required("bundle-id") },
    ["tenant", "update"]: { _ = try TenantCommands.updateParams($0) },
    ["key", "import"]: { command in
        _ = try command.required("key-id")
        _ = try command.required("p8")
    },
    ["campaign", "create"]: { _ = try CampaignCommands.createParams($0) },
    ["campaign", "generate"]: { command in
        guard try command.integer("count", in: 1...100_000_000) != nil else {
            throw UsageError("missing --count", command: command.path)
        }
    },
    ["campaign", "export"]: { _ = try $0.integer("page-size", in: 1...1000) },
    ["campaign", "import"]: { _ = try $0.integer("batch-size", in: 1...10_000) },
    ["report", "funnel"]: { _ = try FunnelQuery($0) },
    ["retention", "configure"]: { _ = try RetentionCommands.configureParams($0) },
]

/// Reads a small input file (a key, a catalog) whole; the size cap keeps a wrong path from eating memory.
func readInputFile(_ path: String, what: String, maxBytes: Int) throws -> Data {
    guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else {
        throw Failure("cannot read \(what) \(path)")
    }
    // The size first: a wrong path to a huge file is refused before it is read.
    if let size = attributes[.size] as? Int, size > maxBytes { throw Failure("\(what) \(path) is too large") }
    guard let data = FileManager.default.contents(atPath: path) else { throw Failure("cannot read \(what) \(path)") }
    guard data.count <= maxBytes else { throw Failure("\(what) \(path) is too large") }
    return data
}

/// Tells where an API key went: printed once, never stored by offerctl.
func storeKeyNote(_ slug: String) {
    Console.error(
        "note: store this API key now (e.g. in your app backend's secret store): it is shown only once."
            + " A lost key cannot be recovered, only replaced: offerctl tenant rotate-key \(slug)")
}

enum CustomerCommands {
    static let show: Handler = { command, link in
        var params: JSONObject = ["tenant": .string(command.arguments[0]), "customerId": .string(command.arguments[1])]
        if let at = command.value("at") { params["at"] = .string(at) }
        let result = try await link.call("customers.get", params)
        if command.flag("json") { return Output.json(result) }
        Console.out("customer \(Output.text(result["customerId"])) at \(Output.text(result["at"]))\n")
        Console.out(
            Output.table(
                try Output.list(result, key: "groups"),
                columns: [
                    ("groupId", "GROUP"), ("state", "STATE"), ("source", "SOURCE"), ("environment", "ENVIRONMENT"),
                    ("activeProductId", "PRODUCT"), ("autoRenew", "AUTO-RENEW"), ("lastExpiry", "LAST EXPIRY"),
                    ("paidMonths", "PAID MONTHS"), ("eligibleWinBackOfferIds", "APPLE WIN-BACK"),
                ]))
    }
}

enum TenantCommands {
    static let create: Handler = { command, link in
        let slug = command.arguments[0]
        var params: JSONObject = ["slug": .string(slug), "bundleId": .string(try command.required("bundle-id"))]
        if let name = command.value("name") { params["name"] = .string(name) }
        let result = try await link.call("tenants.create", params)
        if command.flag("json") {
            Output.json(result)
        } else {
            Console.out(
                TextTable.keyValue([
                    ("tenant", Output.text(result["slug"])), ("bundle id", Output.text(result["bundleId"])),
                    ("api key", Output.text(result["apiKey"])),
                ]))
        }
        storeKeyNote(slug)
    }

    static let list: Handler = { command, link in
        let result = try await link.call("tenants.list", [:])
        if command.flag("json") { return Output.json(result) }
        let rows = try Output.list(result, key: "tenants")
        Console.out(
            Output.table(
                rows,
                columns: [
                    ("slug", "SLUG"), ("name", "NAME"), ("bundleId", "BUNDLE ID"), ("createdAt", "CREATED"),
                ]))
    }

    static let rotateKey: Handler = { command, link in
        let slug = command.arguments[0]
        let result = try await link.call("tenants.rotateApiKey", ["tenant": .string(slug)])
        if command.flag("json") {
            Output.json(result)
        } else {
            Console.out(
                TextTable.keyValue([
                    ("tenant", Output.text(result["tenant"])), ("api key", Output.text(result["apiKey"])),
                ]))
        }
        Console.error("note: the previous API key of \(slug) no longer works.")
        storeKeyNote(slug)
    }

    static let update: Handler = { command, link in
        let result = try await link.call("tenants.update", try updateParams(command))
        if command.flag("json") { return Output.json(result) }
        Console.out(
            TextTable.keyValue([
                ("tenant", Output.text(result["slug"])), ("name", Output.text(result["name"])),
                ("bundle id", Output.text(result["bundleId"])), ("app apple id", Output.text(result["appAppleId"])),
                ("allow sandbox", Output.text(result["allowSandbox"])),
                ("allow xcode", Output.text(result["allowXcode"])),
            ]))
    }

    /// The `tenants.update` params; a usage error for a bad value or when nothing is to change.
    static func updateParams(_ command: ParsedCommand) throws(UsageError) -> JSONObject {
        var params: JSONObject = ["tenant": .string(command.arguments[0])]
        if let name = command.value("name") { params["name"] = .string(name) }
        if let id = try command.integer("app-apple-id", in: 1...Int.max) { params["appAppleId"] = .int(id) }
        for (option, param) in [("allow-sandbox", "allowSandbox"), ("allow-xcode", "allowXcode")] {
            guard let text = command.value(option) else { continue }
            switch text {
            case "yes": params[param] = true
            case "no": params[param] = false
            default: throw UsageError("--\(option) takes yes or no", command: command.path)
            }
        }
        guard params.count > 1 else {
            throw UsageError(
                "say what to change: --name, --app-apple-id, --allow-sandbox or --allow-xcode", command: command.path)
        }
        return params
    }
}

enum KeyCommands {
    static let importKey: Handler = { command, link in
        let tenant = command.arguments[0]
        let path = try command.required("p8")
        let pem = String(decoding: try readInputFile(path, what: "the key file", maxBytes: 64 << 10), as: UTF8.self)
        var params: JSONObject = [
            "tenant": .string(tenant), "keyId": .string(try command.required("key-id")), "privateKeyPem": .string(pem),
        ]
        if let issuer = command.value("issuer-id") { params["issuerId"] = .string(issuer) }
        var result = try await link.call("keys.import", params)
        // Never echo key material, even if a future gateway returned more than the public key.
        if var object = result.objectValue {
            object["privateKeyPem"] = nil
            result = .object(object)
        }
        if command.flag("json") { return Output.json(result) }
        Console.out(
            TextTable.keyValue([
                ("tenant", Output.text(result["tenant"])), ("key id", Output.text(result["keyId"])),
                ("state", Output.text(result["state"])),
            ]))
    }

    static let list: Handler = { command, link in
        let result = try await link.call("keys.list", ["tenant": .string(command.arguments[0])])
        if command.flag("json") { return Output.json(result) }
        Console.out(
            Output.table(
                try Output.list(result, key: "keys"),
                columns: [
                    ("keyId", "KEY ID"), ("issuerId", "ISSUER ID"), ("state", "STATE"), ("createdAt", "CREATED"),
                    ("retiredAt", "RETIRED"),
                ]))
    }

    static let retire: Handler = { command, link in
        let params: JSONObject = ["tenant": .string(command.arguments[0]), "keyId": .string(command.arguments[1])]
        let result = try await link.call("keys.retire", params)
        if command.flag("json") { return Output.json(result) }
        Console.out("Retired key \(command.arguments[1]) of tenant \(command.arguments[0]).\n")
    }
}

enum CatalogCommands {
    static let importFile: Handler = { command, link in
        let tenant = command.arguments[0]
        let path = command.arguments[1]
        let data = try readInputFile(path, what: "the .storekit file", maxBytes: 32 << 20)
        let storekit: JSONValue
        do {
            storekit = try JSONParsing.parse(data, maxDepth: 128)
        } catch {
            throw Failure("\(path) is not JSON (a .storekit file is): \(error)")
        }
        var params: JSONObject = ["tenant": .string(tenant), "storekit": storekit]
        if let currency = command.value("currency") { params["currency"] = .string(currency) }
        let result = try await link.call("catalog.import", params)
        if command.flag("json") { return Output.json(result) }
        let counts = result["imported"]
        func count(_ key: String, _ noun: String) -> String {
            let n = counts?[key]?.int64Value ?? Int64(result[key]?.arrayValue?.count ?? 0)
            return "\(n) \(noun)\(n == 1 ? "" : "s")"
        }
        var out =
            "Imported into \(tenant): \(count("groups", "group")), \(count("products", "product")), "
            + "\(count("offers", "offer")).\n"
        let skipped = result["skipped"]?.arrayValue ?? []
        if skipped.isEmpty {
            out += "Skipped nothing.\n"
        } else {
            out += "Skipped \(skipped.count) entr\(skipped.count == 1 ? "y" : "ies"):\n"
            var table = TextTable(headers: ["  PATH", "REASON"])
            for entry in skipped {
                let path = Output.text(entry["path"])
                let shown = path.hasPrefix("params.storekit") ? "$" + path.dropFirst("params.storekit".count) : path
                table.append(["  " + shown, Output.text(entry["reason"])])
            }
            out += table.render()
        }
        Console.out(out)
    }

    static let show: Handler = { command, link in
        let result = try await link.call("catalog.get", ["tenant": .string(command.arguments[0])])
        if command.flag("json") { return Output.json(result) }
        var products = result["products"]?.arrayValue ?? []
        products = products.map { product in
            guard var object = product.objectValue else { return product }
            if let price = object["price"]?.stringValue, let currency = object["currency"]?.stringValue {
                object["price"] = .string("\(price) \(currency)")
            }
            return .object(object)
        }
        var out = "GROUPS\n"
        out += Output.table(result["groups"]?.arrayValue ?? [], columns: [("id", "ID"), ("name", "NAME")])
        out += "\nPRODUCTS\n"
        out += Output.table(
            products,
            columns: [("id", "ID"), ("groupId", "GROUP"), ("period", "PERIOD"), ("price", "PRICE"), ("level", "LEVEL")])
        out += "\nOFFERS\n"
        out += Output.table(
            result["offers"]?.arrayValue ?? [],
            columns: [
                ("id", "ID"), ("type", "TYPE"), ("productId", "PRODUCT"), ("paymentMode", "PAYMENT"),
                ("period", "PERIOD"), ("periodCount", "COUNT"), ("price", "PRICE"),
            ])
        Console.out(out)
    }
}
