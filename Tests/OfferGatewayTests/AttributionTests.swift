import Foundation
import JSONRPC
import OfferCrypto
import OfferGateway
import OfferTestSupport
import Testing

@testable import OfferStore

/// Issue 14 point 3: verified transactions (signed by the test CA) mark the signature, redemption or claim they
/// used `purchased`.
@Suite("Attribution from verified App Store data", .serialized)
struct AttributionTests {
    static let retention: JSONValue = [
        "id": "retention_50_off", "type": "promotional", "productId": "monthly", "paymentMode": "payAsYouGo",
        "period": "P1M", "periodCount": 3, "price": "2.49",
    ]
    static let codeOffer: JSONValue = [
        "id": "code.month", "type": "code", "productId": "monthly", "paymentMode": "freeTrial", "period": "P1M",
    ]
    /// Purchases happen ten minutes after the tests' "now" (the suite's gateway clock starts there).
    static let minute: TimeInterval = 600

    static func withApple<T>(_ body: (AppleTenant) async throws -> T) async throws -> T {
        let ca = try await AppleTestCA.shared()
        let verifier = try ca.verifier()
        // The gateway's clock runs from the tests' "now" (signatures and claims get distinct, ordered times).
        let started = Date()
        let configure: (inout GatewayOptions, inout RPCServerConfiguration) -> Void = { options, _ in
            options.appleVerifier = verifier
            options.clock = { TestGateway.now.addingTimeInterval(Date().timeIntervalSince(started)) }
        }
        return try await TestGateway.with(configure: configure) { gateway in
            let app = try await AppleTenant.setUp(gateway, ca: ca, extraOffers: [retention, codeOffer])
            try await gateway.importKey(tenant: app.slug, admin: app.admin)
            return try await body(app)
        }
    }

    /// The purchase mark of a ledger row (by nonce).
    static func signatureMark(_ app: AppleTenant, nonce: String) async throws -> String? {
        let rows = try await app.gateway.database.pool.query(
            "SELECT purchase_transaction_id FROM issued_signatures WHERE nonce = \(nonce)::uuid")
        return try #require(rows.first).decode(String?.self, at: 0)
    }

    static func redemptionMark(_ app: AppleTenant, id: String) async throws -> String? {
        let rows = try await app.gateway.database.pool.query(
            "SELECT purchase_transaction_id FROM redemptions WHERE redemption_id = \(id)::uuid")
        return try #require(rows.first).decode(String?.self, at: 0)
    }

    static func claimMark(_ app: AppleTenant, claimId: String) async throws -> String? {
        let rows = try await app.gateway.database.pool.query(
            "SELECT purchase_transaction_id FROM apple_codes WHERE claim_id = \(claimId)::uuid")
        return try #require(rows.first).decode(String?.self, at: 0)
    }

    @Test("sign → verified purchase → purchased; another customer's or another offer's purchase marks nothing")
    func signatureToPurchase() async throws {
        try await Self.withApple { app in
            _ = try await app.admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": .string(app.slug), "campaignId": "save50", "offerId": "retention_50_off",
                    "kind": "custom", "code": "SAVE50",
                ])
            let customer = UUID().uuidString.lowercased()
            let other = UUID().uuidString.lowercased()
            let redeemed = try await app.client.call(
                method: "codes.redeem", params: ["code": "SAVE50", "customerId": .string(customer), "sign": "v1"])
            let redemptionId = try #require(redeemed["redemptionId"]?.stringValue)
            let older = try #require(redeemed["signature"]?["nonce"]?.stringValue)
            let signed = try await app.client.call(
                method: "offers.sign",
                params: [
                    "customerId": .string(customer), "productId": "monthly", "offerId": "retention_50_off",
                    "format": "jws", "redemptionId": .string(redemptionId),
                ])
            let latest = try #require(signed["nonce"]?.stringValue)
            let purchase = TestGateway.now.addingTimeInterval(Self.minute)
            let p = app.payloads

            // Another customer's purchase of the offer, and this customer's purchase of another offer: nothing.
            try await app.transactions([
                p.transaction(
                    id: "4001", purchase: purchase, expires: days(31), token: other, offerType: 2,
                    offerId: "retention_50_off", signed: purchase),
                p.transaction(
                    id: "4002", product: "monthly", purchase: purchase, expires: days(31), token: customer,
                    offerType: 2, offerId: "promo.half", signed: purchase),
            ])
            #expect(try await Self.signatureMark(app, nonce: older) == nil)
            #expect(try await Self.signatureMark(app, nonce: latest) == nil)
            #expect(try await Self.redemptionMark(app, id: redemptionId) == nil)

