import Foundation
import JSONRPC

/// What the OpenRPC document says about each method: params (with a valid example each), result schema, and the
/// errors beyond those of its access. Keyed by method name; `HTTPTests` fails when a method of the dispatcher's
/// table has no entry here or an entry names no method, and when a documented required param is not the one the
/// method reports missing, so the two cannot drift.
struct MethodDoc: Sendable {
    struct Param: Sendable {
        let name: String
        let schema: JSONValue
        let required: Bool
        let description: String?
        /// A well-formed value (for tests that leave one param out at a time, and for readers).
        let example: JSONValue

        var json: JSONValue {
            var object: JSONObject = ["name": .string(name), "schema": schema, "required": .bool(required)]
            if let description { object["description"] = .string(description) }
            return .object(object)
        }
    }

    let summary: String
    let params: [Param]
    let result: JSONValue
    let errors: [Int]
}

enum MethodDocs {
    static func doc(for method: String) -> MethodDoc? { all[method] }

    // MARK: Schema shorthands (JSON Schema draft 7)

    private static let string: JSONValue = ["type": "string"]
    private static let integer: JSONValue = ["type": "integer"]
    private static let boolean: JSONValue = ["type": "boolean"]
    private static let dateTime: JSONValue = ["type": "string", "format": "date-time"]
    private static let nullableString: JSONValue = ["type": ["string", "null"]]
    private static let anyObject: JSONValue = ["type": "object"]
    private static let strings: JSONValue = ["type": "array", "items": ["type": "string"]]

    private static func array(_ items: JSONValue) -> JSONValue { ["type": "array", "items": items] }

    private static func object(_ properties: [String: JSONValue], required: [String] = []) -> JSONValue {
        var fields = JSONObject()
        for (name, value) in properties.sorted(by: { $0.key < $1.key }) { fields[name] = value }
        var schema: JSONObject = ["type": "object", "properties": .object(fields)]
        if !required.isEmpty { schema["required"] = .array(required.sorted().map { .string($0) }) }
        return .object(schema)
    }

    private static func param(
        _ name: String, _ schema: JSONValue, required: Bool = false, example: JSONValue, _ description: String? = nil
    ) -> MethodDoc.Param {
        MethodDoc.Param(name: name, schema: schema, required: required, description: description, example: example)
    }

    private static func doc(
        _ summary: String, _ params: [MethodDoc.Param] = [], result: JSONValue, errors: [Int] = []
    ) -> MethodDoc {
        MethodDoc(summary: summary, params: params, result: result, errors: errors)
    }

    // MARK: Common params

    /// Tenant methods: a tenant key acts on its own tenant; the admin key names one.
    private static let tenantOptional = param(
        "tenant", string, example: "acme", "the tenant's slug: required with the admin key, else the key's own tenant")
    /// Admin methods acting on one tenant.
    private static let tenantRequired = param("tenant", string, required: true, example: "acme", "the tenant's slug")
    private static let customerId = param(
        "customerId", string, required: true, example: "e621e1f8-c36c-495a-93fc-0c247a3e6e5f",
        "the app's customer id (its appAccountToken recommended)")
    private static let productId = param("productId", string, required: true, example: "monthly")
    private static let at = param("at", dateTime, example: "2026-11-30T12:00:00Z", "decision time (default now)")
    private static let billingPlan = param(
        "billingPlan", ["type": "string", "enum": ["upFront", "monthly"]], example: "upFront",
        "consider only the offers of this billing plan")
    private static let campaignId = param("campaignId", string, required: true, example: "spring")

    private static let offerSummary = object([
        "offerId": string, "type": string, "productId": string, "paymentMode": string, "period": string,
        "periodCount": integer, "price": string, "displayText": string,
    ])
    private static let campaign = object(
        [
            "campaignId": string, "offerId": string, "kind": string, "code": nullableString,
            "totalLimit": ["type": ["integer", "null"]], "perCustomerLimit": integer, "startsAt": dateTime,
            "expiresAt": dateTime, "eligibility": strings, "state": string, "redeemed": integer, "rolledBack": integer,
            "codesGenerated": integer,
        ], required: ["campaignId", "offerId", "kind"])
    private static let tenantRecord = object(
        ["slug": string, "bundleId": string, "name": nullableString, "appAppleId": ["type": ["integer", "null"]]],
        required: ["slug", "bundleId"])

