import Foundation
import JSONRPC
import Testing

@testable import OfferGateway
@testable import OfferStore

/// `codes.redeem` over a socket, once the custom code and the catalog are in memory, is answered without a task
/// (`NowOrLater.later`): the request joins its campaign's batch from the transport's thread and is answered from the
/// thread that committed the batch. It must give what the task path gives, keep every limit exact, and never answer a
/// redemption that did not commit.
@Suite("Redemptions without a task")
struct RedeemWithoutTaskTests {
    static func redeemLine(_ customer: String, key: String? = nil, id: String) -> String {
        let keyMember = key.map { #","idempotencyKey":"\#($0)""# } ?? ""
        return
            #"{"jsonrpc":"2.0","method":"codes.redeem","params":{"code":"spring-26","customerId":"\#(customer)"\#(keyMember)},"id":"\#(id)"}"#
    }

    /// Sends each connection's lines as one pipeline, all connections at once; the answers by id.
    static func pipelined(_ gateways: RedemptionGateways, apiKey: String, _ parts: [[String]]) async throws
        -> [String: JSONValue]
    {
        try await withThrowingTaskGroup(of: [String: JSONValue].self) { group in
            for lines in parts {
                group.addTask {
                    let client = try await gateways.client(apiKey: apiKey)
                    defer { client.close() }
                    try client.sendRaw(lines.joined(separator: "\n"))
                    var got: [String: JSONValue] = [:]
                    for _ in lines {
                        let response = try #require(try await client.nextRawValue(timeout: .seconds(30)))
                        got[try #require(response["id"]?.stringValue)] = response
                    }
                    return got
                }
            }
            return try await group.reduce(into: [String: JSONValue]()) { $0.merge($1) { a, _ in a } }
        }
    }

    @Test("pipelined redemptions keep the limit, replay their keys, are in the database, and are counted")
    func pipelinedRedemptionsKeepTheLimit() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            defer { admin.close() }
            let key = try await RedemptionSupport.seedTenant(admin, slug: "app-a")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "app-a", "campaignId": "spring", "offerId": "code1", "kind": "custom", "code": "SPRING26",
                    "totalLimit": 25, "perCustomerLimit": 1,
                ])
            // The first redemption reads the code and the catalog (the task path); the rest find them in memory and
            // take the path without a task (the next test shows when it is taken).
            let app = try await gateways.client(apiKey: key)
            defer { app.close() }
            _ = try await app.call(method: "codes.redeem", params: ["code": "SPRING26", "customerId": "warm-up"])
            // 60 attempts over 3 connections for 24 places left: 54 customers, 3 of them twice under one key (a
            // replay) and 3 of them twice without one (refused: one per customer).
            var lines: [[String]] = [[], [], []]
            for i in 0..<54 {
                lines[i % 3].append(Self.redeemLine("c\(i)", key: i < 3 ? "k\(i)" : nil, id: "a\(i)"))
            }
            for i in 0..<3 { lines[i].append(Self.redeemLine("c\(i)", key: "k\(i)", id: "again-key\(i)")) }
            for i in 3..<6 { lines[i % 3].append(Self.redeemLine("c\(i)", id: "again\(i)")) }
            let answers = try await Self.pipelined(gateways, apiKey: key, lines)
            #expect(answers.count == 60)

            var redeemed: [String] = []
            var codes: [Int: Int] = [:]
            for (id, response) in answers {
                if let result = response["result"] {
                    if result["replayed"]?.boolValue == false {
                        redeemed.append(try #require(result["redemptionId"]?.stringValue))
                    }
                    #expect(result["campaignId"] == "spring" && result["productId"] == "p1", "\(id)")
                } else {
                    codes[Int(try #require(response["error"]?["code"]?.int64Value)), default: 0] += 1
                }
            }
            #expect(redeemed.count == 24, "the 25 places, less the warm-up's")
            #expect(Set(redeemed).count == 24)
            // A key's second attempt replays its first's outcome: the same redemption, or the same refusal.
            for i in 0..<3 {
                let first = try #require(answers["a\(i)"])
                let again = try #require(answers["again-key\(i)"])
                if let result = first["result"] {
                    #expect(again["result"]?["redemptionId"] == result["redemptionId"])
                    #expect(again["result"]?["replayed"] == true)
                } else {
                    #expect(again["error"]?["code"] == first["error"]?["code"])
                }
            }
            #expect(codes.keys.allSatisfy { [-32041, -32043].contains($0) }, "\(codes)")
            let db = try gateways.database()
            #expect(
                try await RedemptionRows.read(db, campaignId: "spring")
                    == RedemptionRows(live: 25, rolledBack: 0, counter: 25))
            let stored = try await db.pool.query(
                "SELECT redemption_id::text FROM redemptions WHERE campaign_id = 'spring' AND customer_id <> 'warm-up'"
            ).map { try $0.decode(String.self, at: 0) }
            #expect(stored.sorted() == redeemed.sorted())
            await db.pool.close()
            // Counted once each, by outcome, as the task path counts them.
            let text = gateways.services[0].gateway.metrics.registry.exposition()
            #expect(text.contains(#"offergate_code_redemptions_total{outcome="redeemed"} 25"#))
            // The code was read once (the warm-up) and found in memory for each of the 60 after it, counted once each.
            #expect(text.contains(#"offergate_cache_misses_total{cache="custom_codes"} 1"#), "\(text)")
            #expect(text.contains(#"offergate_cache_hits_total{cache="custom_codes"} 60"#))
        }
    }

