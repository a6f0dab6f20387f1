import Foundation
import JSONRPC
import Testing

@testable import OfferGateway

/// `offers.best`'s params read straight off the object agree with `Decodable` wherever they read them, and leave
/// everything else (errors included) to it.
@Suite struct BestParamsTests {
    static func decoded(_ params: JSONValue) throws -> OfferService.BestRequest {
        try RPCRequest(method: "offers.best", params: params, id: .number(JSONNumber(1))).decodeParams(
            OfferService.BestRequest.self)
    }

    static func fields(_ r: OfferService.BestRequest) -> [String?] {
        [r.customerId, r.productId, r.groupId, r.locale, r.billingPlan, r.at?.description]
    }

    @Test func plainParamsAreReadAsDecodableReadsThem() throws {
        let plain: [JSONValue] = [
            ["customerId": "c1"],
            ["customerId": "c1", "productId": "p0"],
            ["productId": "p0", "customerId": "c1", "locale": "de-DE", "billingPlan": "monthly"],
            ["customerId": "c1", "groupId": "g", "tenant": "acme", "unread": 5],
            ["customerId": "", "productId": "é€😀"],
        ]
        for params in plain {
            let fast = try #require(OfferService.BestRequest(plainParams: params), "\(params)")
            #expect(Self.fields(fast) == Self.fields(try Self.decoded(params)), "\(params)")
        }
    }

    @Test func anythingElseIsLeftToDecodable() {
        let other: [JSONValue?] = [
            nil, .null, ["c1"], "c1", [:], ["productId": "p0"], ["customerId": 5], ["customerId": nil],
            ["customerId": "c1", "productId": nil], ["customerId": "c1", "at": "2026-12-01T00:00:00Z"],
            ["customerId": "c1", "locale": ["de"]], ["customerId": "c1", "billingPlan": true],
        ]
        for params in other {
            #expect(OfferService.BestRequest(plainParams: params) == nil, "\(String(describing: params))")
        }
    }
}
