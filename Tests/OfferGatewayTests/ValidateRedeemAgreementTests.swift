import Foundation
import JSONRPC
import Testing

@testable import OfferGateway

/// `codes.validate` and `codes.redeem` decide with one rule (`Campaign.refusal`): for the same state, validate
/// names the refusal redeem then fails with, for every refusal, including states where several rules apply at once.
@Suite("codes.validate agrees with codes.redeem")
struct ValidateRedeemAgreementTests {
    static func date(_ offsetDays: Double) -> JSONValue {
        .string(RFC3339.format(Date().addingTimeInterval(offsetDays * 86_400)) ?? "")
    }

    /// One state to probe: a customer, a code, and the refusal both methods must report (nil: redeemable).
    struct Probe {
        let name: String
        let customer: String
        let code: String
        let expected: String?
    }

    @Test func everyRefusalIsTheSameForValidateAndRedeem() async throws {
        try await RedemptionGateways.with { gateways in
            let admin = try await gateways.client()
            let key = try await RedemptionSupport.seedTenant(admin, slug: "agree")
            let app = try await gateways.client(apiKey: key)
            func create(_ id: String, _ extra: JSONObject) async throws {
                var params: JSONObject = [
                    "tenant": "agree", "campaignId": .string(id), "offerId": "code1", "kind": "custom",
                    "code": .string(id.uppercased() + "CODE"),
                ]
                for member in extra { params[member.key] = member.value }
                _ = try await admin.call(method: "campaigns.create", params: .object(params))
            }
            func redeem(_ code: String, _ customer: String) async throws {
                _ = try await app.call(
                    method: "codes.redeem", params: ["code": .string(code), "customerId": .string(customer)])
            }
            // "subscriber" holds an active subscription in the offer's group: not `new`.
            _ = try await app.call(
                method: "subscriptions.record",
                params: [
                    "customerId": "subscriber", "productId": "p1", "transactionId": "t1", "purchaseDate": Self.date(-3),
                    "expiresDate": Self.date(27),
                ])
            try await create("later", ["startsAt": Self.date(2)])
            try await create("past", ["startsAt": Self.date(-9), "expiresAt": Self.date(-2)])
            try await create("off", ["eligibility": ["new"]])
            _ = try await admin.call(method: "campaigns.deactivate", params: ["tenant": "agree", "campaignId": "off"])
            try await create("newonly", ["eligibility": ["new"], "totalLimit": 1])
            try await redeem("NEWONLYCODE", "u1")
            try await create("single", ["totalLimit": 1])
            try await redeem("SINGLECODE", "u1")
            try await create("twice", ["perCustomerLimit": 1])
            try await redeem("TWICECODE", "u1")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "agree", "campaignId": "once", "offerId": "code1", "kind": "oneTime",
                    "perCustomerLimit": 1,
                ])
            _ = try await admin.call(
                method: "campaigns.generateCodes", params: ["tenant": "agree", "campaignId": "once", "count": 2])
            let page = try await admin.call(
                method: "campaigns.codes", params: ["tenant": "agree", "campaignId": "once"])
            let codes = try #require(page["codes"]?.arrayValue?.compactMap { $0["code"]?.stringValue })
            try #require(codes.count == 2)
            try await redeem(codes[0], "u1")

            let probes = [
                Probe(name: "not started", customer: "subscriber", code: "LATERCODE", expected: "campaign_not_started"),
                Probe(name: "expired", customer: "subscriber", code: "PASTCODE", expected: "campaign_expired"),
                // Deactivated and the customer outside the eligibility: the campaign's state comes first.
                Probe(name: "deactivated", customer: "subscriber", code: "OFFCODE", expected: "campaign_deactivated"),
                // Outside the eligibility and the total reached: eligibility comes first.
                Probe(
                    name: "eligibility", customer: "subscriber", code: "NEWONLYCODE",
                    expected: "not_in_campaign_eligibility"),
                Probe(name: "total", customer: "u2", code: "SINGLECODE", expected: "code_exhausted"),
                Probe(name: "customer limit", customer: "u1", code: "TWICECODE", expected: "customer_limit_reached"),
                // The customer who used a one-time code asks again: the code is used (also their own limit).
                Probe(name: "one-time reused", customer: "u1", code: codes[0], expected: "code_exhausted"),
                Probe(name: "one-time used by another", customer: "u2", code: codes[0], expected: "code_exhausted"),
                Probe(name: "unknown", customer: "u1", code: "NOSUCHCODE", expected: "unknown_code"),
                Probe(name: "redeemable", customer: "u2", code: codes[1], expected: nil),
            ]
            for probe in probes {
                let validation = try await app.call(
                    method: "codes.validate",
                    params: ["code": .string(probe.code), "customerId": .string(probe.customer)])
                #expect(validation["valid"]?.boolValue == (probe.expected == nil), "\(probe.name)")
                #expect(validation["reason"]?.stringValue == probe.expected, "\(probe.name)")
                do {
                    try await redeem(probe.code, probe.customer)
                    #expect(probe.expected == nil, "\(probe.name): redeem succeeded, validate said \(validation)")
                } catch let error as RPCError {
                    let reasons =
                        [error.data?["reason"]?.stringValue]
                        + (error.data?["reasons"]?.arrayValue?.map(\.stringValue) ?? [])
                    #expect(
                        reasons.contains(probe.expected), "\(probe.name): redeem failed with \(error.code) \(reasons)")
                    if let code = validation["errorCode"]?.int64Value {
                        #expect(Int(code) == error.code, "\(probe.name)")
                    } else {
                        #expect(error.code == -32040, "\(probe.name)")
                    }
                }
            }
        }
    }
}
