import Foundation
import JSONRPC
import OfferCrypto
import OfferGateway
import OfferTestSupport
import Testing

/// Apple's signed data in (API.md §8), end to end: real PostgreSQL, real sockets, JWS signed by the test CA that
/// Apple's own library referees (OfferCryptoTests).
@Suite("Apple signed data: ingestion and decisions", .serialized)
struct AppleDataTests {
    static func withApple<T>(
        allowSandbox: Bool = false, extraOffers: [JSONValue] = [], _ body: (AppleTenant) async throws -> T
    ) async throws -> T {
        let ca = try await AppleTestCA.shared()
        let verifier = try ca.verifier()
        return try await TestGateway.with(configure: { options, _ in options.appleVerifier = verifier }) { gateway in
            try await body(
                try await AppleTenant.setUp(gateway, ca: ca, allowSandbox: allowSandbox, extraOffers: extraOffers))
        }
    }

    static let winBackDeep: JSONValue = [
        "id": "winback.deep", "type": "winBack", "productId": "monthly", "paymentMode": "payUpFront", "period": "P3M",
        "price": "0.99", "minPaidMonths": 2, "monthsSinceLapse": ["min": 1, "max": 12],
    ]
    static let promoAtRisk: JSONValue = [
        "id": "promo.atrisk", "type": "promotional", "productId": "monthly", "paymentMode": "payAsYouGo",
        "period": "P1M", "periodCount": 2, "price": "1.99", "audience": ["atRisk"],
    ]

    @Test("The same notification twice: stored once, the second answer says duplicate and changes nothing")
    func duplicateNotification() async throws {
        try await Self.withApple { app in
            let token = UUID().uuidString
            let tx = try app.signed(
                app.payloads.transaction(
                    id: "1001", purchase: days(-10), expires: days(20), token: token, signed: days(-10)))
            let notification = app.payloads.notification(
                type: "SUBSCRIBED", subtype: "INITIAL_BUY", transaction: tx, signed: days(-10))
            let first = try await app.notify(notification)
            #expect(first["duplicate"]?.boolValue == false)
            #expect(first["applied"]?.boolValue == true)
            #expect(first["customerId"]?.stringValue == token.lowercased())
            #expect(first["notificationType"]?.stringValue == "SUBSCRIBED")
            #expect(first["subtype"]?.stringValue == "INITIAL_BUY")
            #expect(first["environment"]?.stringValue == "Production")
            let before = try await app.group(token)
            // Signed again (ECDSA signatures differ): the notificationUUID alone makes it the same notification.
            let second = try await app.notify(notification)
            #expect(second["duplicate"]?.boolValue == true)
            #expect(second["applied"]?.boolValue == false)
            #expect(second["customerId"]?.stringValue == token.lowercased(), "a retry names the customer it reached")
            #expect(try await app.count("apple_notifications") == 1)
            #expect(try await app.count("apple_transactions") == 1)
            let after = try await app.group(token)
            #expect(before == after)
            #expect(after["state"]?.stringValue == "active")
            #expect(after["source"]?.stringValue == "apple")
            #expect(after["environment"]?.stringValue == "Production")
            // The customer id is the token lowercased, whatever case the client asks in.
            #expect(try await app.group(token.uppercased())["state"]?.stringValue == "active")
        }
    }

    @Test("Out of order: an older renewal info after a newer one changes nothing")
    func outOfOrderRenewal() async throws {
        try await Self.withApple { app in
            let token = UUID().uuidString.lowercased()
            let tx = try app.signed(
                app.payloads.transaction(
                    id: "2001", purchase: days(-10), expires: days(20), token: token, signed: days(-10)))
            let newer = try app.signed(
                app.payloads.renewal(original: "2001", autoRenewStatus: 0, signed: days(-1)))
            let older = try app.signed(app.payloads.renewal(original: "2001", autoRenewStatus: 1, signed: days(-5)))
            try await app.notify(
                app.payloads.notification(
                    type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", transaction: tx, renewal: newer,
                    signed: days(-1)))
            try await app.notify(
                app.payloads.notification(
                    type: "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_ENABLED", transaction: tx, renewal: older,
                    signed: days(-5)))
            #expect(try await app.group(token)["autoRenew"]?.boolValue == false)
            // The same through appstore.transactions: the older renewal info is a duplicate.
            let result = try await app.client.call(
                method: "appstore.transactions",
                params: ["signedTransactions": [.string(tx)], "signedRenewalInfo": [.string(older)]])
            #expect(result["applied"]?.int64Value == Int64(0))
            #expect(result["duplicates"]?.int64Value == Int64(2))
            #expect(result["customers"] == [.string(token)])
            #expect(try await app.group(token)["autoRenew"]?.boolValue == false)
        }
    }

