import Foundation
import JSONRPC
import OfferCrypto

/// How big the data set up for a run is, and what it is called.
public struct SetupOptions: Sendable, Equatable {
    /// Distinguishes this run's tenant, customers, campaigns and idempotency keys: lowercase letters and digits.
    public var runTag: String
    /// The tenant slug to create; nil → `load-<runTag>`.
    public var tenant: String?
    /// Products in the catalog (one subscription group).
    public var products: Int
    /// Offers per product: one introductory, one code offer, win-back and promotional ones (at most 10 of these).
    public var offersPerProduct: Int
    /// Customers seeded with histories (``HistorySeed``); the 20 % without history are not used by the load.
    public var customers: Int
    /// One-time codes generated for `redeem-onetime` (and imported for `claim`).
    public var oneTimeCodes: Int
    /// The total limit of the `redeem-hot` campaign; nil = unlimited.
    public var hotLimit: Int?
    /// The decision time the histories are relative to.
    public var now: Date

    public init(
        runTag: String, tenant: String? = nil, products: Int = 20, offersPerProduct: Int = 10, customers: Int = 1_000,
        oneTimeCodes: Int = 10_000, hotLimit: Int? = nil, now: Date = Date()
    ) {
        self.runTag = runTag
        self.tenant = tenant
        self.products = products
        self.offersPerProduct = offersPerProduct
        self.customers = customers
        self.oneTimeCodes = oneTimeCodes
        self.hotLimit = hotLimit
        self.now = now
    }

    /// A fresh run tag: `r` + seconds since 2020 in base 36 + 4 random base-36 digits (unique per run).
    public static func freshRunTag(now: Date = Date()) -> String {
        let seconds = max(0, Int(now.timeIntervalSince1970) - 1_577_836_800)
        let random = String(Int.random(in: 0..<1_679_616), radix: 36)
        return "r" + String(seconds, radix: 36) + String(repeating: "0", count: 4 - random.count) + random
    }

    /// The tenant slug of the run.
    public var tenantSlug: String { tenant ?? "load-\(runTag)" }
}

/// What the setup produced: the tenant, its API key (a secret: only ever written to a 0600 file), and the fixture.
public struct SetupResult: Sendable, Equatable, Codable {
    public var tenant: String
    public var apiKey: String
    public var fixture: ScenarioFixture

    public init(tenant: String, apiKey: String, fixture: ScenarioFixture) {
        self.tenant = tenant
        self.apiKey = apiKey
        self.fixture = fixture
    }

    /// Writes the result as JSON to `path`, readable by the owner only (it holds the tenant's API key).
    public func write(to path: String) throws(OfferLoadError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            let data = try encoder.encode(self)
            guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
            else {
                throw OfferLoadError(.setupFailed, context: "fixture", "cannot create \(path)")
            }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            defer { try? handle.close() }
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: data)
        } catch {
            throw OfferLoadError(.setupFailed, context: path, "cannot write the fixture file: \(error)")
        }
    }

    /// Reads a result written by ``write(to:)``.
    public static func read(from path: String) throws(OfferLoadError) -> SetupResult {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw OfferLoadError(.setupFailed, context: path, "cannot read the fixture file")
        }
        do {
            return try JSONDecoder().decode(SetupResult.self, from: data)
        } catch {
            throw OfferLoadError(.setupFailed, context: path, "not a fixture file written by --save-fixture")
        }
    }
}

/// The setup of a scenario's data through the admin API: tenant, catalog, signing key, customers with histories,
/// campaigns and codes.
public enum ScenarioSetup {
    /// The subscription group every product of the synthetic catalog belongs to.
    public static let groupId = "load-group"

