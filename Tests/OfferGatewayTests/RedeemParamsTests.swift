import Foundation
import JSONRPC
import Testing

@testable import OfferGateway

/// `codes.redeem`'s params read straight off the object agree with `Decodable` wherever they read them, and leave
/// everything else (errors included) to it.
@Suite struct RedeemParamsTests {
    static func decoded(_ params: JSONValue) throws -> CodeService.RedeemRequest {
        try RPCRequest(method: "codes.redeem", params: params, id: .number(JSONNumber(1))).decodeParams(
            CodeService.RedeemRequest.self)
    }

    static func fields(_ r: CodeService.RedeemRequest) -> [String?] {
        [r.code, r.customerId, r.idempotencyKey, r.sign, r.appAccountToken, r.transactionId]
    }

    @Test func plainParamsAreReadAsDecodableReadsThem() throws {
        let plain: [JSONValue] = [
            ["code": "SPRING26", "customerId": "c1"],
            ["customerId": "c1", "code": " spr-ing 26", "idempotencyKey": "k1"],
            [
                "code": "X", "customerId": "c1", "sign": "jws",
                "appAccountToken": "e621e1f8-c36c-495a-93fc-0c247a3e6e5f",
                "transactionId": "2000000000000001",
            ],
            ["code": "X", "customerId": "c1", "tenant": "acme", "unread": 5],
            ["code": "", "customerId": "é€😀"],
        ]
        for params in plain {
            let fast = try #require(CodeService.RedeemRequest(plainParams: params), "\(params)")
            #expect(Self.fields(fast) == Self.fields(try Self.decoded(params)), "\(params)")
        }
    }

    @Test func anythingElseIsLeftToDecodable() {
        let other: [JSONValue?] = [
            nil, .null, ["X"], "X", [:], ["code": "X"], ["customerId": "c1"], ["code": 5, "customerId": "c1"],
            ["code": "X", "customerId": nil], ["code": "X", "customerId": "c1", "idempotencyKey": 7],
            ["code": "X", "customerId": "c1", "sign": true], ["code": "X", "customerId": "c1", "transactionId": 1],
            ["code": "X", "customerId": "c1", "appAccountToken": ["a"]],
        ]
        for params in other {
            #expect(CodeService.RedeemRequest(plainParams: params) == nil, "\(String(describing: params))")
        }
    }
}