    @Test("An unlinked transaction is kept, and applied when customers.link arrives")
    func unlinkedThenLinked() async throws {
        try await Self.withApple { app in
            let stored = try await app.transactions([
                app.payloads.transaction(id: "3001", purchase: days(-3), expires: days(27), signed: days(-3))
            ])
            #expect(stored["applied"]?.int64Value == Int64(1))
            #expect(stored["customers"] == [])
            #expect(try await app.group("cust-42")["state"]?.stringValue == "never")
            let link = try await app.client.call(
                method: "customers.link", params: ["customerId": "cust-42", "originalTransactionId": "3001"])
            #expect(link["linked"]?.boolValue == true)
            #expect(link["applied"]?.int64Value == Int64(1))
            let group = try await app.group("cust-42")
            #expect(group["state"]?.stringValue == "active")
            #expect(group["source"]?.stringValue == "apple")
            // Later data of the chain finds the customer by the link.
            let renewal = try await app.transactions(
                [], renewals: [app.payloads.renewal(original: "3001", autoRenewStatus: 0, signed: days(-1))])
            #expect(renewal["customers"] == ["cust-42"])
            #expect(try await app.group("cust-42")["autoRenew"]?.boolValue == false)
            // Linking again to the same customer changes nothing; to another is a conflict.
            let again = try await app.client.call(
                method: "customers.link", params: ["customerId": "cust-42", "originalTransactionId": "3001"])
            #expect(again["applied"]?.int64Value == Int64(0))
            await expectRPCError(-32009) {
                try await app.client.call(
                    method: "customers.link", params: ["customerId": "cust-43", "originalTransactionId": "3001"])
            }
            // appstore.transactions' customerId links too.
            let linked = try await app.transactions(
                [app.payloads.transaction(id: "3101", purchase: days(-3), expires: days(27), signed: days(-3))],
                customerId: "cust-44")
            #expect(linked["customers"] == ["cust-44"])
            #expect(try await app.group("cust-44")["state"]?.stringValue == "active")
            // And so does subscriptions.record's originalTransactionId (Apple's copy of the same id wins).
            try await app.transactions([
                app.payloads.transaction(id: "3201", purchase: days(-3), expires: days(27), signed: days(-3))
            ])
            _ = try await app.client.call(
                method: "subscriptions.record",
                params: [
                    "customerId": "cust-45", "productId": "monthly", "transactionId": "3201",
                    "originalTransactionId": "3201", "purchaseDate": "2026-06-01T00:00:00Z",
                    "expiresDate": "2026-07-01T00:00:00Z",
                ])
            let recorded = try await app.group("cust-45")
            #expect(recorded["state"]?.stringValue == "active")
            #expect(recorded["source"]?.stringValue == "apple")
        }
    }

    @Test("A token that links a chain also gives it the chain's data kept unlinked before")
    func tokenLinkAdoptsEarlierUnlinkedData() async throws {
        try await Self.withApple { app in
            let token = "5d2f1c9e-8a4b-4c3d-9e7f-1a2b3c4d5e6f"
            // History without a token first: kept unlinked, and the renewal info with it.
            let early = try await app.transactions(
                [app.payloads.transaction(id: "4001", purchase: days(-40), expires: days(-10), signed: days(-40))],
                renewals: [app.payloads.renewal(original: "4001", autoRenewStatus: 0, signed: days(-40))])
            #expect(early["customers"] == [])
            // A renewal of the same chain carries the app account token: the chain is the token's customer's now,
            // with everything kept for it so far.
            let renewed = try await app.transactions([
                app.payloads.transaction(
                    id: "4002", original: "4001", purchase: days(-10), expires: days(20), token: token,
                    signed: days(-10))
            ])
            #expect(renewed["customers"] == [.string(token)])
            let group = try await app.group(token)
            #expect(group["state"]?.stringValue == "active")
            #expect(group["autoRenew"]?.boolValue == false, "the renewal info stored before the link is theirs too")
            // The month from -40 to -10 days counts only if the early transaction was adopted (the new one is 10 days old).
            #expect(group["paidMonths"]?.int64Value == Int64(1), "\(group)")
        }
    }