    /// The `catalog.upsert` params (without `tenant`) of `products` products × `offers` offers.
    ///
    /// Product `p<i>`: monthly (even i, $9.99) or yearly (odd i, $79.99), level i+1. Its offers `p<i>-o<j>`:
    /// j = 0 introductory free week; j = 1 a code offer (3 months up front); j ≡ 2 (mod 4) win-back (≥ 3 paid
    /// months, lapsed 1…24 months, one month free); else promotional (pay as you go for 3 periods, audience:
    /// every segment), at most 10.
    public static func catalogParams(products: Int, offers: Int) -> JSONObject {
        var productList: [JSONValue] = []
        var offerList: [JSONValue] = []
        for i in 0..<products {
            let monthly = i % 2 == 0
            let product = "p\(i)"
            productList.append([
                "id": .string(product), "groupId": .string(groupId), "period": .string(monthly ? "P1M" : "P1Y"),
                "price": .string(monthly ? "9.99" : "79.99"), "currency": "USD", "level": .int(i + 1),
            ])
            var promotional = 0
            for j in 0..<offers {
                let id = "\(product)-o\(j)"
                var offer: JSONObject = ["id": .string(id), "productId": .string(product)]
                if j == 0 {
                    offer["type"] = "introductory"
                    offer["paymentMode"] = "freeTrial"
                    offer["period"] = "P1W"
                } else if j == 1 {
                    offer["type"] = "code"
                    offer["paymentMode"] = "payUpFront"
                    offer["period"] = "P3M"
                    offer["price"] = .string(monthly ? "19.99" : "59.99")
                } else if j % 4 == 2 {
                    offer["type"] = "winBack"
                    offer["paymentMode"] = "freeTrial"
                    offer["period"] = "P1M"
                    offer["minPaidMonths"] = .int(3)
                    offer["monthsSinceLapse"] = ["min": .int(1), "max": .int(24)]
                } else if promotional < 10 {
                    promotional += 1
                    offer["type"] = "promotional"
                    offer["paymentMode"] = "payAsYouGo"
                    offer["period"] = .string(monthly ? "P1M" : "P1Y")
                    offer["periodCount"] = .int(monthly ? 3 : 1)
                    // Every segment, so `sign` can sign for every customer with a history.
                    offer["audience"] = ["active", "atRisk", "billingRetry", "lapsed"]
                    let cents = (monthly ? 999 : 7_999) * (90 - 5 * promotional) / 100
                    offer["price"] = .string("\(cents / 100).\(String(format: "%02d", cents % 100))")
                } else {
                    continue
                }
                offerList.append(.object(offer))
            }
        }
        return [
            "groups": [["id": .string(groupId), "name": "Load test plans"]], "products": .array(productList),
            "offers": .array(offerList),
        ]
    }

    /// The promotional offers of the synthetic catalog (same rules as ``catalogParams(products:offers:)``).
    public static func promotionalOffers(products: Int, offers: Int) -> [OfferRef] {
        var out: [OfferRef] = []
        for i in 0..<products {
            var promotional = 0
            for j in 2..<max(2, offers) where j % 4 != 2 && promotional < 10 {
                promotional += 1
                out.append(OfferRef(productId: "p\(i)", offerId: "p\(i)-o\(j)"))
            }
        }
        return out
    }

    /// The customers of a seed that have a history (the ones `sign` can sign for: promotional offers need one).
    public static func customersWithHistory(_ seed: HistorySeed) -> [String] {
        (0..<seed.count).filter { $0 % 10 < 8 }.map { "\(seed.runTag)-h\($0)" }
    }

    /// The custom code of a run's `redeem-hot` campaign.
    public static func hotCode(runTag: String) -> String {
        "HOT" + String(runTag.uppercased().filter { $0.isASCII && ($0.isLetter || $0.isNumber) })
    }

