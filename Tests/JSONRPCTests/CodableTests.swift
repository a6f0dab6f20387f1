import Foundation
import Testing

@testable import JSONRPC

struct Offer: Codable, Equatable {
    var id: String
    var price: String
    var quantity: Int
    var tags: [String]?
}

struct OffersParams: Codable, Equatable {
    var customerId: String
    var at: Date?
    var offers: [Offer]
}

@Suite struct CodableTests {
    let decoder = JSONValueDecoder()

    func decodeParams(_ text: String) throws -> OffersParams {
        try decoder.decode(OffersParams.self, from: try JSONParsing.parse(text))
    }

    @Test func decodesAndIgnoresUnknownKeys() throws {
        let params = try decodeParams(
            """
            {"customerId":"c1","extra":{"x":1},"at":"2026-11-30T12:00:00Z",
             "offers":[{"id":"o1","price":"19.99","quantity":2,"unknown":true}]}
            """)
        #expect(params.customerId == "c1")
        #expect(params.at == Date(timeIntervalSince1970: 1_796_040_000))
        #expect(params.offers == [Offer(id: "o1", price: "19.99", quantity: 2, tags: nil)])
    }

    static let errorCases: [(String, String, String)] = [
        ("{\"offers\":[]}", "customerId", "missing_param"),
        ("{\"customerId\":5,\"offers\":[]}", "customerId", "wrong_type"),
        ("{\"customerId\":null,\"offers\":[]}", "customerId", "null_value"),
        (
            "{\"customerId\":\"c\",\"offers\":[{\"id\":\"a\",\"price\":\"1\",\"quantity\":1},"
                + "{\"id\":\"b\",\"price\":\"1\",\"quantity\":1},{\"id\":\"c\",\"quantity\":1}]}",
            "offers[2].price", "missing_param"
        ),
        (
            "{\"customerId\":\"c\",\"offers\":[{\"id\":\"a\",\"price\":\"1\",\"quantity\":1.5}]}",
            "offers[0].quantity", "invalid_value"
        ),
        (
            "{\"customerId\":\"c\",\"offers\":[{\"id\":\"a\",\"price\":\"1\",\"quantity\":\"1\"}]}",
            "offers[0].quantity", "wrong_type"
        ),
        ("{\"customerId\":\"c\",\"at\":\"2026-13-01T00:00:00Z\",\"offers\":[]}", "at", "invalid_value"),
        ("{\"customerId\":\"c\",\"offers\":{}}", "offers", "wrong_type"),
        ("[1]", "", "wrong_type"),
    ]

    @Test(arguments: errorCases)
    func decodingErrorsCarryPathAndKind(text: String, path: String, kind: String) throws {
        do {
            _ = try decodeParams(text)
            Issue.record("decoding succeeded unexpectedly")
        } catch let error as DecodingError {
            #expect(error.pathDescription == path)
            #expect(error.kindDescription == kind)
            let rpc = RPCError.invalidParams(error)
            #expect(rpc.code == -32602)
            #expect(rpc.data?["param"] == .string(path.isEmpty ? "params" : "params." + path))
            #expect(rpc.reason == kind)
            #expect(rpc.retryable == false)
        }
    }

    @Test func requestDecodeParamsMapsToInvalidParams() {
        let request = RPCRequest(method: "m", params: ["offers": []], id: .int(1))
        do {
            _ = try request.decodeParams(OffersParams.self)
            Issue.record("expected an error")
        } catch {
            #expect(error.code == -32602)
            #expect(error.data?["param"] == "params.customerId")
        }
    }

    static let dates: [(String, Double?)] = [
        ("2026-11-30T12:00:00Z", 1_796_040_000),
        ("2026-11-30T12:00:00.5Z", 1_796_040_000.5),
        ("2026-11-30T12:00:00.123456789Z", 1_796_040_000.123456789),
        ("2026-11-30T14:30:00+02:30", 1_796_040_000),
        ("2026-11-30T07:00:00-05:00", 1_796_040_000),
        ("2026-11-30t12:00:00z", 1_796_040_000),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59Z", -1),
        ("2024-02-29T00:00:00Z", 1_709_164_800),
        ("2023-02-29T00:00:00Z", nil),
        ("2026-11-30T12:00:00", nil),
        ("2026-11-30 12:00:00Z", nil),
        ("2026-11-30T24:00:00Z", nil),
        ("2026-11-30T12:00:60Z", nil),
        ("2026-11-30T12:00:00.Z", nil),
        ("2026-11-30T12:00:00+0200", nil),
        ("2026-11-30", nil),
    ]

    @Test(arguments: dates)
    func rfc3339Parsing(text: String, expected: Double?) {
        let parsed = RFC3339.parse(text)?.timeIntervalSince1970
        if let expected {
            #expect(parsed != nil)
            #expect(abs((parsed ?? .nan) - expected) < 1e-6)
        } else {
            #expect(parsed == nil)
        }
    }

    @Test func rfc3339Formatting() {
        #expect(RFC3339.format(Date(timeIntervalSince1970: 1_796_040_000)) == "2026-11-30T12:00:00Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 1_796_040_000.25)) == "2026-11-30T12:00:00.250Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 0.9996)) == "1970-01-01T00:00:01Z")
        #expect(RFC3339.format(Date(timeIntervalSince1970: 1_709_164_800)) == "2024-02-29T00:00:00Z")
    }

    @Test func encoderProducesOrderedValuesAndRoundTrips() throws {
        let params = OffersParams(
            customerId: "c", at: Date(timeIntervalSince1970: 1_796_040_000.5),
            offers: [Offer(id: "o", price: "1.00", quantity: 3, tags: ["x"])])
        let value = try JSONValueEncoder().encode(params)
        #expect(value.objectValue?.keys == ["customerId", "at", "offers"])
        #expect(value["at"] == "2026-11-30T12:00:00.500Z")
        #expect(value["offers"]?[0]?["quantity"] == .int(3))
        #expect(try decoder.decode(OffersParams.self, from: value) == params)
        #expect(throws: EncodingError.self) { try JSONValueEncoder().encode([Double.nan]) }
        #expect(try JSONValueEncoder().encode(UInt64.max) == .number(JSONNumber(lexeme: "18446744073709551615")!))
        #expect(
            try decoder.decode(UInt64.self, from: .number(JSONNumber(lexeme: "18446744073709551615")!))
                == UInt64.max)
        #expect(try decoder.decode(Decimal.self, from: try JSONParsing.parse("19.99")) == Decimal(string: "19.99"))
    }

    @Test func jsonValueDecodesThroughFoundationToo() throws {
        let text = "{\"a\":[1,\"x\",null,true,{\"b\":2.5}]}"
        let viaFoundation = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(viaFoundation == (try JSONParsing.parse(text)))
        #expect(try decoder.decode(JSONValue.self, from: viaFoundation) == viaFoundation)
    }
}
