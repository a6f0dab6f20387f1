import Foundation
import JSONRPC

/// The params of every non-campaign method of API.md, with their JSON types and a valid value each (for a tenant
/// `fuzz-a` holding the standard catalog and a signing key). Used to generate hostile requests.
enum MethodTable {
    enum Kind: Sendable { case string, integer, bool, date, object, array }

    struct Param: Sendable {
        let name: String
        let kind: Kind
        let valid: JSONValue
    }

    static func methods(tenant: String, pem: String) -> [(method: String, params: [Param])] {
        let t = Param(name: "tenant", kind: .string, valid: .string(tenant))
        let customer = Param(name: "customerId", kind: .string, valid: "fuzz-customer")
        let product = Param(name: "productId", kind: .string, valid: "monthly")
        let at = Param(name: "at", kind: .date, valid: "2026-11-18T12:00:00Z")
        return [
            ("system.ping", []), ("system.health", []), ("system.stats", []),
            (
                "session.authenticate",
                [Param(name: "apiKey", kind: .string, valid: "og_aaaaaaaaaaaa_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")]
            ),
            (
                "tenants.create",
                [
                    Param(name: "slug", kind: .string, valid: "fuzz-new"),
                    Param(name: "bundleId", kind: .string, valid: "com.x"),
                    Param(name: "name", kind: .string, valid: "X"),
                ]
            ),
            ("tenants.list", []),
            ("tenants.rotateApiKey", [t]),
            (
                "keys.import",
                [
                    t, Param(name: "keyId", kind: .string, valid: "FUZZKEY"),
                    Param(name: "issuerId", kind: .string, valid: "issuer"),
                    Param(name: "privateKeyPem", kind: .string, valid: .string(pem)),
                ]
            ),
            ("keys.list", [t]),
            ("keys.retire", [t, Param(name: "keyId", kind: .string, valid: "NO-SUCH-KEY")]),
            ("catalog.get", [t]),
            (
                "catalog.import",
                [
                    t, Param(name: "storekit", kind: .object, valid: ["subscriptionGroups": []]),
                    Param(name: "currency", kind: .string, valid: "USD"),
                ]
            ),
            (
                "catalog.upsert",
                [
                    t, Param(name: "groups", kind: .array, valid: []), Param(name: "products", kind: .array, valid: []),
                    Param(name: "offers", kind: .array, valid: []),
                ]
            ),
            (
                "subscriptions.record",
                [
                    t, customer, product, Param(name: "transactionId", kind: .string, valid: "fuzz-tx"),
                    Param(name: "originalTransactionId", kind: .string, valid: "fuzz-tx"),
                    Param(name: "purchaseDate", kind: .date, valid: "2026-11-01T00:00:00Z"),
                    Param(name: "expiresDate", kind: .date, valid: "2026-12-01T00:00:00Z"),
                    Param(name: "offerType", kind: .integer, valid: 2),
                    Param(name: "offerId", kind: .string, valid: "promo.half"),
                    Param(name: "autoRenew", kind: .bool, valid: false),
                    Param(name: "inBillingRetry", kind: .bool, valid: false),
                    Param(name: "gracePeriodExpiresDate", kind: .date, valid: "2026-12-02T00:00:00Z"),
                    Param(name: "revocationDate", kind: .date, valid: "2026-12-01T00:00:00Z"),
                ]
            ),
            ("customers.get", [t, customer, at]),
            ("offers.eligibility", [t, customer, product, at]),
            (
                "offers.best",
                [
                    t, customer, product, at, Param(name: "locale", kind: .string, valid: "de_DE"),
                ]
            ),
            ("offers.best", [t, customer, Param(name: "groupId", kind: .string, valid: "premium")]),
            (
                "offers.sign",
                [
                    t, customer, product, Param(name: "offerId", kind: .string, valid: "promo.half"),
                    Param(name: "format", kind: .string, valid: "v1"),
                    Param(name: "appAccountToken", kind: .string, valid: "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"),
                    Param(name: "transactionId", kind: .string, valid: "fuzz-tx"),
                ]
            ),
            (
                "offers.introEligibility",
                [t, customer, product, Param(name: "transactionId", kind: .string, valid: "fuzz-tx")]
            ),
            (
                "events.record",
                [
                    t,
                    Param(
                        name: "events", kind: .array,
                        valid: [
                            [
                                "customerId": "fuzz-customer", "offerId": "promo.half", "event": "impression",
                                "eventId": "fuzz-event", "at": "2026-11-18T12:00:00Z",
                            ]
                        ]),
                ]
            ),
            (
                "analytics.funnel",
                [
                    t, Param(name: "offerId", kind: .string, valid: "promo.half"),
                    Param(name: "from", kind: .date, valid: "2026-11-18T00:00:00Z"),
                    Param(name: "to", kind: .date, valid: "2026-11-19T00:00:00Z"),
                    Param(name: "bucket", kind: .string, valid: "hour"),
                ]
            ),
        ]
    }

    /// Values of every JSON type, huge and odd ones included.
    static let wrongValues: [(Kind?, JSONValue)] = [
        (.integer, 0), (.integer, -1), (nil, .number(JSONNumber(lexeme: "1.5")!)),
        (nil, .number(JSONNumber(lexeme: "1e400")!)),
        (nil, .number(JSONNumber(lexeme: "-123456789012345678901234567890")!)),
        (.bool, true), (.bool, false), (nil, .null), (.string, ""), (.string, "not-a-date"),
        (.array, []), (.array, [1, "a", nil]), (.object, [:]), (.object, ["nested": ["deeper": [1]]]),
        (.string, .string(String(repeating: "A", count: 70_000))),
    ]

    /// SQL and shell metacharacters, control characters and odd Unicode.
    static let hostileStrings: [String] = [
        "'; DROP TABLE tenants; --", "\" OR 1=1 --", "1'); DELETE FROM products; --", "$(rm -rf /)", "`id`",
        "; cat /etc/passwd", "| nc -l 4444", "%s%s%s%n", "../../../../etc/passwd", "\\x00\\'",
        "\u{0}null-byte", "line\nbreak", "ünïcödé-🎉", "\u{202E}rtl", "e621e1f8-c36c-495a-93fc-0c247a3e6e5f'",
        "{\"json\":true}", "<script>alert(1)</script>", "${jndi:ldap://x}", "SELECT pg_sleep(10)",
        "🎉" + String(repeating: "x", count: 300),
    ]
}

/// A deterministic pseudo-random generator (SplitMix64), so failures reproduce.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