    /// Sets up everything `needs` asks for and returns the tenant, its key and the fixture. `progress` gets
    /// one-line messages for stderr.
    public static func run(
        _ needs: SetupNeeds, options o: SetupOptions, admin: AdminClient,
        progress: @Sendable (String) -> Void = { _ in }
    ) async throws(OfferLoadError) -> SetupResult {
        let slug = o.tenantSlug
        var fixture = ScenarioFixture(runTag: o.runTag)
        progress("tenants.create \(slug)")
        let created = try await admin.call(
            "tenants.create", ["slug": .string(slug), "bundleId": .string("com.example.load.\(o.runTag)")])
        guard let apiKey = created["apiKey"]?.stringValue else {
            throw OfferLoadError(.setupFailed, context: "tenants.create", "the result has no apiKey")
        }
        let productIds = (0..<o.products).map { "p\($0)" }
        fixture.products = productIds
        if !needs.subtracting(.tenant).isEmpty {
            guard o.products >= 1, o.offersPerProduct >= 2 else {
                throw OfferLoadError(.invalidPlan, context: "--products", "needs at least 1 product and 2 offers each")
            }
            progress("catalog.upsert \(o.products) products × \(o.offersPerProduct) offers")
            var params = catalogParams(products: o.products, offers: o.offersPerProduct)
            params["tenant"] = .string(slug)
            try await admin.call("catalog.upsert", params)
            fixture.promotionalOffers = promotionalOffers(products: o.products, offers: o.offersPerProduct)
        }
        if needs.contains(.signingKey) {
            progress("keys.import (fresh P-256 key)")
            let pem = try await generatePrivateKeyPEM()
            try await admin.call(
                "keys.import",
                [
                    "tenant": .string(slug), "keyId": "LOADKEY001", "issuerId": "load-issuer",
                    "privateKeyPem": .string(pem),
                ])
        }
        if needs.contains(.customersWithHistories) {
            let seed = HistorySeed(runTag: o.runTag, count: o.customers, products: productIds, now: o.now)
            let requests = seed.requests
            progress("subscriptions.record × \(requests.count) for \(o.customers) customers")
            var params: [JSONObject] = []
            params.reserveCapacity(requests.count)
            for request in requests {
                var object = request.params
                object["tenant"] = .string(slug)
                params.append(object)
            }
            try await admin.callAll("subscriptions.record", params)
            fixture.customers = customersWithHistory(seed)
            if needs.contains(.retentionMessaging) { fixture.retentionSubscribers = retentionSubscribers(seed) }
        }
        if needs.contains(.retentionMessaging) {
            progress("tenants.update (app Apple id, Sandbox) + retention.configure")
            try await setUpRetention(slug: slug, options: o, admin: admin)
        }
        if needs.contains(.customCodeCampaign) {
            let campaign = "\(o.runTag)-hot"
            let code = hotCode(runTag: o.runTag)
            progress("campaigns.create \(campaign) (custom code, limit \(o.hotLimit.map(String.init) ?? "none"))")
            try await admin.call(
                "campaigns.create",
                [
                    "tenant": .string(slug), "campaignId": .string(campaign), "offerId": "p0-o1", "kind": "custom",
                    "code": .string(code), "totalLimit": o.hotLimit.map { .int($0) } ?? .null,
                    "perCustomerLimit": .int(1),
                ])
            fixture.hotCode = code
            fixture.hotCampaignId = campaign
        }
        if needs.contains(.oneTimeCodeCampaign) {
            let campaign = "\(o.runTag)-pool"
            progress("campaigns.create \(campaign) + generateCodes \(o.oneTimeCodes)")
            try await admin.call(
                "campaigns.create",
                [
                    "tenant": .string(slug), "campaignId": .string(campaign), "offerId": "p0-o1", "kind": "oneTime",
                    "totalLimit": .null, "perCustomerLimit": .int(1),
                ])
            try await admin.call(
                "campaigns.generateCodes",
                ["tenant": .string(slug), "campaignId": .string(campaign), "count": .int(o.oneTimeCodes)])
            fixture.oneTimeCodes = try await codes(of: campaign, tenant: slug, expected: o.oneTimeCodes, admin: admin)
            fixture.oneTimeCampaignId = campaign
        }
        if needs.contains(.appleCodeCampaign) {
            let campaign = "\(o.runTag)-asc"
            progress("campaigns.create \(campaign) (appleOneTime) + importCodes \(o.oneTimeCodes)")
            try await admin.call(
                "campaigns.create",
                [
                    "tenant": .string(slug), "campaignId": .string(campaign), "offerId": "p0-o1",
                    "kind": "appleOneTime", "appleReferenceName": .string("\(o.runTag) one-time codes"),
                ])
            var start = 0
            while start < o.oneTimeCodes {
                let end = min(start + 10_000, o.oneTimeCodes)
                try await admin.call(
                    "campaigns.importCodes",
                    [
                        "tenant": .string(slug), "campaignId": .string(campaign),
                        "codes": .array((start..<end).map { .string(appleCode(runTag: o.runTag, index: $0)) }),
                    ])
                start = end
            }
            fixture.appleCampaignId = campaign
        }
        return SetupResult(tenant: slug, apiKey: apiKey, fixture: fixture)
    }

