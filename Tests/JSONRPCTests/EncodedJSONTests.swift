import Foundation
import Testing

@testable import JSONRPC

@Suite("Encoded JSON values")
struct EncodedJSONTests {
    static let value: JSONValue = [
        "offer": ["offerId": "promo.half", "price": "2.49", "rank": 1, "note": "quote \" and \\ and \u{2063}"],
        "considered": [["eligible": true, "reasons": []], ["eligible": false, "reasons": ["not_lapsed"]]],
        "none": nil,
    ]

    @Test func serializesToTheSameBytesAsTheValue() {
        let encoded = JSONValue.encoded(EncodedJSON(Self.value))
        #expect(JSONSerializer.serialize(encoded) == JSONSerializer.serialize(Self.value))
        // Inside other values too (a response wraps the result).
        let wrapped: JSONValue = ["result": encoded, "id": 7]
        #expect(JSONSerializer.serialize(wrapped) == JSONSerializer.serialize(["result": Self.value, "id": 7]))
        #expect(encoded.description == Self.value.description)
    }

    @Test func sortedKeysStillSorts() {
        let options = JSONSerializer.Options(sortedKeys: true)
        #expect(
            JSONSerializer.serialize(.encoded(EncodedJSON(Self.value)), options: options)
                == JSONSerializer.serialize(Self.value, options: options))
    }

    @Test func readsBackAsTheValue() throws {
        let encoded = JSONValue.encoded(EncodedJSON(Self.value))
        #expect(encoded.expanded == Self.value)
        #expect(encoded != Self.value)  // equality is by representation; compare `expanded`
        #expect(encoded["offer"]?["offerId"] == "promo.half")
        #expect(encoded["considered"]?[1]?["reasons"]?[0] == "not_lapsed")
        #expect(encoded.objectValue?.count == 3)
        #expect(JSONValue.encoded(EncodedJSON([1, 2, 3])).arrayValue?.count == 3)
        struct Offer: Decodable, Equatable {
            let offerId: String
            let rank: Int
        }
        struct Answer: Decodable { let offer: Offer }
        let decoded = try JSONValueDecoder().decode(Answer.self, from: encoded)
        #expect(decoded.offer == Offer(offerId: "promo.half", rank: 1))
        // An encoded value of an encoded value is the same bytes.
        #expect(EncodedJSON(encoded) == EncodedJSON(Self.value))
    }

    @Test func responsesCarryTheBytes() {
        let response = RPCResponse(id: .number(JSONNumber(3)), result: .success(.encoded(EncodedJSON(Self.value))))
        var out: [UInt8] = []
        response.append(to: &out)
        let plain = RPCResponse(id: .number(JSONNumber(3)), result: .success(Self.value))
        var expected: [UInt8] = []
        plain.append(to: &expected)
        #expect(out == expected)
    }
}
