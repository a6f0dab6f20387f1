import Foundation
import Testing

@testable import OfferCrypto

/// The input layer: strict standard base64 for x5c, and the header's members by type.
@Suite("Apple signed data: input parsing")
struct AppleSignedDataInputTests {
    @Test(
        "Standard base64 as x5c uses it: padded, canonical groups, nothing else",
        arguments: [
            ("QQ==", [0x41]), ("QUI=", [0x41, 0x42]), ("QUJD", [0x41, 0x42, 0x43]), ("+/+/", [0xFB, 0xFF, 0xBF]),
            ("Q===", nil), ("QQ=A", nil), ("QQ", nil), ("", nil), ("QU I=", nil), ("QUI=\n", nil), ("QQ==QUJD", nil),
            ("-_-_", nil), ("QUJD====", nil),
        ] as [(String, [UInt8]?)])
    func standardBase64(text: String, bytes: [UInt8]?) {
        #expect(StandardBase64.decode(text, maximumLength: 64) == bytes)
    }

    @Test("Standard base64 round-trips every length against Foundation; the length bound holds")
    func standardBase64RoundTrip() {
        var rng = SeededGenerator(seed: 7)
        for length in 1..<300 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let text = Data(bytes).base64EncodedString()
            #expect(StandardBase64.decode(text, maximumLength: 400) == bytes, "length \(length)")
        }
        #expect(StandardBase64.decode("QUJD", maximumLength: 3) == nil)
    }

    @Test("Header members of the wrong JSON type read as present-but-other, never as a parse failure")
    func headerMembers() throws {
        func header(_ json: String) throws -> AppleJWSInput.Header {
            let jws = Base64URL.encode(Array(json.utf8)) + "." + Base64URL.encode(Array("{}".utf8)) + "."
            guard case .decoded(let header) = try AppleJWSInput(jws, limits: AppleSignedDataLimits()).header else {
                throw NotDecoded()
            }
            return header
        }
        struct NotDecoded: Error {}
        let good = try header(#"{"alg":"ES256","x5c":["a","b"],"kid":7}"#)
        #expect(good.alg?.value == "ES256")
        #expect(good.x5c?.value?.map(\.value) == ["a", "b"])
        let odd = try header(#"{"alg":256,"x5c":["a",1,null]}"#)
        #expect(odd.alg != nil && odd.alg?.value == nil)
        #expect(odd.x5c?.value?.map(\.value) == ["a", nil, nil])
        let missing = try header(#"{"alg":null}"#)
        #expect(missing.alg == nil && missing.x5c == nil)
        for bad in ["[]", "null", "\"ES256\"", "{", ""] {
            #expect(throws: AppleSignedDataError.self) { try header(bad) }
        }
    }
}