    @Test("A Sandbox notification never changes a Production decision")
    func sandboxNeverChangesProduction() async throws {
        try await Self.withApple(allowSandbox: true) { app in
            let token = UUID().uuidString.lowercased()
            try await app.transactions(
                [
                    app.payloads.transaction(
                        id: "4001", purchase: days(-200), expires: days(-60), token: token, signed: days(-60))
                ], renewals: [app.payloads.renewal(original: "4001", autoRenewStatus: 0, signed: days(-60))])
            let best: JSONValue = ["customerId": .string(token), "productId": "monthly"]
            let before = try await app.client.call(method: "offers.best", params: best)
            let groupBefore = try await app.group(token)
            #expect(before["offer"]?["offerId"]?.stringValue == "winback.monthly", "\(before.text)")
            let sandboxTx = try app.signed(
                app.payloads.transaction(
                    id: "4002", purchase: days(-2), expires: days(28), environment: "Sandbox", token: token,
                    signed: days(-2)))
            let sandboxRenewal = try app.signed(
                app.payloads.renewal(original: "4002", winBack: [], environment: "Sandbox", signed: days(-2)))
            let result = try await app.notify(
                app.payloads.notification(
                    type: "SUBSCRIBED", environment: "Sandbox", transaction: sandboxTx, renewal: sandboxRenewal,
                    signed: days(-2)))
            #expect(result["environment"]?.stringValue == "Sandbox")
            #expect(try await app.count("apple_transactions") == 2)
            #expect(try await app.client.call(method: "offers.best", params: best) == before)
            let groupAfter = try await app.group(token)
            #expect(groupAfter == groupBefore)
            #expect(groupAfter["environment"]?.stringValue == "Production")
            #expect(groupAfter["state"]?.stringValue == "expired")
            // A customer with Sandbox data only, for a tenant that allows Sandbox: decisions use it.
            let tester = UUID().uuidString.lowercased()
            try await app.transactions([
                app.payloads.transaction(
                    id: "4003", purchase: days(-2), expires: days(28), environment: "Sandbox", token: tester,
                    signed: days(-2))
            ])
            let testerGroup = try await app.group(tester)
            #expect(testerGroup["environment"]?.stringValue == "Sandbox")
            #expect(testerGroup["state"]?.stringValue == "active")
        }
    }

    @Test("Sandbox data for a tenant that does not allow it: -32060 environment_not_allowed, nothing stored")
    func sandboxNotAllowed() async throws {
        try await Self.withApple { app in
            let tx = try app.signed(
                app.payloads.transaction(
                    id: "5001", purchase: days(-2), expires: days(28), environment: "Sandbox", token: UUID().uuidString,
                    signed: days(-2)))
            let error = await expectRPCError(-32060) {
                try await app.notify(
                    app.payloads.notification(environment: "Sandbox", transaction: tx, signed: days(-2)))
            }
            #expect(error?.reason == "environment_not_allowed")
            #expect(try await app.count("apple_notifications") == 0)
            #expect(try await app.count("apple_transactions") == 0)
        }
    }

