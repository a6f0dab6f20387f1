import Testing

@testable import OfferGateway

/// What a presented key is read as before any lookup: the `Authorization` header of `POST /v1/rpc` and the shape of
/// a tenant key (both run on every HTTP request, over bytes).
struct ApiKeyParsingTests {
    static let key = "og_abcdefghijkm_npqrstuvwxyz23456789abcdefghijkm"

    @Test(
        "Bearer header: scheme in any case, spaces and tabs around; other schemes and no key cannot match",
        arguments: [
            ("Bearer \(key)", key), ("bearer \(key)", key), ("BEARER   \(key)  ", key), ("  Bearer\t\(key)\t", key),
            ("Bearer x y", "x y"), ("Bearer", ""), ("Bearer   ", ""), ("Basic \(key)", ""), ("Bearerx \(key)", ""),
            ("", ""), ("   ", ""), ("Béarer \(key)", ""), ("Bearer ключ", "ключ"),
        ])
    func bearerKey(header: String, expected: String) {
        #expect(RPCRoute.bearerKey(header) == expected)
    }

    @Test("no Authorization header: no key")
    func noHeader() {
        #expect(RPCRoute.bearerKey(nil) == nil)
    }

    @Test(
        "a key's lookup: og_, 12 and 32 characters of the alphabet; anything else has none",
        arguments: [
            (key, "abcdefghijkm"),
            ("og_abcdefghijkm_npqrstuvwxyz23456789abcdefghijk", nil),  // one short
            ("og_abcdefghijkm_npqrstuvwxyz23456789abcdefghijkmn", nil),  // one long
            ("og_abcdefghijkl_npqrstuvwxyz23456789abcdefghijkm", nil),  // l is not in the alphabet
            ("og_abcdefghijkm_npqrstuvwxyz23456789abcdefghijk0", nil),  // nor is 0
            ("og_abcdefghijkmXnpqrstuvwxyz23456789abcdefghijkm", nil),  // no second _
            ("xg_abcdefghijkm_npqrstuvwxyz23456789abcdefghijkm", nil),  // not og_
            ("og_abcdefghijk__npqrstuvwxyz23456789abcdefghijkm", nil),  // _ inside the lookup
            ("og_ABCDEFGHIJKM_npqrstuvwxyz23456789abcdefghijkm", nil),  // capitals
            ("og_abcdefghijké_npqrstuvwxyz23456789abcdefghijk", nil),  // 48 bytes, not ASCII
            ("", nil),
        ] as [(String, String?)])
    func lookup(key: String, expected: String?) {
        #expect(ApiKeys.lookup(of: key) == expected)
    }

    @Test("every generated key has the lookup it was stored under")
    func generatedKeys() throws {
        for _ in 0..<200 {
            let (key, stored) = try ApiKeys.generate()
            #expect(ApiKeys.lookup(of: key) == stored.lookup)
        }
    }
}