            // The customer's purchase with the offer: the latest open signature and its redemption.
            try await app.transactions([
                p.transaction(
                    id: "4003", purchase: purchase, expires: days(31), token: customer, offerType: 2,
                    offerId: "retention_50_off", signed: purchase)
            ])
            #expect(try await Self.signatureMark(app, nonce: latest) == "4003")
            #expect(try await Self.signatureMark(app, nonce: older) == nil)
            #expect(try await Self.redemptionMark(app, id: redemptionId) == "4003")
            let stats = try await app.admin.call(
                method: "campaigns.stats", params: ["tenant": .string(app.slug), "campaignId": "save50"])
            #expect(stats["purchased"] == 1 && stats["claimed"] == 0)

            // The same transaction again, and a renewal inside the offer's periods, mark nothing more.
            let renewal = purchase.addingTimeInterval(31 * 86_400)
            try await app.transactions([
                p.transaction(
                    id: "4003", purchase: purchase, expires: days(31), token: customer, offerType: 2,
                    offerId: "retention_50_off", signed: purchase.addingTimeInterval(1)),
                p.transaction(
                    id: "4004", original: "4003", purchase: renewal, expires: days(62), token: customer, offerType: 2,
                    offerId: "retention_50_off", signed: renewal),
            ])
            #expect(try await Self.signatureMark(app, nonce: older) == nil)
            #expect(
                try await app.gateway.count(
                    "SELECT count(*) FROM issued_signatures WHERE purchase_transaction_id IS NOT NULL") == 1)
        }
    }

    @Test("claim → verified offer-code purchase → purchased; unlinked data is attributed when linked")
    func claimToPurchase() async throws {
        try await Self.withApple { app in
            _ = try await app.admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": .string(app.slug), "campaignId": "asc", "offerId": "code.month", "kind": "appleOneTime",
                    "appleReferenceName": "SPRING_OTC",
                ])
            _ = try await app.admin.call(
                method: "campaigns.importCodes",
                params: [
                    "tenant": .string(app.slug), "campaignId": "asc",
                    "codes": ["AAAA1111BBBB2222CC", "DDDD3333EEEE4444FF"],
                ])
            let customer = UUID().uuidString.lowercased()
            let claim = try await app.client.call(
                method: "codes.claim", params: ["campaignId": "asc", "customerId": .string(customer)])
            let claimId = try #require(claim["claimId"]?.stringValue)
            let purchase = TestGateway.now.addingTimeInterval(Self.minute)
            let p = app.payloads

            // Another customer's code purchase, and another reference name: nothing.
            try await app.transactions([
                p.transaction(
                    id: "5001", purchase: purchase, expires: days(31), token: UUID().uuidString, offerType: 3,
                    offerId: "SPRING_OTC", signed: purchase),
                p.transaction(
                    id: "5002", purchase: purchase, expires: days(31), token: customer, offerType: 3,
                    offerId: "OTHER_OTC", signed: purchase),
            ])
            #expect(try await Self.claimMark(app, claimId: claimId) == nil)
            try await app.transactions([
                p.transaction(
                    id: "5003", purchase: purchase, expires: days(31), token: customer, offerType: 3,
                    offerId: "SPRING_OTC", signed: purchase)
            ])
            #expect(try await Self.claimMark(app, claimId: claimId) == "5003")

            // A claimant whose purchase arrives without a token: kept unlinked, attributed at customers.link.
            let later = "late-customer"
            let second = try await app.client.call(
                method: "codes.claim", params: ["campaignId": "asc", "customerId": .string(later)])
            let secondId = try #require(second["claimId"]?.stringValue)
            try await app.transactions([
                p.transaction(
                    id: "5004", purchase: purchase, expires: days(31), offerType: 3, offerId: "SPRING_OTC",
                    signed: purchase)
            ])
            #expect(try await Self.claimMark(app, claimId: secondId) == nil)
            _ = try await app.client.call(
                method: "customers.link", params: ["customerId": .string(later), "originalTransactionId": "5004"])
            #expect(try await Self.claimMark(app, claimId: secondId) == "5004")

            let stats = try await app.admin.call(
                method: "campaigns.stats", params: ["tenant": .string(app.slug), "campaignId": "asc"])
            #expect(stats["claimed"] == 2 && stats["purchased"] == 2)
        }
    }
}