    @Test("what must be read first goes to the task path; bad params are answered at once; a failed batch is the error")
    func nowPathAnswersOnlyCommittedRedemptions() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            defer { admin.close() }
            let key = try await RedemptionSupport.seedTenant(admin, slug: "app-a")
            for (id, code, eligibility) in [("spring", "SPRING26", nil), ("lapsed", "LAPSED26", "expired")] {
                var params: JSONObject = [
                    "tenant": "app-a", "campaignId": .string(id), "offerId": "code1", "kind": "custom",
                    "code": .string(code),
                ]
                if let eligibility { params["eligibility"] = [.string(eligibility)] }
                _ = try await admin.call(method: "campaigns.create", params: .object(params))
            }
            let gateway = gateways.services[0].gateway
            let database = try gateways.database()
            defer { Task { await database.pool.close() } }
            let session = GatewaySession(
                connection: ConnectionInfo(id: 999_999, transport: .unix, listenAddress: nil, peer: nil))
            session.principal = .tenant(try #require(try await database.tenants.find(slug: "app-a")))
            let context = RPCContext(connection: session.connection, requestID: .string("1"), sendFrame: { _ in })
            func now(_ params: JSONObject) -> RPCNowAnswer? {
                gateway.answerNow(
                    RPCRequest(method: "codes.redeem", params: .object(params), id: .string("1")), session: session,
                    context: context)
            }
            func answer(_ start: RPCNowAnswer.Start) async -> Result<JSONValue, RPCError> {
                await withCheckedContinuation { continuation in start { continuation.resume(returning: $0) } }
            }
            // Not in memory yet: the task path reads the code.
            #expect(now(["code": "SPRING26", "customerId": "u1"]) == nil)
            let app = try await gateways.client(apiKey: key)
            defer { app.close() }
            for code in ["SPRING26", "LAPSED26"] {
                _ = try? await app.call(method: "codes.redeem", params: ["code": .string(code), "customerId": "u0"])
            }
            // Bad params are answered at once, as the task path answers them.
            guard case .answered(.failure(let bad))? = now(["code": " - ", "customerId": "u1"]) else {
                Issue.record("bad params were not answered at once")
                return
            }
            #expect(bad.code == -32602)
            // A campaign that reads the customer's history, and a signature, go to the task path; declined, they count
            // no cache hit (the task path counts its own).
            func hits() -> String? {
                gateway.metrics.registry.exposition().split(separator: "\n")
                    .first { $0.hasPrefix(#"offergate_cache_hits_total{cache="custom_codes"}"#) }.map(String.init)
            }
            let hitsBefore = hits()
            #expect(now(["code": "LAPSED26", "customerId": "u1"]) == nil)
            #expect(now(["code": "SPRING26", "customerId": "u1", "sign": "jws"]) == nil)
            #expect(hits() == hitsBefore)
            // A redemption is answered later, once committed.
            guard case .later(let start)? = now(["code": "spring 26", "customerId": "u1"]) else {
                Issue.record("codes.redeem did not take the path without a task")
                return
            }
            let redeemed = try (await answer(start)).get()
            let id = try #require(redeemed["redemptionId"]?.stringValue)
            #expect(
                try await database.pool.query(
                    "SELECT count(*)::int8 FROM redemptions WHERE redemption_id = \(id)::uuid"
                ).first?.decode(Int64.self, at: 0) == 1)
            // The batch cannot commit: the answer is the failure, not a receipt.
            _ = try await database.pool.query("ALTER TABLE redemptions RENAME TO redemptions_away")
            guard case .later(let failing)? = now(["code": "SPRING26", "customerId": "u2"]) else {
                Issue.record("codes.redeem did not take the path without a task")
                return
            }
            guard case .failure(let error) = await answer(failing) else {
                Issue.record("a redemption whose batch failed was answered")
                return
            }
            #expect(error.code == -32603)
            _ = try await database.pool.query("ALTER TABLE redemptions_away RENAME TO redemptions")
        }
    }

}