    // MARK: Every method

    static let all: [String: MethodDoc] = [
        "rpc.discover": doc(
            "This OpenRPC document (also GET /v1/openrpc.json).", result: anyObject),
        "system.ping": doc("Touches nothing: the transport's own cost.", result: object([:])),
        "system.health": doc(
            "Whether the database answers.",
            result: object(["status": string, "database": string, "version": string], required: ["status"])),
        "system.stats": doc(
            "Request counts, latencies, pool state.",
            result: object(["uptimeSeconds": integer, "requests": integer, "methods": anyObject, "pool": anyObject])),
        "session.authenticate": doc(
            "Binds the connection to a tenant or to the admin role.",
            [param("apiKey", string, required: true, example: "og_example_key")],
            result: object(["tenant": nullableString, "role": string], required: ["role"])),
        "tenants.create": doc(
            "Creates a tenant (an app); its API key is shown once.",
            [
                param("slug", ["type": "string", "pattern": "^[a-z0-9-]{2,40}$"], required: true, example: "new-app"),
                param("bundleId", string, required: true, example: "com.example.app"),
                param("name", string, example: "Example"),
            ],
            result: object(["slug": string, "apiKey": string, "bundleId": string], required: ["slug", "apiKey"]),
            errors: [-32009]),
        "tenants.list": doc("Every tenant.", result: object(["tenants": array(tenantRecord)])),
        "tenants.update": doc(
            "Changes a tenant's settings.",
            [
                tenantRequired, param("name", string, example: "Example"),
                param("appAppleId", integer, example: 1_234_567_890),
                param("allowSandbox", boolean, example: false), param("allowXcode", boolean, example: false),
            ],
            result: tenantRecord, errors: [-32004]),
        "tenants.rotateApiKey": doc(
            "Replaces a tenant's API key (the old one stops working).", [tenantRequired],
            result: object(["tenant": string, "apiKey": string], required: ["apiKey"]), errors: [-32004]),
        "keys.import": doc(
            "Imports an In-App Purchase key (.p8, PKCS#8 PEM, P-256); stored sealed, never returned.",
            [
                tenantRequired, param("keyId", string, required: true, example: "KEY1ABCDEF"),
                param("issuerId", string, example: "57246542-96fe-1a63-e053-0824d011072a"),
                param("privateKeyPem", string, required: true, example: "-----BEGIN PRIVATE KEY-----"),
            ],
            result: object(["keyId": string, "publicKeyPem": string]), errors: [-32004, -32009]),
        "keys.list": doc(
            "A tenant's keys (never the private half).", [tenantRequired],
            result: object(["keys": array(anyObject)]), errors: [-32004]),
        "keys.retire": doc(
            "Retires a key.", [tenantRequired, param("keyId", string, required: true, example: "KEY1ABCDEF")],
            result: anyObject, errors: [-32004]),
        "catalog.get": doc(
            "The tenant's groups, products and offers.", [tenantOptional],
            result: object(["groups": array(anyObject), "products": array(anyObject), "offers": array(anyObject)])),
        "catalog.upsert": doc(
            "Creates or replaces groups, products and offers (OfferGate's own format).",
            [
                tenantRequired, param("groups", array(anyObject), example: []),
                param("products", array(anyObject), example: []), param("offers", array(anyObject), example: []),
            ],
            result: anyObject, errors: [-32004]),
        "catalog.import": doc(
            "Imports an Xcode .storekit file.",
            [
                tenantRequired, param("storekit", anyObject, required: true, example: ["subscriptionGroups": []]),
                param("currency", string, example: "USD"),
            ],
            result: anyObject, errors: [-32004]),
        "subscriptions.record": doc(
            "Records a subscription transaction reported by the app (idempotent per transactionId).",
            [
                tenantOptional, customerId, productId,
                param("transactionId", string, required: true, example: "2000000000000001"),
                param("originalTransactionId", string, example: "2000000000000001"),
                param("purchaseDate", dateTime, required: true, example: "2026-11-01T00:00:00Z"),
                param("expiresDate", dateTime, required: true, example: "2026-12-01T00:00:00Z"),
                param("offerType", integer, example: 2, "Apple's offerType (1-4)"),
                param("offerId", string, example: "promo.half"), param("autoRenew", boolean, example: true),
                param("inBillingRetry", boolean, example: false),
                param("gracePeriodExpiresDate", dateTime, example: "2026-12-02T00:00:00Z"),
                param("revocationDate", dateTime, example: "2026-12-01T00:00:00Z"),
            ],
            result: object(["recorded": boolean], required: ["recorded"]), errors: [-32004]),
        "customers.get": doc(
            "A customer's state per subscription group.", [tenantOptional, customerId, at],
            result: object(["customerId": string, "groups": array(anyObject)])),
        "customers.link": doc(
            "Links Apple data of an originalTransactionId to a customer.",
            [
                tenantOptional, customerId,
                param("originalTransactionId", string, required: true, example: "2000000001"),
            ],
            result: object(["linked": boolean, "applied": integer], required: ["linked"])),
        "appstore.notification": doc(
            "An App Store Server Notification V2, verified and applied (idempotent per notificationUUID).",
            [tenantOptional, param("signedPayload", string, required: true, example: "eyJhbGciOiJFUzI1NiJ9.e30.AA")],
            result: object(
                [
                    "notificationUUID": string, "notificationType": string, "subtype": nullableString,
                    "environment": string, "customerId": nullableString, "applied": boolean, "duplicate": boolean,
                ], required: ["notificationUUID", "applied", "duplicate"]),
            errors: [-32060]),
        "appstore.transactions": doc(
            "Apple-signed transactions and renewal infos, all verified or none applied.",
            [
                tenantOptional,
                param("signedTransactions", strings, required: true, example: ["eyJhbGciOiJFUzI1NiJ9.e30.AA"]),
                param("signedRenewalInfo", strings, example: []), param("customerId", string, example: "c1"),
            ],
            result: object(["applied": integer, "duplicates": integer, "customers": strings]), errors: [-32060]),
        "offers.eligibility": doc(
            "Every non-code offer of a product, eligible or not, with reasons.",
            [tenantOptional, customerId, productId, at, billingPlan],
            result: object(["productId": string, "offers": array(anyObject)]), errors: [-32004]),
        "offers.best": doc(
            "The best offer for a customer now, with its display text (productId or groupId).",
            [
                tenantOptional, customerId, param("productId", string, example: "monthly"),
                param("groupId", string, example: "premium"), at, param("locale", string, example: "en_US"),
                billingPlan,
            ],
            result: object(["offer": ["oneOf": [offerSummary, ["type": "null"]]], "considered": array(anyObject)]),
            errors: [-32004]),
        "offers.sign": doc(
            "Signs a promotional offer the customer is eligible for (Apple's V1 signature or the V2 JWS).",
            [
                tenantOptional, customerId, productId,
                param("offerId", string, required: true, example: "promo.half"),
                param("format", ["type": "string", "enum": ["v1", "jws"]], required: true, example: "v1"),
                param("appAccountToken", string, example: "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"),
                param("transactionId", string, example: "2000000000000001"), billingPlan,
                param(
                    "redemptionId", string, example: "6f1c8a52-3f0e-4c6e-9d2a-0d8e2b1c7a10",
                    "a live redemption of a campaign granting the offer: eligible whatever the offer's audience"),
            ],
            result: signature,
            errors: [-32004, -32020, -32030]),
        "offers.introEligibility": doc(
            "The gateway's introductory-offer verdict, signed for StoreKit.",
            [
                tenantOptional, customerId, productId,
                param("transactionId", string, required: true, example: "2000000000000001"),
            ],
            result: object(["allowIntroductoryOffer": boolean, "compactJWS": string, "productId": string]),
            errors: [-32004, -32030]),
        "codes.validate": doc(
            "Whether a code could be redeemed by a customer (no side effects).",
            [tenantOptional, param("code", string, required: true, example: "SPRING-2026"), customerId, at],
            result: object(
                ["valid": boolean, "campaignId": string, "offerId": string, "productId": string, "reason": string],
                required: ["valid"])),
        "codes.redeem": doc(
            "Redeems a code exactly once, within its limits.",
            [
                tenantOptional, param("code", string, required: true, example: "SPRING-2026"), customerId,
                param("idempotencyKey", string, example: "order-42"),
                param(
                    "sign", ["type": "string", "enum": ["v1", "jws"]], example: "jws",
                    "also sign the granted promotional offer, bound to the redemption"),
                param("appAccountToken", string, example: "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"),
                param("transactionId", string, example: "2000000000000001"),
            ],
            result: object(
                [
                    "redemptionId": string, "campaignId": string, "offerId": string, "productId": string,
                    "replayed": boolean, "signature": signature,
                ], required: ["redemptionId", "replayed"]),
            errors: [-32009, -32020, -32030, -32040, -32041, -32042, -32043]),
        "codes.claim": doc(
            "Hands the customer one of an appleOneTime campaign's codes (the same one if asked again).",
            [
                tenantOptional, campaignId, customerId, param("idempotencyKey", string, example: "claim-42"),
            ],
            result: object(
                [
                    "claimId": string, "code": string, "campaignId": string, "offerId": string, "productId": string,
                    "replayed": boolean,
                ], required: ["claimId", "code", "replayed"]),
            errors: [-32004, -32009, -32020, -32041, -32042, -32043]),
        "codes.rollback": doc(
            "Gives a redemption's capacity back (idempotent).",
            [
                tenantOptional,
                param("redemptionId", string, required: true, example: "6f1c8a52-3f0e-4c6e-9d2a-0d8e2b1c7a10"),
                param("reason", string, example: "purchase_failed"),
            ],
            result: object(["redemptionId": string, "rolledBack": boolean], required: ["redemptionId"]),
            errors: [-32004]),
        "campaigns.create": doc(
            "Creates an offer-code campaign.",
            [
                tenantRequired, campaignId, param("offerId", string, required: true, example: "code.spring"),
                param(
                    "kind", ["type": "string", "enum": ["oneTime", "custom", "appleOneTime"]], required: true,
                    example: "custom"),
                param("productId", string, example: "monthly", "the offer's product, when several share the id"),
                param("appleReferenceName", string, example: "Spring 2026", "appleOneTime: the offer code's name"),
                param("code", string, example: "SPRING-2026"),
                param("totalLimit", ["type": ["integer", "null"]], example: 1000),
                param("perCustomerLimit", integer, example: 1),
                param("startsAt", dateTime, example: "2026-11-01T00:00:00Z"),
                param("expiresAt", dateTime, example: "2026-12-31T00:00:00Z"),
                param("eligibility", strings, example: ["new", "existing", "expired"]),
            ],
            result: campaign, errors: [-32004, -32009]),
        "campaigns.importCodes": doc(
            "Imports an appleOneTime campaign's codes, as App Store Connect generated them.",
            [
                tenantRequired, campaignId,
                param("codes", strings, required: true, example: ["ABCD1234EFGH"], "at most 10,000 per call"),
            ],
            result: object(
                ["campaignId": string, "imported": integer, "duplicates": integer],
                required: ["imported", "duplicates"]),
            errors: [-32004]),
        "events.record": doc(
            "Records what the app's paywall saw (idempotent per eventId; at most 1,000 per call).",
            [
                tenantOptional,
                param(
                    "events",
                    array(
                        object(
                            [
                                "customerId": string, "offerId": string,
                                "event": [
                                    "type": "string",
                                    "enum": ["impression", "tap", "dismiss", "purchaseStarted", "purchaseFailed"],
                                ],
                                "at": dateTime, "eventId": string,
                            ], required: ["customerId", "offerId", "event"])),
                    required: true,
                    example: [["customerId": "user-1", "offerId": "promo.half", "event": "impression"]]),
            ],
            result: object(["recorded": integer, "duplicates": integer], required: ["recorded"]), errors: []),
        "analytics.funnel": doc(
            "An offer's (or campaign's, or product's) funnel from offered to renewed, per day or hour.",
            [
                tenantOptional, param("offerId", string, example: "promo.half"),
                param("campaignId", string, example: "spring"), param("productId", string, example: "monthly"),
                param("from", dateTime, required: true, example: "2026-11-01T00:00:00Z"),
                param("to", dateTime, required: true, example: "2026-11-08T00:00:00Z"),
                param("bucket", ["type": "string", "enum": ["day", "hour"]], example: "day"),
            ],
            result: object(
                ["bucket": string, "from": dateTime, "to": dateTime, "buckets": array(anyObject), "totals": anyObject],
                required: ["buckets", "totals"]),
            errors: []),
        "campaigns.generateCodes": doc(
            "Generates one-time codes (may send progress notifications).",
            [
                tenantRequired, campaignId, param("count", integer, required: true, example: 100),
                param("pattern", string, example: "XXXX-XXXX"),
            ],
            result: object(["campaignId": string, "generated": integer], required: ["generated"]), errors: [-32004]),
        "campaigns.codes": doc(
            "A campaign's codes, paged.",
            [
                tenantRequired, campaignId, param("after", string, example: "AAAA"),
                param("limit", integer, example: 100),
            ],
            result: object(["codes": array(anyObject)]), errors: [-32004]),
        "campaigns.stats": doc(
            "A campaign's limits and counts.", [tenantRequired, campaignId],
            result: object([
                "totalLimit": ["type": ["integer", "null"]], "redeemed": integer,
                "remaining": ["type": ["integer", "null"]], "rolledBack": integer, "codesGenerated": integer,
                "codesRedeemed": integer, "claimed": integer, "purchased": integer,
            ]),
            errors: [-32004]),
        "campaigns.list": doc(
            "A tenant's campaigns.", [tenantRequired], result: object(["campaigns": array(campaign)]),
            errors: [-32004]),
        "campaigns.deactivate": doc(
            "Stops a campaign's codes from being redeemed.", [tenantRequired, campaignId], result: campaign,
            errors: [-32004]),
        "retention.configure": doc(
            "Sets what Apple's Retention Messaging requests are answered with (replaces the whole configuration).",
            [
                tenantRequired,
                param("defaultMessageId", string, required: true, example: "msg-default", "an approved message"),
                param(
                    "offers",
                    array(object(["offerId": string, "messageId": string], required: ["offerId", "messageId"])),
                    required: true, example: [], "promotional offers with their approved messages"),
                param(
                    "alternateProducts",
                    array(object(["productId": string, "messageId": string], required: ["productId", "messageId"])),
                    example: [], "other products of the group to suggest"),
                param("budgetMs", integer, example: 500, "answer within this many milliseconds (default 500)"),
            ],
            result: retention, errors: [-32004]),
        "retention.get": doc(
            "A tenant's Retention Messaging configuration.", [tenantRequired], result: retention, errors: [-32004]),
    ]

    /// What `offers.sign` returns (and `codes.redeem` with `sign`).
    private static let signature = object(
        [
            "format": string, "keyId": string, "nonce": string, "timestamp": integer, "signature": string,
            "compactJWS": string, "offerId": string, "productId": string,
        ], required: ["format", "offerId", "productId"])

    private static let retention = object(
        [
            "tenant": string, "defaultMessageId": string, "offers": array(anyObject),
            "alternateProducts": array(anyObject), "budgetMs": integer, "updatedAt": dateTime,
        ], required: ["tenant", "defaultMessageId", "offers", "alternateProducts", "budgetMs"])
}
