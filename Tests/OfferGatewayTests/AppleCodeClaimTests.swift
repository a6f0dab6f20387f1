import Foundation
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Postgres
import Testing

@testable import OfferGateway
@testable import OfferStore

/// Issue 14 point 2: Apple's one-time codes, imported and handed out by `codes.claim`.
@Suite("Apple one-time codes: import and claim")
struct AppleCodeClaimTests {
    /// `count` codes shaped like App Store Connect's (18 letters and digits), distinct.
    static func appleCodes(_ count: Int, prefix: String = "") -> [String] {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var seen = Set<String>()
        var codes: [String] = []
        while codes.count < count {
            let body = String((0..<(18 - prefix.count)).map { _ in alphabet.randomElement() ?? "A" })
            if seen.insert(prefix + body).inserted { codes.append(prefix + body) }
        }
        return codes
    }

    static func createCampaign(
        _ admin: RPCClient, tenant: String, id: String = "asc", extra: [String: JSONValue] = [:]
    )
        async throws
    {
        var params: JSONObject = [
            "tenant": .string(tenant), "campaignId": .string(id), "offerId": "code1", "kind": "appleOneTime",
            "appleReferenceName": "Spring One-Time",
        ]
        for (key, value) in extra { params[key] = value }
        _ = try await admin.call(method: "campaigns.create", params: .object(params))
    }

    static func importCodes(_ admin: RPCClient, tenant: String, id: String = "asc", _ codes: [String]) async throws
        -> JSONValue
    {
        try await admin.call(
            method: "campaigns.importCodes",
            params: ["tenant": .string(tenant), "campaignId": .string(id), "codes": .array(codes.map { .string($0) })])
    }