    @Test("Xcode data only for tenants with allowXcode, kept as unverified; Production needs the app Apple id")
    func xcodeAndAppAppleId() async throws {
        try await Self.withApple { app in
            let token = UUID().uuidString.lowercased()
            let xcode = app.payloads.transaction(
                id: "5101", purchase: days(-2), expires: days(28), environment: "Xcode", token: token, signed: days(-2))
            let refused = await expectRPCError(-32060) { try await app.transactions([xcode]) }
            #expect(refused?.reason == "environment_not_allowed")
            _ = try await app.admin.call(
                method: "tenants.update", params: ["tenant": .string(app.slug), "allowXcode": true])
            #expect(try await app.transactions([xcode])["customers"] == [.string(token)])
            let tenant = try await app.gateway.tenantId(app.slug)
            #expect(
                try await app.gateway.count(
                    """
                    SELECT count(*)::bigint FROM apple_transactions
                    WHERE tenant_id = \(tenant) AND authenticity = 'unverifiedDevelopmentData' AND environment = 'Xcode'
                    """) == 1)
            // A tenant without an app Apple id cannot take Production notifications (API.md §8).
            let admin = app.admin
            let key = try await app.gateway.createTenant("apple-noid", bundleId: app.payloads.bundleId, admin: admin)
            let noId = try await app.gateway.tenant(key)
            let notification = try app.signed(app.payloads.notification(type: "TEST", signed: days(-1)))
            let error = await expectRPCError(-32060) {
                try await noId.call(method: "appstore.notification", params: ["signedPayload": .string(notification)])
            }
            #expect(error?.reason == "wrong_app_apple_id")
            // The same notification for the tenant with the app Apple id: a TEST applies to nobody.
            let test = try await app.client.call(
                method: "appstore.notification", params: ["signedPayload": .string(notification)])
            #expect(test["applied"] == false)
            #expect(test["customerId"] == .null)
            #expect(test["subtype"] == .null)
        }
    }

    @Test("Win-back follows Apple's eligibleWinBackOfferIds both ways, and Apple's first choice ranks first")
    func winBackFollowsApple() async throws {
        try await Self.withApple(extraOffers: [Self.winBackDeep]) { app in
            func lapsed(_ id: String, lapsedDaysAgo: Double, winBack: [String]?) async throws -> String {
                let token = UUID().uuidString.lowercased()
                try await app.transactions(
                    [
                        app.payloads.transaction(
                            id: id, purchase: days(-200), expires: days(-lapsedDaysAgo), token: token,
                            signed: days(-lapsedDaysAgo))
                    ],
                    renewals: [
                        app.payloads.renewal(
                            original: id, autoRenewStatus: 0, winBack: winBack, signed: days(-lapsedDaysAgo))
                    ])
                return token
            }
            func verdict(_ customer: String, _ offer: String) async throws -> JSONValue {
                let answer = try await app.client.call(
                    method: "offers.eligibility", params: ["customerId": .string(customer), "productId": "monthly"])
                return try #require(answer["offers"]?.arrayValue?.first { $0["offerId"]?.stringValue == offer })
            }
            func best(_ customer: String) async throws -> String? {
                try await app.client.call(
                    method: "offers.best", params: ["customerId": .string(customer), "productId": "monthly"]
                )["offer"]?["offerId"]?.stringValue
            }
            // Our rules would allow (lapsed two months, paid well over two): Apple lists another offer only.
            let refused = try await lapsed("6001", lapsedDaysAgo: 60, winBack: ["winback.deep"])
            #expect(try await verdict(refused, "winback.monthly")["reasons"] == ["not_eligible_per_apple"])
            #expect(try await verdict(refused, "winback.deep")["eligible"]?.boolValue == true)
            // Our rules would refuse (lapsed five days ago: lapsed_too_recently): Apple lists it.
            let recent = try await lapsed("6002", lapsedDaysAgo: 5, winBack: ["winback.monthly"])
            #expect(try await verdict(recent, "winback.monthly")["eligible"]?.boolValue == true)
            #expect(try await verdict(recent, "winback.deep")["reasons"] == ["not_eligible_per_apple"])
            // Without Apple's list our own rules decide, and the larger saving wins.
            let ours = try await lapsed("6003", lapsedDaysAgo: 60, winBack: nil)
            #expect(try await best(ours) == "winback.deep")
            let tooRecentOurs = try await lapsed("6004", lapsedDaysAgo: 5, winBack: nil)
            #expect(try await verdict(tooRecentOurs, "winback.monthly")["reasons"] == ["lapsed_too_recently"])
            // Apple's first choice first, even with the smaller saving.
            let ranked = try await lapsed("6005", lapsedDaysAgo: 60, winBack: ["winback.monthly", "winback.deep"])
            #expect(try await best(ranked) == "winback.monthly")
            #expect(try await app.group(ranked)["eligibleWinBackOfferIds"] == ["winback.monthly", "winback.deep"])
            #expect(try await app.group(ours)["eligibleWinBackOfferIds"] == .null)
        }
    }

    @Test("A remembered offers.best answer is never served after Apple data changes the customer's inputs")
    func memoFollowsIngestion() async throws {
        try await Self.withApple { app in
            let token = UUID().uuidString.lowercased()
            try await app.transactions(
                [
                    app.payloads.transaction(
                        id: "6501", purchase: days(-200), expires: days(-60), token: token, signed: days(-60))
                ],
                renewals: [app.payloads.renewal(original: "6501", autoRenewStatus: 0, signed: days(-60))])
            let params: JSONValue = ["customerId": .string(token), "productId": "monthly"]
            let first = try await app.client.call(method: "offers.best", params: params)
            #expect(first["offer"]?["offerId"]?.stringValue == "winback.monthly")
            // Remembered: the same answer again.
            #expect(try await app.client.call(method: "offers.best", params: params) == first)
            // Apple now lists no win-back offer for the group: the remembered answer must not be served.
            let fresh = app.payloads.renewal(original: "6501", autoRenewStatus: 0, winBack: [], signed: days(-1))
            try await app.transactions([], renewals: [fresh])
            let after = try await app.client.call(method: "offers.best", params: params)
            #expect(after["offer"]?["offerId"]?.stringValue != "winback.monthly", "\(after.text)")
        }
    }

    @Test("At risk from autoRenewStatus 0; billing retry and grace period from renewal info")
    func renewalStates() async throws {
        try await Self.withApple(extraOffers: [Self.promoAtRisk]) { app in
            func customer(
                _ id: String, expires: Date, autoRenew: Int = 1, retry: Bool = false, grace: Date? = nil
            ) async throws -> String {
                let token = UUID().uuidString.lowercased()
                try await app.transactions(
                    [
                        app.payloads.transaction(
                            id: id, purchase: days(-27), expires: expires, token: token, signed: days(-27))
                    ],
                    renewals: [
                        app.payloads.renewal(
                            original: id, autoRenewStatus: autoRenew, retry: retry, grace: grace, signed: days(-1))
                    ])
                return token
            }
            func atRiskOffer(_ customer: String) async throws -> JSONValue? {
                let answer = try await app.client.call(
                    method: "offers.eligibility", params: ["customerId": .string(customer), "productId": "monthly"])
                return answer["offers"]?.arrayValue?.first { $0["offerId"]?.stringValue == "promo.atrisk" }
            }
            let atRisk = try await customer("7001", expires: days(3), autoRenew: 0)
            #expect(try await app.group(atRisk)["autoRenew"]?.boolValue == false)
            #expect(try await atRiskOffer(atRisk)?["eligible"]?.boolValue == true)
            let renewing = try await customer("7002", expires: days(3), autoRenew: 1)
            #expect(try await atRiskOffer(renewing)?["reasons"] == ["not_in_audience"])
            #expect(try await app.group(renewing)["autoRenewProductId"]?.stringValue == "monthly")
            let retrying = try await customer("7003", expires: days(-3), retry: true)
            #expect(try await app.group(retrying)["state"]?.stringValue == "billingRetry")
            let grace = try await customer("7004", expires: days(-3), retry: true, grace: days(3))
            #expect(try await app.group(grace)["state"]?.stringValue == "gracePeriod")
            let lapsed = try await customer("7005", expires: days(-3), retry: false)
            #expect(try await app.group(lapsed)["state"]?.stringValue == "expired")
        }
    }

    @Test("Recorded and Apple data together: the group's source is mixed; Apple's copy supersedes the same id")
    func mixedSources() async throws {
        try await Self.withApple { app in
            let token = UUID().uuidString.lowercased()
            _ = try await app.client.call(
                method: "subscriptions.record",
                params: [
                    "customerId": .string(token), "productId": "monthly", "transactionId": "8000",
                    "purchaseDate": "2026-06-01T00:00:00Z", "expiresDate": "2026-07-01T00:00:00Z",
                ])
            #expect(try await app.group(token)["source"]?.stringValue == "recorded")
            try await app.transactions([
                app.payloads.transaction(
                    id: "8001", purchase: days(-10), expires: days(20), token: token, signed: days(-10))
            ])
            #expect(try await app.group(token)["source"]?.stringValue == "mixed")
            // Apple reports the recorded transaction itself (revoked): Apple's copy is the one decisions see.
            try await app.transactions([
                app.payloads.transaction(
                    id: "8000", purchase: days(-171), expires: days(-141), token: token, signed: days(-1))
            ])
            #expect(try await app.group(token)["source"]?.stringValue == "apple")
        }
    }

    @Test("offerType 5 and unknown offer types are kept, not rejected")
    func unknownOfferTypesKept() async throws {
        try await Self.withApple { app in
            let token = UUID().uuidString.lowercased()
            let result = try await app.transactions([
                app.payloads.transaction(
                    id: "9001", purchase: days(-10), expires: days(20), token: token, offerType: 5,
                    offerId: "retention.1", signed: days(-10)),
                app.payloads.transaction(
                    id: "9002", purchase: days(-40), expires: days(-10), token: token, offerType: 17,
                    signed: days(-40)),
            ])
            #expect(result["applied"]?.int64Value == Int64(2))
            let tenant = try await app.gateway.tenantId(app.slug)
            #expect(
                try await app.gateway.count(
                    """
                    SELECT count(*)::bigint FROM apple_transactions
                    WHERE tenant_id = \(tenant) AND offer_type IN (5, 17)
                    """
                )
                    == 2)
            #expect(try await app.group(token)["state"]?.stringValue == "active")
        }
    }

    @Test("tenants.update: validated, and visible to another gateway through the change feed")
    func tenantsUpdateAcrossGateways() async throws {
        let ca = try await AppleTestCA.shared()
        let verifier = try ca.verifier()
        try await TestGateway.withPair(configure: { _, options, _ in options.appleVerifier = verifier }) { one, two in
            let app = try await AppleTenant.setUp(one, ca: ca)
            let onTwo = try await two.tenant(
                try #require(
                    try await app.admin.call(method: "tenants.rotateApiKey", params: ["tenant": .string(app.slug)])[
                        "apiKey"]?.stringValue))
            let sandbox = [
                try app.signed(
                    app.payloads.transaction(
                        id: "10001", purchase: days(-2), expires: days(28), environment: "Sandbox",
                        token: UUID().uuidString, signed: days(-2)))
            ]
            let rejected = await expectRPCError(-32060) {
                try await onTwo.call(
                    method: "appstore.transactions", params: ["signedTransactions": .array(sandbox.map { .string($0) })]
                )
            }
            #expect(rejected?.reason == "environment_not_allowed")
            let updated = try await app.admin.call(
                method: "tenants.update",
                params: ["tenant": .string(app.slug), "allowSandbox": true, "name": "Apple App"])
            #expect(updated["allowSandbox"]?.boolValue == true)
            #expect(updated["appAppleId"]?.int64Value == Int64(Int(AppleTestCA.appAppleId)))
            #expect(updated["name"]?.stringValue == "Apple App")
            let accepted = try await eventually {
                (try? await onTwo.call(
                    method: "appstore.transactions", params: ["signedTransactions": .array(sandbox.map { .string($0) })]
                ))
                    != nil
            }
            #expect(accepted)
            await expectRPCError(-32602, param: "params.appAppleId") {
                try await app.admin.call(
                    method: "tenants.update", params: ["tenant": .string(app.slug), "appAppleId": -5])
            }
            await expectRPCError(-32004) {
                try await app.admin.call(
                    method: "tenants.update", params: ["tenant": "nobody-here", "allowXcode": true])
            }
            await expectRPCError(-32002) {
                try await onTwo.call(
                    method: "tenants.update", params: ["tenant": .string(app.slug), "allowXcode": true])
            }
        }
    }

    @Test("Concurrent ingestion of one customer's notifications from two gateways converges")
    func concurrentIngestionConverges() async throws {
        let ca = try await AppleTestCA.shared()
        let verifier = try ca.verifier()
        try await TestGateway.withPair(configure: { _, options, _ in options.appleVerifier = verifier }) { one, two in
            let app = try await AppleTenant.setUp(one, ca: ca)
            let apiKey = try #require(
                try await app.admin.call(method: "tenants.rotateApiKey", params: ["tenant": .string(app.slug)])[
                    "apiKey"]?.stringValue)
            let clients = [try await one.tenant(apiKey), try await two.tenant(apiKey)]
            let token = UUID().uuidString.lowercased()
            // 24 renewals of one chain, each a notification with its own transaction; the newest (i = 23) says
            // auto-renew off and lists a win-back offer.
            let notifications = try (0..<24).map { i -> String in
                let tx = try app.signed(
                    app.payloads.transaction(
                        id: "11\(100 + i)", original: "11100", purchase: days(Double(-240 + 10 * i)),
                        expires: days(Double(-230 + 10 * i)), token: token, signed: days(Double(-240 + 10 * i))))
                let renewal = try app.signed(
                    app.payloads.renewal(
                        original: "11100", autoRenewStatus: i == 23 ? 0 : 1,
                        winBack: i == 23 ? ["winback.monthly"] : nil,
                        signed: days(Double(-240 + 10 * i))))
                return try app.signed(
                    app.payloads.notification(transaction: tx, renewal: renewal, signed: days(Double(-240 + 10 * i))))
            }
            // Each gateway takes the concurrent notifications in group commits: duplicates inside one group (both
            // copies reach one gateway before its group commits) and across the two gateways' groups.
            let answers = try await withThrowingTaskGroup(of: (Int, JSONValue).self) { group in
                for (index, jws) in notifications.enumerated().reversed() {
                    // Each notification is sent to both gateways at once (Apple retries; two gateways behind one URL),
                    // and once more to the first.
                    for client in clients + [clients[0]] {
                        group.addTask {
                            (
                                index,
                                try await client.call(
                                    method: "appstore.notification", params: ["signedPayload": .string(jws)])
                            )
                        }
                    }
                }
                var answers: [Int: [JSONValue]] = [:]
                for try await (index, answer) in group { answers[index, default: []].append(answer) }
                return answers
            }
            for (index, copies) in answers {
                #expect(
                    copies.filter { $0["duplicate"]?.boolValue == false }.count == 1, "notification \(index) new once")
                #expect(copies.allSatisfy { $0["customerId"]?.stringValue == token }, "every copy names the customer")
            }
            #expect(try await app.count("apple_notifications") == 24)
            #expect(try await app.count("apple_transactions") == 24)
            #expect(try await app.count("apple_renewal_infos") == 1)
            let seenByOne = try await app.group(token, on: clients[0])
            let seenByTwo = try await app.group(token, on: clients[1])
            #expect(seenByOne == seenByTwo)
            #expect(seenByOne["autoRenew"]?.boolValue == false)
            #expect(seenByOne["eligibleWinBackOfferIds"] == ["winback.monthly"])
        }
    }

    @Test("Hostile input over the socket: -32060 or -32602, never -32603, nothing stored, the gateway alive")
    func hostileInput() async throws {
        try await Self.withApple { app in
            let p = app.payloads
            let good = p.transaction(
                id: "12001", purchase: days(-2), expires: days(28), token: UUID().uuidString, signed: days(-2))
            func mutated(_ key: String, _ value: JSONValue) -> JSONValue {
                guard case .object(var object) = good else { return good }
                object[key] = value
                return .object(object)
            }
            var forged: [String] = [
                "", "x", "a.b", "a.b.c", "....", String(repeating: "A", count: 400_000) + ".e30.AA",
                "eyJhbGciOiJFUzI1NiJ9.e30.", "eyJ.eyJ.eyJ", "%%%.%%%.%%%",
            ]
            let validJWS = try app.signed(good)
            let parts = validJWS.split(separator: ".").map(String.init)
            forged.append(parts[0] + "." + parts[1])
            forged.append(parts[0] + "." + parts[1] + "." + String(parts[2].dropLast(4)))
            forged.append(parts[0] + "." + Base64URL.encode(Array("[1,2]".utf8)) + "." + parts[2])
            for (key, value) in [
                ("transactionId", JSONValue.int(5)), ("transactionId", .string("")),
                ("transactionId", .string(String(repeating: "9", count: 101))), ("transactionId", .string("1\u{0}2")),
                ("originalTransactionId", .null), ("purchaseDate", "yesterday"), ("purchaseDate", .int(-5)),
                ("expiresDate", .number(JSONNumber(1e300)!)), ("appAccountToken", "not-a-uuid"),
                ("offerType", "two"), ("productId", .array([])), ("inAppOwnershipType", .object([:])),
                ("signedDate", "now"), ("environment", .int(1)), ("revocationDate", .bool(true)),
            ] {
                forged.append(try app.signed(mutated(key, value)))
            }
            // And a seeded thousand of the valid token mutated: a character replaced, cut short, or a character
            // dropped (any change breaks the signature or the encoding; none may be accepted or crash anything).
            var seed: UInt64 = 0x5EED_0A11
            func next(_ bound: Int) -> Int {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return Int((seed >> 33) % UInt64(bound))
            }
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ ".utf8)
            let bytes = Array(validJWS.utf8)
            for round in 0..<1_000 {
                var copy = bytes
                let at = next(copy.count)
                switch round % 3 {
                case 0:
                    var replacement = alphabet[next(alphabet.count)]
                    while replacement == copy[at] { replacement = alphabet[next(alphabet.count)] }
                    copy[at] = replacement
                case 1: copy = Array(copy[..<at])
                default: copy.remove(at: at)
                }
                forged.append(String(decoding: copy, as: UTF8.self))
            }
            #expect(forged.count > 1_000)
            for jws in forged {
                for method in ["appstore.notification", "appstore.transactions"] {
                    let params: JSONValue =
                        method == "appstore.notification"
                        ? ["signedPayload": .string(jws)] : ["signedTransactions": [.string(jws)]]
                    do {
                        let value = try await app.client.call(method: method, params: params)
                        Issue.record("accepted \(method) \(jws.prefix(60)): \(value.text)")
                    } catch let error as RPCError {
                        #expect([-32060, -32602].contains(error.code), "\(method) \(jws.prefix(60)): \(error)")
                    }
                }
            }
            // A good notification whose nested transaction is hostile: nothing of it is stored.
            let nested = try app.signed(mutated("purchaseDate", "soon"))
            await expectRPCError(-32060) {
                try await app.notify(p.notification(transaction: nested, signed: days(-1)))
            }
            // Wrong shapes of params.
            for params: JSONValue in [
                ["signedPayload": 5], ["signedPayload": .null], [:], ["signedPayload": ["a"]],
            ] {
                await expectRPCError(-32602) {
                    try await app.client.call(method: "appstore.notification", params: params)
                }
            }
            for params: JSONValue in [
                ["signedTransactions": "x"], ["signedTransactions": [5]], ["signedTransactions": []],
                ["signedTransactions": .array(Array(repeating: "x", count: 1_001))],
                ["signedTransactions": [.string(validJWS)], "customerId": ""],
            ] {
                await expectRPCError(-32602) {
                    try await app.client.call(method: "appstore.transactions", params: params)
                }
            }
            await expectRPCError(-32602) {
                try await app.client.call(
                    method: "customers.link", params: ["customerId": "c", "originalTransactionId": ""])
            }
            for table in ["apple_notifications", "apple_transactions", "apple_renewal_infos", "customer_links"] {
                #expect(try await app.count(table) == 0, "\(table)")
            }
            #expect(try await app.client.call(method: "system.ping") == [:])
        }
    }

    @Test("Real Apple-signed fixtures apply for a tenant with their bundle id; negatives are rejected, nothing stored")
    func realFixtures() async throws {
        struct Entry: Decodable {
            let file: String
            let expected: String
            let kind: String
            let environment: String?
            let bundleId: String?
            let appAppleId: Int64?
            let derivedFrom: String?

            enum CodingKeys: String, CodingKey {
                case file, expected, kind, environment, bundleId, appAppleId
                case derivedFrom = "derived_from"
            }
        }
        let directory = PackagePaths.root.appendingPathComponent("Tests/OfferGatewayTests/Fixtures/AppleSignedData")
        let manifest = try JSONDecoder().decode(
            [Entry].self, from: Data(contentsOf: directory.appendingPathComponent("manifest.json")))
        let reasons = [
            "NEG_01_notification_payload_byte.jws": "invalid_signature",
            "NEG_02_notification_sig_truncated.jws": "malformed_jws",
            "NEG_03_notification_x5c_reordered.jws": "invalid_certificate_chain",
            "EDGE_01_renewal_null_payload.jws": "malformed_jws",
        ]
        try await TestGateway.with { gateway in
            let admin = try await gateway.admin()
            for (index, entry) in manifest.enumerated() {
                let tenantEntry = manifest.first { $0.file == entry.derivedFrom } ?? entry
                let slug = "real-\(index)"
                let key = try await gateway.createTenant(
                    slug, bundleId: tenantEntry.bundleId ?? "com.example.unused", admin: admin)
                var update: JSONObject = ["tenant": .string(slug), "allowSandbox": true]
                if let id = tenantEntry.appAppleId { update["appAppleId"] = .int(Int(id)) }
                _ = try await admin.call(method: "tenants.update", params: .object(update))
                let client = try await gateway.tenant(key)
                let jws = try String(contentsOf: directory.appendingPathComponent(entry.file), encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                let call: () async throws -> JSONValue = {
                    switch entry.kind {
                    case "notification":
                        try await client.call(method: "appstore.notification", params: ["signedPayload": .string(jws)])
                    case "transaction":
                        try await client.call(
                            method: "appstore.transactions", params: ["signedTransactions": [.string(jws)]])
                    default:
                        try await client.call(
                            method: "appstore.transactions",
                            params: ["signedTransactions": [], "signedRenewalInfo": [.string(jws)]])
                    }
                }
                let tenant = try await gateway.tenantId(slug)
                let stored = try await gateway.count(
                    """
                    SELECT (SELECT count(*) FROM apple_notifications WHERE tenant_id = \(tenant))
                         + (SELECT count(*) FROM apple_transactions WHERE tenant_id = \(tenant))
                         + (SELECT count(*) FROM apple_renewal_infos WHERE tenant_id = \(tenant))
                    """)
                #expect(stored == 0)
                if entry.expected == "verify" {
                    let result = try await call()
                    if entry.kind == "notification" {
                        #expect(result["duplicate"]?.boolValue == false, "\(entry.file)")
                        #expect(result["environment"]?.stringValue == entry.environment, "\(entry.file)")
                    } else {
                        #expect(result["applied"]?.int64Value == Int64(1), "\(entry.file): \(result.text)")
                    }
                    let after = try await gateway.count(
                        """
                        SELECT (SELECT count(*) FROM apple_notifications WHERE tenant_id = \(tenant))
                             + (SELECT count(*) FROM apple_transactions WHERE tenant_id = \(tenant))
                             + (SELECT count(*) FROM apple_renewal_infos WHERE tenant_id = \(tenant))
                        """)
                    #expect(after >= 1, "\(entry.file)")
                    // The raw JWS is kept for audit, byte for byte.
                    if entry.kind == "notification" {
                        #expect(
                            try await gateway.count(
                                """
                                SELECT count(*)::bigint FROM apple_notifications
                                WHERE tenant_id = \(tenant) AND jws = \(jws)
                                """
                            )
                                == 1, "\(entry.file)")
                    }
                } else {
                    let error = await expectRPCError(-32060) { try await call() }
                    #expect(error?.reason == reasons[entry.file], "\(entry.file)")
                    let after = try await gateway.count(
                        """
                        SELECT (SELECT count(*) FROM apple_notifications WHERE tenant_id = \(tenant))
                             + (SELECT count(*) FROM apple_transactions WHERE tenant_id = \(tenant))
                             + (SELECT count(*) FROM apple_renewal_infos WHERE tenant_id = \(tenant))
                        """)
                    #expect(after == 0, "\(entry.file)")
                }
            }
        }
    }
}
