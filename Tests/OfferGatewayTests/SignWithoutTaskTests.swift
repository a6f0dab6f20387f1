import Foundation
import JSONRPC
import OfferCrypto
import Testing

@testable import OfferGateway
@testable import OfferStore

/// `offers.sign` over a socket, once the tenant's catalog and signer are in memory, is answered without a task
/// (`NowOrLater.later`): signed on the transport's thread (or the one that read the customer's records), answered
/// from the thread that committed its ledger row. It must give what the task path gives, and never a signature
/// that is not in the ledger.
@Suite("Signatures without a task")
struct SignWithoutTaskTests {
    /// Subscribers (active and lapsed, eligible for a promotional offer) and customers without history (refused).
    static func recordCustomers(_ app: RPCClient, _ customers: [String]) async throws {
        for (i, customer) in customers.enumerated() where i % 3 != 0 {
            _ = try await app.call(
                method: "subscriptions.record",
                params: [
                    "customerId": .string(customer), "productId": "monthly", "transactionId": .string("t-\(customer)"),
                    "purchaseDate": "2026-09-01T12:00:00Z",
                    "expiresDate": .string(i % 3 == 1 ? "2026-12-01T12:00:00Z" : "2026-11-01T12:00:00Z"),
                    "autoRenew": .bool(i % 2 == 0),
                ])
        }
    }

    static func signLine(_ customer: String, _ i: Int) -> String {
        let format = i % 2 == 0 ? "v1" : "jws"
        return
            #"{"jsonrpc":"2.0","method":"offers.sign","params":{"customerId":"\#(customer)","productId":"monthly","offerId":"promo.half","format":"\#(format)","transactionId":"2000000000000\#(i)"},"id":"\#(customer)"}"#
    }

    /// An answer without its random parts (nonce and signature), to compare two gateways' answers.
    static func comparable(_ value: JSONValue?) -> JSONValue? {
        guard case .object(var object)? = value else { return value }
        for random in ["nonce", "signature", "compactJWS"] where object[random] != nil { object[random] = "random" }
        return .object(object)
    }

