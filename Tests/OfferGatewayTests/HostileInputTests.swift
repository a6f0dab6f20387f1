import Foundation
import JSONRPC
import OfferCrypto
import Postgres
import Testing

/// Bad input never crashes or wedges the server: more than 10,000 malformed or hostile frames, each answered with a
/// JSON-RPC error (or a result where the input is in fact valid), valid requests keep working, and the database
/// holds nothing unexpected afterwards.
@Suite("Hostile input")
struct HostileInputTests {
    /// One line to send, built so that it always gets exactly one response.
    static func frames(pem: String) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        var serial = 0
        func request(_ method: String, _ params: JSONValue?) -> [UInt8] {
            serial += 1
            var object: JSONObject = ["jsonrpc": "2.0", "id": .string("f\(serial)"), "method": .string(method)]
            if let params { object["params"] = params }
            return JSONSerializer.serialize(.object(object))
        }
        let table = MethodTable.methods(tenant: "fuzz-a", pem: pem)
        var validLines: [[UInt8]] = []
        for (method, params) in table {
            var base = JSONObject()
            for param in params { base[param.name] = param.valid }
            validLines.append(request(method, .object(base)))
            // wrong types and odd values for every param
            for param in params {
                for (_, value) in MethodTable.wrongValues {
                    var p = base
                    p[param.name] = value
                    frames.append(request(method, .object(p)))
                }
                // missing param
                var missing = base
                missing[param.name] = nil
                frames.append(request(method, .object(missing)))
                // SQL and shell metacharacters in every string param
                if param.kind == .string {
                    for hostile in MethodTable.hostileStrings {
                        var p = base
                        p[param.name] = .string(hostile)
                        frames.append(request(method, .object(p)))
                    }
                }
            }
            // params of the wrong shape altogether
            for params: JSONValue in [[], [1, 2], "string", 7, .null, true] {
                frames.append(request(method, params))
            }
        }
        frames += validLines
        // hostile strings in every string field of a catalog.upsert
        let upsert = JSONValue.object(Catalogs.standard(tenant: "fuzz-a"))
        for path in stringPaths(upsert) where path != ["tenant"] {
            for hostile in MethodTable.hostileStrings.prefix(4) + MethodTable.hostileStrings.suffix(10).prefix(4)
                + MethodTable.hostileStrings.suffix(1)
            {
                frames.append(request("catalog.upsert", replacing(upsert, at: path, with: .string(hostile))))
            }
        }
        // hostile strings in every string field of a real .storekit file
        if let storekit = try? JSONParsing.parse(Array(StoreKitFixtures.acmeFitness.utf8)) {
            for path in stringPaths(storekit) {
                for hostile in MethodTable.hostileStrings.prefix(4) + MethodTable.hostileStrings.suffix(10).prefix(4)
                    + MethodTable.hostileStrings.suffix(1)
                {
                    frames.append(
                        request(
                            "catalog.import",
                            ["tenant": "fuzz-a", "storekit": replacing(storekit, at: path, with: .string(hostile))]))
                }
                frames.append(
                    request(
                        "catalog.import", ["tenant": "fuzz-a", "storekit": replacing(storekit, at: path, with: 12)]))
            }
        }
        // truncated JSON: every prefix of every valid line (each is a parse error)
        for line in validLines where line.count < 400 {
            for cut in 1..<line.count { frames.append(Array(line[..<cut])) }
        }
        // invalid UTF-8 inside strings, and raw garbage
        let badUTF8: [[UInt8]] = [
            [0xC3, 0x28], [0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x80],
        ]
        for bytes in badUTF8 {
            for (method, _) in table {
                frames.append(
                    Array(#"{"jsonrpc":"2.0","id":"u","method":""#.utf8) + Array(method.utf8)
                        + Array(#"","params":{"tenant":"fuzz-a","customerId":""#.utf8) + bytes + Array(#""}}"#.utf8))
            }
            frames.append(bytes)
        }
        frames.append(
            Array(
                #"{"jsonrpc":"2.0","id":"s","method":"customers.get","params":{"tenant":"fuzz-a","customerId":"\uD800"}}"#
                    .utf8))
        // 10,000-deep nesting, top level and inside params
        let depth = 10_000
        frames.append(
            Array(String(repeating: "[", count: depth).utf8) + Array(String(repeating: "]", count: depth).utf8))
        frames.append(
            Array(
                (#"{"jsonrpc":"2.0","id":"d","method":"offers.best","params":{"customerId":"#
                    + String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth) + "}}")
                    .utf8))
        frames.append(
            Array(
                (#"{"jsonrpc":"2.0","id":"d2","method":"catalog.upsert","params":{"tenant":"fuzz-a","groups":"#
                    + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}}").utf8))
        // huge numbers and strings
        for number in [
            "1e999999", "-1e999999", String(repeating: "9", count: 5000), "0.0000000000000000000000001", "-0", "1E+2",
        ] {
            frames.append(
                Array(
                    #"{"jsonrpc":"2.0","id":1e3,"method":"subscriptions.record","params":{"tenant":"fuzz-a","offerType":\#(number)}}"#
                        .utf8))
            frames.append(Array(#"{"jsonrpc":"2.0","id":\#(number),"method":"system.ping"}"#.utf8))
        }
        frames.append(
            request("offers.best", ["tenant": "fuzz-a", "customerId": .string(String(repeating: "x", count: 900_000))]))
        // seeded random mutations of valid lines (kept only when they cannot be notifications)
        var rng = SplitMix64(state: 0x0FFE_6A7E)
        while frames.count < 10_500 {
            var line = validLines[Int.random(in: 0..<validLines.count, using: &rng)]
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let index = Int.random(in: 0..<line.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: line[index] = UInt8.random(in: 0...255, using: &rng)
                case 1: line.remove(at: index)
                default: line.insert(UInt8.random(in: 0...255, using: &rng), at: index)
                }
            }
            line.removeAll { $0 == 0x0A }
            if let parsed = try? JSONParsing.parse(line, maxDepth: 64) {
                guard let object = parsed.objectValue, object["id"] != nil else { continue }
            }
            frames.append(line)
        }
        return frames
    }

    @Test("more than 10,000 hostile frames: every one answered, server keeps serving, database intact")
    func hostileFrames() async throws {
        try await TestGateway.with(logLevel: .error) { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            let keyA = try await gw.createTenant("fuzz-a", admin: admin)
            let keyB = try await gw.createTenant("victim-b", admin: admin)
            try await gw.upsertStandardCatalog(tenant: "fuzz-a", admin: admin)
            try await gw.upsertStandardCatalog(tenant: "victim-b", admin: admin)
            try await gw.importKey(tenant: "fuzz-a", admin: admin)
            try await gw.importKey(tenant: "victim-b", admin: admin)
            let victim = try await gw.tenant(keyB)
            defer { victim.close() }
            _ = try await victim.call(
                method: "subscriptions.record",
                params: [
                    "customerId": "fuzz-customer", "productId": "monthly", "transactionId": "fuzz-tx",
                    "purchaseDate": "2026-11-01T00:00:00Z", "expiresDate": "2026-12-01T00:00:00Z",
                ])
            let victimCatalog = try await victim.call(method: "catalog.get", params: [:])
            let victimCustomer = try await victim.call(method: "customers.get", params: ["customerId": "fuzz-customer"])
            let tablesBefore = try await gw.count("SELECT count(*)::int8 FROM pg_tables WHERE schemaname = 'public'")
            let idB = try await gw.tenantId("victim-b")
            let rowsB = try await Self.rowCounts(gw, tenant: idB)

            let frames = Self.frames(pem: try SigningKey.generate().exportPKCS8PEM())
            #expect(frames.count >= 10_000)
            // Admin connection on TCP, so every method is reachable; sent in chunks, each chunk fully answered.
            let fuzz = try await gw.admin(tcp: true)
            defer { fuzz.close() }
            var answered = 0
            var results = 0
            var tenantsCreated = 0
            var codes: [Int: Int] = [:]
            for chunk in stride(from: 0, to: frames.count, by: 250) {
                let slice = frames[chunk..<min(chunk + 250, frames.count)]
                var bytes: [UInt8] = []
                for frame in slice { bytes += frame + [0x0A] }
                try fuzz.sendRaw(bytes: bytes)
                for _ in slice {
                    let line = try #require(try await fuzz.nextRawLine(timeout: .seconds(20)), "connection closed")
                    let answer = try JSONParsing.parse(line)
                    #expect(
                        answer["jsonrpc"]?.stringValue == "2.0", "\(String(decoding: line.prefix(200), as: UTF8.self))")
                    if let result = answer["result"] {
                        results += 1
                        if result["apiKey"] != nil && result["slug"] != nil { tenantsCreated += 1 }
                    } else {
                        let code = try #require(answer["error"]?["code"]?.int64Value, "\(answer.text.prefix(300))")
                        codes[Int(code), default: 0] += 1
                        #expect(answer["error"]?["data"]?["reason"]?.stringValue != nil, "\(answer.text.prefix(300))")
                    }
                    answered += 1
                }
                // valid requests keep working, on other connections too
                #expect(try await victim.call(method: "catalog.get", params: [:]) == victimCatalog)
            }
            #expect(answered == frames.count)
            #expect(
                codes[-32603] == nil,
                "no internal errors from bad input: \(codes) \(gw.logs.all.filter { $0.contains("-32603") })")
            #expect((codes[-32700] ?? 0) > 3000 && (codes[-32602] ?? 0) > 1000, "\(codes)")
            #expect(results > 100)

            // the server still serves new connections and valid calls
            // (A's API key may have been rotated by a valid tenants.rotateApiKey among the frames: use B's and admin)
            _ = keyA
            let fresh = try await gw.tenant(keyB)
            defer { fresh.close() }
            #expect(try await fresh.call(method: "catalog.get", params: [:]) == victimCatalog)
            let freshAdmin = try await gw.admin()
            defer { freshAdmin.close() }
            #expect(
                try await freshAdmin.call(method: "catalog.get", params: ["tenant": "fuzz-a"])["groups"]?.arrayValue?
                    .count ?? 0 >= 1)
            #expect(
                try await victim.call(method: "customers.get", params: ["customerId": "fuzz-customer"])
                    == victimCustomer)
            // nothing dropped, B untouched, tenants only where the input was valid
            #expect(
                try await gw.count("SELECT count(*)::int8 FROM pg_tables WHERE schemaname = 'public'") == tablesBefore)
            #expect(try await Self.rowCounts(gw, tenant: idB) == rowsB)
            #expect(try await gw.count("SELECT count(*)::int8 FROM tenants") == 2 + tenantsCreated)
            #expect(
                try await gw.count("SELECT count(*)::int8 FROM subscription_transactions WHERE tenant_id <> \(idB)")
                    >= 1)
        }
    }

    /// Paths (object keys and array indexes) of every string in `value`.
    static func stringPaths(_ value: JSONValue, prefix: [String] = []) -> [[String]] {
        switch value {
        case .string: return [prefix]
        case .array(let items):
            return items.enumerated().flatMap { stringPaths($0.element, prefix: prefix + [String($0.offset)]) }
        case .object(let object):
            return object.flatMap { stringPaths($0.value, prefix: prefix + [$0.key]) }
        default: return []
        }
    }

    static func replacing(_ value: JSONValue, at path: [String], with new: JSONValue) -> JSONValue {
        guard let head = path.first else { return new }
        let rest = Array(path.dropFirst())
        switch value {
        case .array(var items):
            if let index = Int(head), items.indices.contains(index) {
                items[index] = replacing(items[index], at: rest, with: new)
            }
            return .array(items)
        case .object(var object):
            if let child = object[head] { object[head] = replacing(child, at: rest, with: new) }
            return .object(object)
        default: return value
        }
    }

    static func rowCounts(_ gw: TestGateway, tenant: UUID) async throws -> [Int] {
        var counts: [Int] = []
        for table in [
            "subscription_groups", "products", "offers", "subscription_transactions", "signing_keys",
            "issued_signatures", "api_keys",
        ] {
            counts.append(
                try await gw.count(
                    PostgresQuery(
                        unsafeSQL: "SELECT count(*)::int8 FROM \(table) WHERE tenant_id = '\(tenant.uuidString)'")))
        }
        return counts
    }
}
