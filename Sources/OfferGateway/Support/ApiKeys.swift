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

    /// The lookup handle of a key that has the right shape, else nil.
    static func lookup(of key: String) -> String? {
        let parts = key.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "og", parts[1].utf8.count == 12, parts[2].utf8.count == 32 else {
            return nil
        }
        let allowed = Set(alphabet)
        guard parts[1].utf8.allSatisfy(allowed.contains), parts[2].utf8.allSatisfy(allowed.contains) else {
            return nil
        }
        return String(parts[1])
    }

    private static func randomString(count: Int) throws -> String {
        // 256 is a multiple of 32: taking the low five bits of each random byte is unbiased.
        let bytes = try SecureRandom.bytes(count: count)
        return String(decoding: bytes.map { alphabet[Int($0 & 31)] }, as: UTF8.self)
    }
}