    @Test("import twice adds nothing; a claim is replayed with the same code; limits, windows and bad input")
    func importAndClaim() async throws {
        try await TestGateway.with { gateway in
            let admin = try await gateway.admin()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "asc-app")
            _ = try await admin.call(
                method: "catalog.upsert",
                params: [
                    "tenant": "asc-app", "groups": [["id": "g1", "name": "Premium"]],
                    "products": [
                        ["id": "p1", "groupId": "g1", "period": "P1M", "price": "4.99", "currency": "USD", "level": 1]
                    ],
                    "offers": [
                        [
                            "id": "code1", "type": "code", "productId": "p1", "paymentMode": "freeTrial",
                            "period": "P1M",
                        ],
                        [
                            "id": "promo1", "type": "promotional", "productId": "p1", "paymentMode": "freeTrial",
                            "period": "P1M",
                        ],
                    ],
                ])
            // Creation: a code offer, one code per customer, a reference name only for Apple's kind.
            await expectRPCError(-32602, param: "params.offerId") {
                try await admin.call(
                    method: "campaigns.create",
                    params: ["tenant": "asc-app", "campaignId": "x", "offerId": "promo1", "kind": "appleOneTime"])
            }
            await expectRPCError(-32602, param: "params.perCustomerLimit") {
                try await admin.call(
                    method: "campaigns.create",
                    params: [
                        "tenant": "asc-app", "campaignId": "x", "offerId": "code1", "kind": "appleOneTime",
                        "perCustomerLimit": 2,
                    ])
            }
            await expectRPCError(-32602, param: "params.appleReferenceName") {
                try await admin.call(
                    method: "campaigns.create",
                    params: [
                        "tenant": "asc-app", "campaignId": "x", "offerId": "code1", "kind": "oneTime",
                        "appleReferenceName": "Nope",
                    ])
            }
            try await Self.createCampaign(admin, tenant: "asc-app", extra: ["totalLimit": 3])
            let campaigns = try await admin.call(method: "campaigns.list", params: ["tenant": "asc-app"])
            #expect(campaigns["campaigns"]?[0]?["kind"] == "appleOneTime")
            #expect(campaigns["campaigns"]?[0]?["appleReferenceName"] == "Spring One-Time")

            let codes = Self.appleCodes(4)
            let first = try await Self.importCodes(admin, tenant: "asc-app", codes + [codes[0].lowercased()])
            #expect(first["imported"] == 4 && first["duplicates"] == 1)
            let second = try await Self.importCodes(admin, tenant: "asc-app", codes)
            #expect(second["imported"] == 0 && second["duplicates"] == 4)
            #expect(try await gateway.count("SELECT count(*) FROM apple_codes") == 4)
            // A bad code names its index (never its value) and nothing is stored.
            let bad = await expectRPCError(-32602, param: "params.codes[1]") {
                try await Self.importCodes(admin, tenant: "asc-app", ["GOODCODE123", "bad*code"])
            }
            #expect(bad?.message.contains("bad*code") == false)
            await expectRPCError(-32602, param: "params.codes") {
                try await Self.importCodes(admin, tenant: "asc-app", [])
            }
            await expectRPCError(-32004) { try await Self.importCodes(admin, tenant: "asc-app", id: "none", codes) }
            #expect(try await gateway.count("SELECT count(*) FROM apple_codes") == 4)

            let app = try await gateway.tenant(key)
            func claim(_ customer: String, key: String? = nil, campaign: String = "asc") async throws -> JSONValue {
                var params: JSONObject = ["campaignId": .string(campaign), "customerId": .string(customer)]
                if let key { params["idempotencyKey"] = .string(key) }
                return try await app.call(method: "codes.claim", params: .object(params))
            }
            let a = try await claim("alice", key: "claim-a")
            let code = try #require(a["code"]?.stringValue)
            #expect(codes.contains(code))
            #expect(a["campaignId"] == "asc" && a["offerId"] == "code1" && a["productId"] == "p1")
            #expect(a["replayed"] == false && UUID(uuidString: a["claimId"]?.stringValue ?? "") != nil)
            // Asking again (with or without the key) returns the same code.
            let again = try await claim("alice", key: "claim-a")
            #expect(again["code"] == a["code"] && again["claimId"] == a["claimId"] && again["replayed"] == true)
            #expect(try await claim("alice")["code"] == a["code"])
            await expectRPCError(-32009) { try await claim("bob", key: "claim-a") }
            let b = try await claim("bob")
            #expect(b["code"] != a["code"])
            _ = try await claim("carol")
            // The total limit (3) is reached before the codes run out.
            let limited = await expectRPCError(-32041) { try await claim("dave") }
            #expect(limited?.reason == "code_exhausted")
            let stats = try await admin.call(
                method: "campaigns.stats", params: ["tenant": "asc-app", "campaignId": "asc"])
            #expect(stats["claimed"] == 3 && stats["purchased"] == 0 && stats["codesGenerated"] == 4)
            #expect(stats["remaining"] == 0)
            // Deactivated: new customers are refused, a customer's own code stays theirs.
            _ = try await admin.call(
                method: "campaigns.deactivate", params: ["tenant": "asc-app", "campaignId": "asc"])
            await expectRPCError(-32042) { try await claim("erin") }
            #expect(try await claim("alice")["code"] == a["code"])

            // Bad input.
            await expectRPCError(-32602, param: "params.customerId") { try await claim("") }
            await expectRPCError(-32602, param: "params.campaignId") {
                try await app.call(method: "codes.claim", params: ["customerId": "x"])
            }
            await expectRPCError(-32004) { try await claim("x", campaign: "none") }
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "asc-app", "campaignId": "vanity", "offerId": "code1", "kind": "custom", "code": "V",
                ])
            await expectRPCError(-32602, param: "params.campaignId") { try await claim("x", campaign: "vanity") }
            await expectRPCError(-32602, param: "params.campaignId") {
                try await Self.importCodes(admin, tenant: "asc-app", id: "vanity", ["ABC"])
            }

            // Exported codes: campaigns.codes shows which are claimed.
            let listed = try await admin.call(
                method: "campaigns.codes", params: ["tenant": "asc-app", "campaignId": "asc"])
            let states = (listed["codes"]?.arrayValue ?? []).compactMap { $0["state"]?.stringValue }
            #expect(states.sorted() == ["available", "claimed", "claimed", "claimed"])

            // Codes are secrets: no log line carries one.
            let logs = gateway.logs.all.joined(separator: "\n")
            for code in codes { #expect(!logs.contains(code)) }
        }
    }

    @Test("5,000 claims from 64 connections over 3 gateway processes against 1,000 codes: each code to one customer")
    func claimStormOverThreeProcesses() async throws {
        try await TestDatabase.withConninfo { url in
            let adminKey = "og_admin_claim_storm"
            let masterKey = Data(try SecureRandom.bytes(count: 32)).base64EncodedString()
            var gateways: [RedemptionCrashTests.SpawnedGateway] = []
            defer { for gateway in gateways { gateway.killIfRunning() } }
            for _ in 0..<3 {
                gateways.append(
                    try await RedemptionCrashTests.SpawnedGateway.start(
                        databaseURL: url, adminKey: adminKey, masterKey: masterKey))
            }
            let admin = try await gateways[0].client(apiKey: adminKey)
            let apiKey = try await RedemptionSupport.seedTenant(admin, slug: "storm")
            try await Self.createCampaign(admin, tenant: "storm")
            let codes = Self.appleCodes(1_000)
            #expect(try await Self.importCodes(admin, tenant: "storm", codes)["imported"] == 1_000)
            admin.close()

            // 4,500 customers; the first 500 ask twice (from other connections, so other gateways).
            let attempts = 5_000
            let connections = 64
            var clients: [RPCClient] = []
            for c in 0..<connections { clients.append(try await gateways[c % 3].client(apiKey: apiKey)) }
            struct Answer: Sendable {
                let customer: String
                let code: String?
                let replayed: Bool
                let error: Int?
            }
            let answers = try await withThrowingTaskGroup(of: [Answer].self) { group in
                for (c, client) in clients.enumerated() {
                    group.addTask {
                        var local: [Answer] = []
                        var i = c
                        while i < attempts {
                            let customer = "customer-\(i % 4_500)"
                            do {
                                let result = try await client.call(
                                    method: "codes.claim",
                                    params: ["campaignId": "asc", "customerId": .string(customer)],
                                    timeout: .seconds(60))
                                local.append(
                                    Answer(
                                        customer: customer, code: result["code"]?.stringValue,
                                        replayed: result["replayed"]?.boolValue == true, error: nil))
                            } catch let error as RPCError {
                                local.append(Answer(customer: customer, code: nil, replayed: false, error: error.code))
                            }
                            i += connections
                        }
                        return local
                    }
                }
                var all: [Answer] = []
                for try await part in group { all += part }
                return all
            }
            for client in clients { client.close() }

            #expect(answers.count == attempts)
            let handedOut = answers.filter { $0.code != nil && !$0.replayed }
            // Exactly 1,000 distinct codes, each of the imported ones, none twice.
            #expect(handedOut.count == 1_000)
            #expect(Set(handedOut.compactMap(\.code)) == Set(codes))
            // No customer with two codes: every answer to one customer names one code.
            var codeOfCustomer: [String: String] = [:]
            var customerOfCode: [String: String] = [:]
            for answer in answers {
                guard let code = answer.code else { continue }
                #expect(codeOfCustomer[answer.customer, default: code] == code)
                #expect(customerOfCode[code, default: answer.customer] == answer.customer)
                codeOfCustomer[answer.customer] = code
                customerOfCode[code] = answer.customer
            }
            // The rest: -32041, or a replay of the customer's own code.
            let errors = answers.compactMap(\.error)
            #expect(Set(errors) == [-32041])
            #expect(handedOut.count + answers.filter(\.replayed).count + errors.count == attempts)
            let repeaters = answers.filter { $0.replayed }
            #expect(repeaters.allSatisfy { codeOfCustomer[$0.customer] == $0.code })

            // The database agrees: 1,000 claims, one per customer, and the counter says so.
            let database = try RedemptionDatabaseOpener.open(url)
            let row = try #require(
                try await database.pool.query(
                    """
                    SELECT (SELECT count(*) FROM apple_codes WHERE claim_id IS NOT NULL),
                           (SELECT count(DISTINCT customer_id) FROM apple_codes WHERE claim_id IS NOT NULL),
                           (SELECT redeemed FROM campaigns WHERE campaign_id = 'asc')
                    """
                ).first)
            await database.pool.close()
            let (claims, customers, counter) = try row.decode(Int64.self, Int64.self, Int64.self)
            #expect(claims == 1_000 && customers == 1_000 && counter == 1_000)
            for gateway in gateways { await gateway.terminate() }
        }
    }
}
