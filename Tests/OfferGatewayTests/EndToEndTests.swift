import Foundation
import JSONRPC
import OfferCrypto
import Postgres
import Testing

@testable import OfferStore

/// Records the raw request/response lines of a session (for docs/guide.md) with secrets replaced.
final class Transcript: @unchecked Sendable {
    // Only used from one test task at a time.
    var lines: [String] = []
    var secrets: [(String, String)] = []

    func redact(_ text: String) -> String {
        var out = text
        for (secret, placeholder) in secrets { out = out.replacingOccurrences(of: secret, with: placeholder) }
        return out
    }

    /// Sends `line` raw on `client`, records both lines, returns the parsed response.
    func exchange(_ client: RPCClient, _ request: JSONValue, label: String) async throws -> JSONValue {
        let text = request.text
        try client.sendRaw(text)
        let answer = try #require(try await client.nextRawLine(timeout: .seconds(20)))
        let answerText = String(decoding: answer, as: UTF8.self)
        lines.append("# \(label)")
        lines.append("--> " + redact(text))
        lines.append("<-- " + redact(answerText))
        return try JSONParsing.parse(answer)
    }

    func write() {
        guard let path = ProcessInfo.processInfo.environment["OFFERGATE_TRANSCRIPT"] else { return }
        try? (lines.map(redact).joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    }
}

@Suite("End to end")
struct EndToEndTests {
    @Test("import a .storekit file, record history, best offer with copy, V1 and JWS signatures that verify")
    func endToEnd() async throws {
        try await TestGateway.with { gw in
            let t = Transcript()
            t.secrets.append((TestGateway.adminKey, "<ADMIN_KEY>"))
            var n = 0
            func request(_ method: String, _ params: JSONValue) -> JSONValue {
                n += 1
                return ["jsonrpc": "2.0", "id": .int(n), "method": .string(method), "params": params]
            }
            let admin = try await gw.connect()
            defer { admin.close() }
            let auth = try await t.exchange(
                admin, request("session.authenticate", ["apiKey": .string(TestGateway.adminKey)]),
                label: "operator authenticates with the admin key")
            #expect(auth["result"] == ["tenant": .null, "role": "admin"])
            let created = try await t.exchange(
                admin,
                request(
                    "tenants.create", ["slug": "acme-fitness", "bundleId": "com.acme.fitness", "name": "Acme Fitness"]),
                label: "create the tenant (the API key is shown once)")
            let apiKey = try #require(created["result"]?["apiKey"]?.stringValue)
            #expect(apiKey.hasPrefix("og_"))
            t.secrets.append((apiKey, "<TENANT_API_KEY>"))

            let storekit = try JSONParsing.parse(Array(StoreKitFixtures.acmeFitness.utf8))
            let imported = try await t.exchange(
                admin, request("catalog.import", ["tenant": "acme-fitness", "storekit": storekit]),
                label: "import the Xcode .storekit file")
            t.secrets.append((storekit.text, #""<contents of AcmeFitness.storekit>""#))
            let summary = try #require(imported["result"], "\(imported.text)")
            #expect(summary["imported"] == ["groups": 1, "products": 2, "offers": 6])
            #expect(summary["skipped"]?[0]?["path"]?.stringValue == "params.storekit.products[0]")

            let key = try SigningKey.generate()
            let pem = try key.exportPKCS8PEM()
            t.secrets.append(
                (pem.replacingOccurrences(of: "\n", with: "\\n"), "<CONTENTS OF SubscriptionKey_ABC123DEFG.p8>"))
            let keyResult = try await t.exchange(
                admin,
                request(
                    "keys.import",
                    [
                        "tenant": "acme-fitness", "keyId": "ABC123DEFG",
                        "issuerId": "57246542-96fe-1a63-e053-0824d011072a", "privateKeyPem": .string(pem),
                    ]),
                label: "import the App Store Connect In-App Purchase key (.p8)")
            #expect(keyResult["result"]?["state"]?.stringValue == "active")
            let listed = try await t.exchange(
                admin, request("keys.list", ["tenant": "acme-fitness"]), label: "list keys")
            let listedText = listed.text
            #expect(listed["result"]?["keys"]?[0]?["keyId"]?.stringValue == "ABC123DEFG")
            #expect(listed["result"]?["keys"]?[0]?["publicKeyPem"]?.stringValue == key.publicKeyPEM)
            #expect(!listedText.contains("PRIVATE"))
            #expect(!listedText.contains(pem.split(separator: "\n")[1]))

            let app = try await gw.connect(tcp: true)
            defer { app.close() }
            let tenantAuth = try await t.exchange(
                app, request("session.authenticate", ["apiKey": .string(apiKey)]),
                label: "the app's backend authenticates with the tenant key")
            #expect(tenantAuth["result"] == ["tenant": "acme-fitness", "role": "tenant"])
            let customer = "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"
            let lower = customer.lowercased()
            let recorded = try await t.exchange(
                app,
                request(
                    "subscriptions.record",
                    [
                        "customerId": .string(customer), "productId": "com.acme.fitness.monthly",
                        "transactionId": "2000000815533041", "originalTransactionId": "2000000815533041",
                        "purchaseDate": "2026-11-01T09:30:00Z", "expiresDate": "2026-12-01T09:30:00Z",
                        "autoRenew": false,
                    ]),
                label: "record what the App Store reported: a monthly subscriber who turned auto-renew off")
            #expect(recorded["result"]?["recorded"] == true)
            let got = try await t.exchange(
                app, request("customers.get", ["customerId": .string(lower)]),
                label: "the customer's derived state")
            #expect(got["result"]?["groups"]?[0]?["state"]?.stringValue == "active")
            #expect(got["result"]?["groups"]?[0]?["autoRenew"] == false)
            let best = try await t.exchange(
                app,
                request("offers.best", ["customerId": .string(customer), "productId": "com.acme.fitness.monthly"]),
                label: "ask for the best offer")
            let offer = try #require(best["result"]?["offer"], "\(best.text)")
            #expect(offer["offerId"]?.stringValue == "com.acme.fitness.monthly.comeback")
            #expect(offer["type"]?.stringValue == "promotional")
            #expect(offer["paymentMode"]?.stringValue == "payAsYouGo")
            #expect(offer["period"]?.stringValue == "P1M")
            #expect(offer["periodCount"]?.int64Value == 3)
            #expect(offer["price"]?.stringValue == "4.99")
            #expect(offer["displayText"]?.stringValue == "$4.99/month for 3 months, then $9.99/month")
            let considered = try #require(best["result"]?["considered"]?.arrayValue)
            #expect(
                considered.map { $0["offerId"]?.stringValue ?? "" } == [
                    "com.acme.fitness.monthly.comeback", "com.acme.fitness.monthly.freemonth",
                    "com.acme.fitness.monthly.winback", "6450000013",
                ])
            #expect(considered.map { $0["rank"] } == [1, 2, .null, .null])
            #expect(considered[2]["reasons"]?.arrayValue?.contains("not_lapsed") == true)
            let yearly = try await app.call(
                method: "offers.best", params: ["customerId": "new-customer", "productId": "com.acme.fitness.yearly"])
            #expect(yearly["offer"]?["displayText"]?.stringValue == "2 weeks free, then $79.99/year")
            let groupBest = try await app.call(
                method: "offers.best", params: ["customerId": .string(lower), "groupId": "21500001", "locale": "de_DE"])
            #expect(groupBest["offer"]?["offerId"]?.stringValue == "com.acme.fitness.monthly.comeback")
            #expect(
                groupBest["offer"]?["displayText"]?.stringValue
                    == "4,99\u{00A0}$/month for 3 months, then 9,99\u{00A0}$/month")

            // V1 signature
            let v1 = try await t.exchange(
                app,
                request(
                    "offers.sign",
                    [
                        "customerId": .string(customer), "productId": "com.acme.fitness.monthly",
                        "offerId": "com.acme.fitness.monthly.comeback", "format": "v1",
                    ]),
                label: "sign the offer for StoreKit (V1)")
            let signed = try #require(v1["result"], "\(v1.text)")
            #expect(signed["format"]?.stringValue == "v1")
            #expect(signed["keyId"]?.stringValue == "ABC123DEFG")
            #expect(signed["appAccountToken"]?.stringValue == lower)
            #expect(signed["offerId"]?.stringValue == "com.acme.fitness.monthly.comeback")
            #expect(signed["productId"]?.stringValue == "com.acme.fitness.monthly")
            let nonce = try #require(signed["nonce"]?.stringValue)
            #expect(nonce == nonce.lowercased() && UUID(uuidString: nonce) != nil)
            let timestamp = try #require(signed["timestamp"]?.int64Value)
            #expect(timestamp == Int64(TestGateway.now.timeIntervalSince1970 * 1000))
            let separator = "\u{2063}"
            let payload = Array(
                [
                    "com.acme.fitness", "ABC123DEFG", "com.acme.fitness.monthly", "com.acme.fitness.monthly.comeback",
                    lower,
                    nonce, String(timestamp),
                ].joined(separator: separator).utf8)
            let signatureText = try #require(signed["signature"]?.stringValue)
            let der = try #require(Data(base64Encoded: signatureText))
            let publicKey = try PublicKey(pem: key.publicKeyPEM)
            #expect(try publicKey.verify(derSignature: Array(der), message: payload))
            #expect(try !publicKey.verify(derSignature: Array(der), message: payload + [0x30]))
            t.secrets.append((try #require(signed["signature"]?.stringValue), "<BASE64_DER_SIGNATURE>"))
            t.lines[t.lines.count - 1] = "<-- " + t.redact(v1.text)

            // JWS (promotional offer signature V2)
            let jwsAnswer = try await t.exchange(
                app,
                request(
                    "offers.sign",
                    [
                        "customerId": .string(customer), "productId": "com.acme.fitness.monthly",
                        "offerId": "com.acme.fitness.monthly.comeback", "format": "jws",
                        "transactionId": "2000000815533041",
                    ]),
                label: "sign the offer as a JWS (StoreKit 2, iOS 18.4+)")
            let compact = try #require(jwsAnswer["result"]?["compactJWS"]?.stringValue, "\(jwsAnswer.text)")
            #expect(jwsAnswer["result"]?["format"]?.stringValue == "jws")
            #expect(try publicKey.verifyJWS(compact: compact))
            let jws = try CompactJWS(compact: compact)
            let header = try JSONParsing.parse(jws.header)
            #expect(header["alg"]?.stringValue == "ES256")
            #expect(header["kid"]?.stringValue == "ABC123DEFG")
            #expect(header["typ"]?.stringValue == "JWT")
            let claims = try JSONParsing.parse(jws.payload)
            #expect(claims["iss"]?.stringValue == "57246542-96fe-1a63-e053-0824d011072a")
            #expect(claims["iat"]?.int64Value == Int64(TestGateway.now.timeIntervalSince1970))
            #expect(claims["bid"]?.stringValue == "com.acme.fitness")
            #expect(claims["aud"]?.stringValue == "promotional-offer")
            #expect(claims["productId"]?.stringValue == "com.acme.fitness.monthly")
            #expect(claims["offerIdentifier"]?.stringValue == "com.acme.fitness.monthly.comeback")
            #expect(claims["transactionId"]?.stringValue == "2000000815533041")
            let jwsNonce = try #require(claims["nonce"]?.stringValue)
            #expect(UUID(uuidString: jwsNonce) != nil && jwsNonce == jwsNonce.lowercased() && jwsNonce != nonce)
            t.secrets.append((compact, "<COMPACT_JWS>"))
            t.lines[t.lines.count - 1] = "<-- " + t.redact(jwsAnswer.text)

            // introductory offer eligibility: a stranger may, our subscriber may not
            var introNonces: [String] = []
            for (who, allowed) in [("f1d2c3b4-0000-4000-8000-000000000001", true), (customer, false)] {
                let answer = try await t.exchange(
                    app,
                    request(
                        "offers.introEligibility",
                        [
                            "customerId": .string(who), "productId": "com.acme.fitness.yearly",
                            "transactionId": "2000000815533099",
                        ]),
                    label: "signed introductory-offer eligibility (\(allowed ? "a new customer" : "the subscriber"))")
                let result = try #require(answer["result"], "\(answer.text)")
                #expect(result["allowIntroductoryOffer"]?.boolValue == allowed)
                let token = try #require(result["compactJWS"]?.stringValue)
                #expect(try publicKey.verifyJWS(compact: token))
                let c = try JSONParsing.parse(try CompactJWS(compact: token).payload)
                #expect(c["aud"]?.stringValue == "introductory-offer-eligibility")
                #expect(c["allowIntroductoryOffer"]?.boolValue == allowed)
                #expect(c["productId"]?.stringValue == "com.acme.fitness.yearly")
                #expect(c["transactionId"]?.stringValue == "2000000815533099")
                #expect(c["bid"]?.stringValue == "com.acme.fitness")
                introNonces.append(try #require(c["nonce"]?.stringValue))
                t.secrets.append((token, "<COMPACT_JWS>"))
                t.lines[t.lines.count - 1] = "<-- " + t.redact(answer.text)
            }

            // the ledger holds each signature with its nonce
            let rows = try await gw.database.pool.query(
                "SELECT nonce::text, format, key_id, customer_id, coalesce(offer_id, ''), coalesce(app_account_token, '') FROM issued_signatures ORDER BY issued_at, format"
            )
            var ledger: [String: [String]] = [:]
            for row in rows {
                let (n, f, k, c, o, a) = try row.decode(
                    String.self, String.self, String.self, String.self, String.self, String.self)
                ledger[n] = [f, k, c, o, a]
            }
            #expect(ledger.count == 4)
            #expect(ledger[nonce] == ["v1", "ABC123DEFG", lower, "com.acme.fitness.monthly.comeback", lower])
            #expect(ledger[jwsNonce] == ["jws", "ABC123DEFG", lower, "com.acme.fitness.monthly.comeback", ""])
            #expect(ledger[introNonces[0]]?[0] == "introEligibility")
            #expect(ledger[introNonces[1]]?[2] == lower)

            // an unknown customer is not eligible for the promotional offer
            let refused = try await t.exchange(
                app,
                request(
                    "offers.sign",
                    [
                        "customerId": "someone-else", "productId": "com.acme.fitness.monthly",
                        "offerId": "com.acme.fitness.monthly.comeback", "format": "v1",
                    ]),
                label: "a customer without history is refused")
            #expect(refused["error"]?["code"]?.int64Value == -32020)

            // logs never carry the API key, the private key or signatures
            let logs = gw.logs.all.joined(separator: "\n")
            #expect(logs.contains("offers.sign"), "requests are logged")
            for secret in [
                apiKey, TestGateway.adminKey, String(pem.split(separator: "\n")[1]), compact,
                try #require(signed["signature"]?.stringValue),
            ] {
                #expect(!logs.contains(secret))
            }
            t.write()
        }
    }
}
