import Foundation
import OfferCrypto
import OfferStore

/// Tenant API keys: `og_<lookup>_<secret>`, where `lookup` (12 characters) finds the stored row and the whole key's
/// SHA-256 is compared in constant time. 32 secret characters from a 32-letter alphabet carry 160 random bits.
enum ApiKeys {
    static let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789".utf8)

    /// A fresh key and what to store of it. The key itself is shown once, to whoever created it.
    static func generate() throws -> (key: String, stored: StoredApiKey) {
        let lookup = try randomString(count: 12)
        let secret = try randomString(count: 32)
        let key = "og_\(lookup)_\(secret)"
        return (key, StoredApiKey(lookup: lookup, hash: SHA256.hash(key)))
    }

    /// The lookup handle of a key that has the right shape (`og_`, 12 then 32 characters of `alphabet` around a
    /// `_`), else nil. Checked over the key's bytes: it runs for every HTTP request's `Authorization` header.
    static func lookup(of key: String) -> String? {
        let utf8 = key.utf8
        guard utf8.count == 3 + 12 + 1 + 32, utf8.starts(with: "og_".utf8) else { return nil }
        let lookupStart = utf8.index(utf8.startIndex, offsetBy: 3)
        let lookupEnd = utf8.index(lookupStart, offsetBy: 12)
        guard utf8[lookupEnd] == UInt8(ascii: "_"),
            utf8[lookupStart..<lookupEnd].allSatisfy(isAlphabet),
            utf8[utf8.index(after: lookupEnd)...].allSatisfy(isAlphabet)
        else { return nil }
        return String(key[lookupStart..<lookupEnd])
    }

    /// Whether `byte` is a letter of `alphabet` (a-z without l and o, 2-9).
    private static func isAlphabet(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte != UInt8(ascii: "l") && byte != UInt8(ascii: "o")
        case UInt8(ascii: "2")...UInt8(ascii: "9"): true
        default: false
        }
    }

    private static func randomString(count: Int) throws -> String {
        // 256 is a multiple of 32: taking the low five bits of each random byte is unbiased.
        let bytes = try SecureRandom.bytes(count: count)
        return String(decoding: bytes.map { alphabet[Int($0 & 31)] }, as: UTF8.self)
    }
}
