import Foundation
import JSONRPC
import OfferTestSupport
import Testing

@testable import OfferGateway

/// A customer's first `offers.best` over a socket is answered without a task (`NowOrLater.later`): after the
/// batched read of their records, on the thread that finished it. It must be the answer the task path gives.
@Suite("First answers without a task")
struct FirstAnswerTests {
    @Test("pipelined first questions share round trips and match another gateway's answers from its task path")
    func firstAnswersMatchTheTaskPath() async throws {
        try await TestGateway.withPair { one, two in
            let admin = try await one.admin()
            defer { admin.close() }
            let key = try await one.createTenant("acme", admin: admin)
            try await one.upsertStandardCatalog(tenant: "acme", admin: admin)
            let app = try await one.tenant(key)
            defer { app.close() }
            // Every other customer has a subscription (active, lapsed, or without auto-renew): different winners.
            let customers = (0..<48).map { "first-\($0)" }
            for (i, customer) in customers.enumerated() where i % 2 == 0 {
                let expires = ["2026-12-01T12:00:00Z", "2026-11-10T12:00:00Z"][i / 2 % 2]
                _ = try await app.call(
                    method: "subscriptions.record",
                    params: [
                        "customerId": .string(customer), "productId": "monthly", "transactionId": .string("t-\(i)"),
                        "purchaseDate": "2026-10-01T12:00:00Z", "expiresDate": .string(expires),
                        "autoRenew": .bool(i % 3 == 0),
                    ])
            }
            // The catalog in memory (a first answer waits only for the customer's records).
            _ = try await app.call(method: "offers.best", params: ["customerId": "warm-up", "productId": "monthly"])
            let before = try await admin.call(method: "system.stats", params: [:])
            // All 48 at once over 4 connections, each a pipeline of 12.
            let answers = try await withThrowingTaskGroup(of: [String: JSONValue].self) { group in
                for part in 0..<4 {
                    let mine = Array(customers[(part * 12)..<(part * 12 + 12)])
                    group.addTask {
                        let client = try await one.tenant(key)
                        defer { client.close() }
                        let lines = mine.map {
                            #"{"jsonrpc":"2.0","method":"offers.best","params":{"customerId":"\#($0)","productId":"monthly"},"id":"\#($0)"}"#
                        }
                        try client.sendRaw(lines.joined(separator: "\n"))
                        var got: [String: JSONValue] = [:]
                        for _ in mine {
                            let response = try #require(try await client.nextRawValue(timeout: .seconds(30)))
                            got[try #require(response["id"]?.stringValue)] = response["result"] ?? response
                        }
                        return got
                    }
                }
                return try await group.reduce(into: [String: JSONValue]()) { $0.merge($1) { a, _ in a } }
            }
            #expect(answers.count == 48)
            let after = try await admin.call(method: "system.stats", params: [:])
            let best = try #require(after["methods"]?["offers.best"])
            // None of them was answered at once (none was in memory), none failed.
            #expect(best["answeredAtOnce"] == before["methods"]?["offers.best"]?["answeredAtOnce"])
            #expect(best["errors"] == 0)
            let trips = try #require(after["customerReads"]?["roundTrips"]?.int64Value)
            let read = try #require(after["customerReads"]?["customers"]?.int64Value)
            let tripsBefore = try #require(before["customerReads"]?["roundTrips"]?.int64Value)
            let readBefore = try #require(before["customerReads"]?["customers"]?.int64Value)
            #expect(read - readBefore == 48)
            #expect(trips - tripsBefore < 48, "first questions must share round trips (\(trips - tripsBefore) for 48)")
            // Gateway two has never seen these customers: one JSON-RPC batch goes down the task path there.
            let other = try await two.tenant(key)
            defer { other.close() }
            let batch = customers.map {
                #"{"jsonrpc":"2.0","method":"offers.best","params":{"customerId":"\#($0)","productId":"monthly"},"id":"\#($0)"}"#
            }
            try other.sendRaw("[" + batch.joined(separator: ",") + "]")
            let responses = try #require(try await other.nextRawValue(timeout: .seconds(30))?.arrayValue)
            #expect(responses.count == 48)
            var winners = Set<String>()
            for response in responses {
                let id = try #require(response["id"]?.stringValue)
                #expect(answers[id] == response["result"], "\(id)")
                winners.insert(response["result"]?["offer"]?["offerId"]?.stringValue ?? "none")
            }
            #expect(winners.count >= 2, "the customers must not all get the same answer: \(winners)")
        }
    }

    /// Over stdio (one reader thread per connection), a decision over inputs already in memory is made on the
    /// decision thread, not on a task: the answer another gateway decides on its task path. Pipelined first
    /// questions are decided on that thread or, when it has work waiting, on the reader: every one answered, with
    /// the task path's answer.
    @Test("stdio decides over cached inputs on the decision thread, with the task path's answers")
    func stdioDecidesOnTheDecisionThread() async throws {
        try await TestGateway.withPair { one, two in
            let admin = try await one.admin()
            defer { admin.close() }
            let key = try await one.createTenant("acme", admin: admin)
            try await one.upsertStandardCatalog(tenant: "acme", admin: admin)
            let app = try await one.tenant(key)
            defer { app.close() }
            let customers = (0..<12).map { "stdio-\($0)" }
            for (i, customer) in customers.enumerated() where i % 3 != 0 {
                _ = try await app.call(
                    method: "subscriptions.record",
                    params: [
                        "customerId": .string(customer), "productId": "monthly", "transactionId": .string("s-\(i)"),
                        "purchaseDate": "2026-10-01T12:00:00Z",
                        "expiresDate": .string(i % 3 == 1 ? "2026-12-01T12:00:00Z" : "2026-11-10T12:00:00Z"),
                        "autoRenew": .bool(i % 2 == 0),
                    ])
            }
            // A stdio connection to gateway one, in this process: two pipes.
            var toServer: [Int32] = [0, 0]
            var fromServer: [Int32] = [0, 0]
            #expect(pipe(&toServer) == 0 && pipe(&fromServer) == 0)
            let (serverIn, serverOut) = (toServer[0], fromServer[1])
            let server = one.service.server
            let served = Task { await server.serveStdio(input: serverIn, output: serverOut) }
            // The client owns (and closes) its two ends.
            let stdio = try await RPCClient.attach(readFD: fromServer[0], writeFD: toServer[1])
            _ = try await stdio.call(method: "session.authenticate", params: ["apiKey": .string(key)])
            let other = try await two.tenant(key)
            defer { other.close() }
            func atOnce() async throws -> Int64 {
                let stats = try await admin.call(method: "system.stats", params: [:])
                return stats["methods"]?["offers.best"]?["answeredAtOnce"]?.int64Value ?? 0
            }
            let decisionThread = one.service.gateway.services.offers.decisionThread
            var (decidedAtOnce, decidedOnThread) = (Int64(0), 0)
            for customer in customers {
                // The first question loads the customer's records; the second (another product) is decided over
                // them, on the decision thread (one question at a time: it never has work waiting).
                for product in ["monthly", "yearly"] {
                    let params: JSONValue = ["customerId": .string(customer), "productId": .string(product)]
                    // A job counts as finished after it has written its answer, so the client can read the answer
                    // first: wait until the thread has nothing unfinished before each count.
                    #expect(await eventually { decisionThread.backlog == 0 })
                    let (before, finishedBefore) = (try await atOnce(), decisionThread.finished)
                    let mine = try await stdio.call(method: "offers.best", params: params)
                    if product == "yearly" {
                        decidedAtOnce += try await atOnce() - before
                        #expect(await eventually { decisionThread.backlog == 0 })
                        decidedOnThread += decisionThread.finished - finishedBefore
                    }
                    #expect(
                        mine == (try await other.call(method: "offers.best", params: params)), "\(customer) \(product)")
                }
            }
            #expect(decidedAtOnce == 0)
            #expect(decidedOnThread == 12)
            // Pipelined: a third question (the whole group) for every customer, all sent before any answer is read.
            let pipelined = customers.map { customer -> JSONValue in
                ["customerId": .string(customer), "groupId": "premium"]
            }
            let answers = try await withThrowingTaskGroup(of: (Int, JSONValue).self) { group in
                for (i, params) in pipelined.enumerated() {
                    group.addTask { (i, try await stdio.call(method: "offers.best", params: params)) }
                }
                var answers = [JSONValue?](repeating: nil, count: pipelined.count)
                for try await (i, answer) in group { answers[i] = answer }
                return answers
            }
            for (params, mine) in zip(pipelined, answers) {
                #expect(mine == (try await other.call(method: "offers.best", params: params)), "\(params)")
            }
            stdio.close()
            await served.value
            close(serverIn)
            close(serverOut)
        }
    }
}