    @Test("pipelined signs, warm and cold customers, verify, are in the ledger, and match the task path")
    func pipelinedSignsMatchTheTaskPath() async throws {
        try await TestGateway.withPair { one, two in
            let admin = try await one.admin()
            defer { admin.close() }
            let key = try await one.createTenant("acme", admin: admin)
            try await one.upsertStandardCatalog(tenant: "acme", admin: admin)
            let signing = try await one.importKey(tenant: "acme", admin: admin)
            let app = try await one.tenant(key)
            defer { app.close() }
            let customers = (0..<36).map { "signer-\($0)" }
            try await Self.recordCustomers(app, customers)
            try await Self.recordCustomers(app, ["no-history", "warm-up"])
            // The catalog and the signer in memory (a successful signature), and half the customers' records too.
            _ = try await app.call(
                method: "offers.sign",
                params: ["customerId": "warm-up", "productId": "monthly", "offerId": "promo.half", "format": "jws"])
            for customer in customers.prefix(18) {
                _ = try await app.call(
                    method: "offers.best", params: ["customerId": .string(customer), "productId": "monthly"])
            }
            let lines = customers.enumerated().map { Self.signLine($1, $0) }
            // All 36 at once over 3 connections, each a pipeline of 12 (warm and cold customers mixed).
            let answers = try await withThrowingTaskGroup(of: [String: JSONValue].self) { group in
                for part in 0..<3 {
                    let mine = (0..<36).filter { $0 % 3 == part }
                    group.addTask {
                        let client = try await one.tenant(key)
                        defer { client.close() }
                        try client.sendRaw(mine.map { lines[$0] }.joined(separator: "\n"))
                        var got: [String: JSONValue] = [:]
                        for _ in mine {
                            let response = try #require(try await client.nextRawValue(timeout: .seconds(30)))
                            got[try #require(response["id"]?.stringValue)] = response
                        }
                        return got
                    }
                }
                return try await group.reduce(into: [String: JSONValue]()) { $0.merge($1) { a, _ in a } }
            }
            #expect(answers.count == 36)
            let publicKey = try PublicKey(pem: signing.publicKeyPEM)
            var nonces: [String] = []
            var refused = 0
            var signedByFormat: [String: Int] = ["v1": 0, "jws": 1]  // the warm-up's JWS
            for (id, response) in answers {
                guard let result = response["result"] else {
                    #expect(response["error"]?["code"] == -32020, "\(id): \(response)")
                    refused += 1
                    continue
                }
                let nonce = try #require(result["nonce"]?.stringValue)
                nonces.append(nonce)
                signedByFormat[try #require(result["format"]?.stringValue), default: 0] += 1
                if let compact = result["compactJWS"]?.stringValue {
                    #expect(try publicKey.verifyJWS(compact: compact), "\(id)")
                    let claims = try JSONParsing.parse(try CompactJWS(compact: compact).payload)
                    #expect(claims["nonce"]?.stringValue == nonce)
                } else {
                    let text = try #require(result["signature"]?.stringValue)
                    let der = try #require(Data(base64Encoded: text))
                    let timestamp = try #require(result["timestamp"]?.int64Value)
                    let token = try #require(result["appAccountToken"]?.stringValue)
                    let payload = [
                        "com.example.acme", "KEY1ABCDEF", "monthly", "promo.half", token, nonce, "\(timestamp)",
                    ]
                    .joined(separator: "\u{2063}")
                    #expect(try publicKey.verify(derSignature: Array(der), message: Array(payload.utf8)), "\(id)")
                }
            }
            #expect(refused >= 12, "customers without history are refused")
            #expect(nonces.count >= 12, "subscribers are signed for")
            #expect(Set(nonces).count == nonces.count)
            // Every signature answered is in the ledger, once.
            let ledgered = try await one.database.pool.query(
                "SELECT nonce::text FROM issued_signatures WHERE customer_id LIKE 'signer-%'"
            ).map { try $0.decode(String.self, at: 0) }
            #expect(ledgered.sorted() == nonces.sorted())
            // Gateway two answers the same requests as one JSON-RPC batch: the task path.
            let other = try await two.tenant(key)
            defer { other.close() }
            try other.sendRaw("[" + lines.joined(separator: ",") + "]")
            let batch = try #require(try await other.nextRawValue(timeout: .seconds(30))?.arrayValue)
            #expect(batch.count == 36)
            for response in batch {
                let id = try #require(response["id"]?.stringValue)
                #expect(Self.comparable(answers[id]?["result"]) == Self.comparable(response["result"]), "\(id)")
                #expect(answers[id]?["error"] == response["error"], "\(id)")
            }
            // Counted by format once recorded (gateway two counts its own).
            let text = one.service.gateway.metrics.registry.exposition()
            for (format, count) in signedByFormat {
                #expect(text.contains(#"offergate_signatures_total{format="\#(format)"} \#(count)"#), "\(format)")
            }
            // The ledger's group commit: every row counted once committed, in at least one commit and at most one
            // per row, each commit timed; nothing failed.
            let signed = signedByFormat.values.reduce(0, +)
            #expect(text.contains("offergate_ledger_rows_total \(signed)\n"))
            let commits = try #require(
                text.split(separator: "\n").first {
                    $0.hasPrefix(#"offergate_ledger_commit_duration_seconds_count{outcome="committed"} "#)
                }.flatMap { Int($0.split(separator: " ").last ?? "") })
            #expect((1...signed).contains(commits), "\(commits) commits for \(signed) rows")
            #expect(!text.contains(#"offergate_ledger_commit_duration_seconds_count{outcome="failed"}"#))
        }
    }

    @Test("the path without a task is taken once the signer is in memory, and never answers an unrecorded signature")
    func nowPathAnswersOnlyRecordedSignatures() async throws {
        try await TestGateway.with { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            let key = try await gw.createTenant("acme", admin: admin)
            try await gw.upsertStandardCatalog(tenant: "acme", admin: admin)
            try await gw.importKey(tenant: "acme", admin: admin)
            let app = try await gw.tenant(key)
            defer { app.close() }
            try await Self.recordCustomers(app, ["x", "c1", "c2"])
            let params: JSONObject = [
                "customerId": "c1", "productId": "monthly", "offerId": "promo.half", "format": "v1",
            ]
            _ = try await app.call(method: "offers.sign", params: .object(params))

            let gateway = gw.service.gateway
            let session = GatewaySession(
                connection: ConnectionInfo(id: 999_999, transport: .unix, listenAddress: nil, peer: nil))
            session.principal = .tenant(try #require(try await gw.database.tenants.find(slug: "acme")))
            let context = RPCContext(connection: session.connection, requestID: .string("1"), sendFrame: { _ in })
            func now(_ params: JSONObject) -> RPCNowAnswer? {
                gateway.answerNow(
                    RPCRequest(method: "offers.sign", params: .object(params), id: .string("1")), session: session,
                    context: context)
            }
            func answer(_ start: RPCNowAnswer.Start) async -> Result<JSONValue, RPCError> {
                await withCheckedContinuation { continuation in start { continuation.resume(returning: $0) } }
            }
            // A redemption is checked in the database: the task path answers.
            var withRedemption = params
            withRedemption["redemptionId"] = "00000000-0000-4000-8000-000000000000"
            #expect(now(withRedemption) == nil)
            // Bad params are answered at once, as the task path answers them.
            guard case .answered(.failure(let bad))? = now(["customerId": "c1", "productId": "monthly"]) else {
                Issue.record("bad params were not answered at once")
                return
            }
            #expect(bad.code == -32602)
            // A signature is answered later, once in the ledger.
            guard case .later(let start)? = now(params) else {
                Issue.record("offers.sign did not take the path without a task")
                return
            }
            let signed = try (await answer(start)).get()
            let nonce = try #require(signed["nonce"]?.stringValue)
            #expect(
                try await gw.count("SELECT count(*)::int8 FROM issued_signatures WHERE nonce = \(nonce)::uuid") == 1)
            // The ledger cannot take the row: the answer is the failure, not the signature.
            _ = try await gw.database.pool.query("ALTER TABLE issued_signatures RENAME TO issued_signatures_away")
            guard case .later(let failing)? = now(params) else {
                Issue.record("offers.sign did not take the path without a task")
                return
            }
            guard case .failure(let error) = await answer(failing) else {
                Issue.record("a signature whose ledger row failed was answered")
                return
            }
            #expect(error.code == -32603)
        }
    }
}