    /// Synthetic stand-ins for App Store Connect's codes: the run tag and the index, upper case.
    static func appleCode(runTag: String, index: Int) -> String {
        (runTag + "X" + String(index, radix: 36)).uppercased()
    }

    /// Reads a campaign's codes through `campaigns.codes`, page by page (`after` = the last code seen).
    /// Accepts pages as `{"codes": ["ABC…", …]}` or `{"codes": [{"code": "ABC…"}, …]}`.
    static func codes(of campaign: String, tenant: String, expected: Int, admin: AdminClient)
        async throws(OfferLoadError) -> [String]
    {
        var out: [String] = []
        var after: String?
        while out.count < expected {
            var params: JSONObject = ["tenant": .string(tenant), "campaignId": .string(campaign), "limit": .int(1_000)]
            if let after { params["after"] = .string(after) }
            let page = try await admin.call("campaigns.codes", params)
            let items = page["codes"]?.arrayValue ?? []
            let codes = items.compactMap { $0.stringValue ?? $0["code"]?.stringValue }
            if codes.isEmpty { break }
            out += codes
            after = page["next"]?.stringValue ?? page["nextAfter"]?.stringValue ?? codes.last
        }
        guard out.count >= expected else {
            throw OfferLoadError(
                .setupFailed, context: "campaigns.codes",
                "read \(out.count) codes of \(campaign), expected \(expected)")
        }
        return out
    }

    /// Creates `count` extra tenants `<prefix>-<i>`, each with the synthetic catalog, and asks one `offers.best`
    /// of each so its catalog is loaded (for memory benchmarks). Returns how many were created.
    public static func preloadTenants(
        count: Int, prefix: String, products: Int, offers: Int, admin: AdminClient,
        progress: @Sendable (String) -> Void = { _ in }
    ) async throws(OfferLoadError) -> Int {
        var catalog = catalogParams(products: products, offers: offers)
        var created = 0
        for i in 0..<count {
            let slug = "\(prefix)-\(i)"
            try await admin.call("tenants.create", ["slug": .string(slug), "bundleId": .string("com.example.\(slug)")])
            catalog["tenant"] = .string(slug)
            try await admin.call("catalog.upsert", catalog)
            // One decision per tenant, so the gateway's caches hold every catalog (what a memory figure needs).
            try await admin.call(
                "offers.best", ["tenant": .string(slug), "customerId": "warm-up", "productId": "p0"])
            created += 1
            if created % 100 == 0 { progress("preloaded \(created)/\(count) tenants") }
        }
        return created
    }

    /// A fresh P-256 private key as PKCS#8 PEM (OfferCrypto's `SigningKey.generate()`, in process).
    public static func generatePrivateKeyPEM() async throws(OfferLoadError) -> String {
        do {
            return try SigningKey.generate().exportPKCS8PEM()
        } catch {
            throw OfferLoadError(.setupFailed, context: "keys.import", "key generation failed: \(error)")
        }
    }
}
