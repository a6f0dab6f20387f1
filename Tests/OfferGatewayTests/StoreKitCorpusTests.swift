import Foundation
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Testing

/// `catalog.import` over the 33 real `.storekit` files of `Fixtures/StoreKitReal` (copied byte for byte from
/// public projects, with the `manifest.json` that `summarize.py` computed from them independently of OfferGate):
/// every file with auto-renewable subscriptions imports, and what it imports and skips adds up to what the
/// manifest counts, kind by kind, so an import that dropped or invented a group, product or offer fails here.
@Suite("Real .storekit files")
struct StoreKitCorpusTests {
    /// One manifest entry (the counts the test compares with; the manifest has more), its snake_case keys decoded
    /// into camelCase.
    struct Entry: Decodable {
        let file: String
        let groups: Int
        let subscriptions: Int
        let introOffers: Int
        let promoOffers: Int
        let winbackOffers: Int
        let offerCodeLike: [String: Int]
        let nonRenewing: Int
        let otherProducts: Int
        let subscriptionProductIds: [String?]
        let subscriptionEntriesNotObjects: Int
        let sha256: String
    }

    static let directory = PackagePaths.root.appendingPathComponent("Tests/OfferGatewayTests/Fixtures/StoreKitReal")

    static func manifest() throws -> [Entry] {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(
            [Entry].self, from: Data(contentsOf: directory.appendingPathComponent("manifest.json")))
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func file(_ name: String) throws -> JSONValue {
        try JSONParsing.parse(Array(try Data(contentsOf: directory.appendingPathComponent(name))))
    }

    /// What the manifest's summariser does not walk: version 1's top-level `subscriptions[]` (it lists the key as
    /// unknown). Counted by hand from the file: 37 has two subscriptions naming group 21580000, one intro offer.
    static let topLevelLayout: [String: (groups: Int, products: [String], intro: Int)] = [
        "37_gabeliss__dreamdex.storekit": (
            1, ["com.gabeliss.dreamdex.premium.monthly", "com.gabeliss.dreamdex.premium.annual"], 1
        )
    ]

    /// The files in which nothing is an auto-renewable subscription in Xcode's layout (only non-renewing or other
    /// products, hand-made shapes, an empty group): refused, with `no_subscriptions` or the first entry that could
    /// not be modelled.
    static let refused: Set<String> = [
        "25_ProtonMail__protoncore_ios.storekit", "34_RarefiedAir24__Soteria.storekit",
        "35_lioneltchami__swiftui-indie-stack.storekit", "36_zt444888-hub__FocusHabit.storekit",
        "38_Exitze__PulseBar.storekit", "39_Wintaru__DeepGroove.storekit",
    ]

    struct Imported {
        let apiKey: String
        let summary: JSONValue
        let catalog: JSONValue

        var skipped: [(path: String, reason: String)] {
            (summary["skipped"]?.arrayValue ?? []).map {
                ($0["path"]?.stringValue ?? "", $0["reason"]?.stringValue ?? "")
            }
        }
        func offers(_ type: String) -> [JSONValue] {
            (catalog["offers"]?.arrayValue ?? []).filter { $0["type"]?.stringValue == type }
        }
        var productIds: [String] { (catalog["products"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue } }
    }

    /// Imports `storekit` for a fresh tenant and reads its catalog back.
    static func importFile(_ gw: TestGateway, admin: RPCClient, slug: String, _ storekit: JSONValue) async throws
        -> Imported
    {
        let key = try await gw.createTenant(slug, admin: admin)
        let summary = try await admin.call(
            method: "catalog.import", params: ["tenant": .string(slug), "storekit": storekit])
        let app = try await gw.tenant(key)
        defer { app.close() }
        return Imported(apiKey: key, summary: summary, catalog: try await app.call(method: "catalog.get", params: [:]))
    }

    @Test("every file with subscriptions imports; imported plus skipped is what the manifest counts")
    func corpus() async throws {
        let manifest = try Self.manifest()
        #expect(manifest.count == 33)
        try await TestGateway.with { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            var importedFiles = 0
            for (n, entry) in manifest.enumerated() {
                let bytes = try Data(contentsOf: Self.directory.appendingPathComponent(entry.file))
                #expect(
                    Self.hex(SHA256.hash(Array(bytes))) == entry.sha256,
                    "\(entry.file) differs from the manifest's copy")
                let storekit = try JSONParsing.parse(Array(bytes))
                let slug = "sk-\(n)"
                if Self.refused.contains(entry.file) {
                    #expect(entry.subscriptions == 0, "\(entry.file)")
                    let key = try await gw.createTenant(slug, admin: admin)
                    let error = await expectRPCError(-32602) {
                        try await admin.call(
                            method: "catalog.import", params: ["tenant": .string(slug), "storekit": storekit])
                    }
                    // Nothing is a subscription (no_subscriptions), or what was meant as one is not an object (35's
                    // group lists strings): then the refusal names that entry.
                    let malformed = entry.subscriptionEntriesNotObjects > 0
                    #expect(error?.reason == (malformed ? "invalid_storekit" : "no_subscriptions"), "\(entry.file)")
                    #expect(
                        error?.data?["param"]?.stringValue
                            == (malformed
                                ? "params.storekit.subscriptionGroups[0].subscriptions[0]" : "params.storekit"),
                        "\(entry.file)")
                    let app = try await gw.tenant(key)
                    let catalog = try await app.call(method: "catalog.get", params: [:])
                    app.close()
                    #expect(catalog["groups"]?.arrayValue?.isEmpty == true, "\(entry.file): a refusal stores nothing")
                    continue
                }
                importedFiles += 1
                let result = try await Self.importFile(gw, admin: admin, slug: slug, storekit)
                try Self.compare(result, with: entry, file: storekit)
            }
            #expect(importedFiles == 27)
        }
    }

    /// Imported + skipped, kind by kind, against the manifest.
    static func compare(_ result: Imported, with entry: Entry, file: JSONValue) throws {
        let name = entry.file
        let skipped = result.skipped
        let base = "params.storekit"
        for skip in skipped {
            #expect(!skip.reason.isEmpty, "\(name): \(skip.path) has no reason")
            #expect(resolve(skip.path, in: file, base: base) != nil, "\(name): \(skip.path) is not in the file")
        }
        func matching(_ pattern: String) -> [String] {
            skipped.map(\.path).filter { $0.range(of: "^" + pattern + "$", options: .regularExpression) != nil }
        }
        let group = #"params\.storekit\.subscriptionGroups\[\d+\]"#
        let subscription = #"params\.storekit\.(subscriptionGroups\[\d+\]\.)?subscriptions\[\d+\]"#
        let field = #"(\.[A-Za-z]+)?"#
        let skippedGroups = matching(group + field).filter { !$0.contains(".subscriptions") }
        let skippedSubscriptions = matching(
            subscription
                + #"(\.(productID|recurringSubscriptionPeriod|displayPrice|groupNumber|type|subscriptionGroupID))?"#)
        func skippedOffers(_ key: String) -> [String] { matching(subscription + "\\.\(key)(\\[\\d+\\])?" + field) }
        let products = matching(#"params\.storekit\.products\[\d+\]"#)
        let nonRenewing = matching(#"params\.storekit\.nonRenewingSubscriptions\[\d+\]"#)
        let accounted =
            skippedGroups.count + skippedSubscriptions.count + products.count + nonRenewing.count
            + ["introductoryOffer", "introductoryOffers", "adHocOffers", "codeOffers", "winbackOffers"]
            .map { skippedOffers($0).count }.reduce(0, +)
        #expect(accounted == skipped.count, "\(name): unexplained skips \(skipped)")
        #expect(skippedGroups.isEmpty, "\(name): \(skippedGroups)")
        #expect(products.count == entry.otherProducts, "\(name)")
        #expect(nonRenewing.count == entry.nonRenewing, "\(name)")
        // A skipped subscription takes its offers with it: in this corpus no subscription is skipped at all.
        #expect(skippedSubscriptions.isEmpty, "\(name): \(skippedSubscriptions)")
        #expect(entry.subscriptionEntriesNotObjects == skippedSubscriptions.count, "\(name)")

        let expected = topLevelLayout[name]
        let expectedProducts = expected?.products ?? entry.subscriptionProductIds.compactMap { $0 }
        #expect(expectedProducts.count == (expected == nil ? entry.subscriptions : expectedProducts.count))
        #expect(result.productIds.sorted() == expectedProducts.sorted(), "\(name)")
        #expect(result.catalog["groups"]?.arrayValue?.count == (expected?.groups ?? entry.groups), "\(name)")
        let intros = skippedOffers("introductoryOffer").count
        #expect(result.offers("introductory").count + intros == (expected?.intro ?? entry.introOffers), "\(name)")
        #expect(
            result.offers("promotional").count + skippedOffers("adHocOffers").count == entry.promoOffers, "\(name)")
        #expect(
            result.offers("winBack").count + skippedOffers("winbackOffers").count == entry.winbackOffers, "\(name)")
        #expect(
            result.offers("code").count + skippedOffers("codeOffers").count == entry.offerCodeLike["codeOffers"] ?? 0,
            "\(name)")
        // v5's introductoryOffers[] repeats the intro offer: counted once, never as a second intro.
        #expect(skippedOffers("introductoryOffers").isEmpty, "\(name)")
        // The summary's counts are what catalog.get shows.
        let offerCount = result.catalog["offers"]?.arrayValue?.count ?? -1
        #expect(result.summary["imported"]?["offers"]?.int64Value == Int64(offerCount), "\(name)")
        #expect(result.summary["imported"]?["products"]?.int64Value == Int64(result.productIds.count), "\(name)")
    }

    /// The value at a skip's path (`params.storekit.a[0].b`), or nil when the file has nothing there.
    static func resolve(_ path: String, in file: JSONValue, base: String) -> JSONValue? {
        guard path.hasPrefix(base) else { return nil }
        var value: JSONValue? = file
        for part in path.dropFirst(base.count).split(separator: ".") {
            var name = Substring(part)
            var indices: [Int] = []
            while let open = name.lastIndex(of: "["), name.hasSuffix("]") {
                guard let index = Int(name[name.index(after: open)..<name.index(before: name.endIndex)]) else {
                    return nil
                }
                indices.insert(index, at: 0)
                name = name[..<open]
            }
            if !name.isEmpty { value = value?[String(name)] }
            for index in indices { value = value?[index] }
        }
        return value
    }

    // MARK: One odd entry in a real file

    /// File 01 (RevenueCat's purchase tester: 6 groups, 13 subscriptions, promotional and code offers) with one
    /// entry broken as other real files break theirs.
    static let base = "01_RevenueCat__purchases-ios.storekit"
    static let p1 = ["subscriptionGroups", "2", "subscriptions", "1"]  // product P1: three promotional offers
    static let p2 = ["subscriptionGroups", "2", "subscriptions", "0"]  // product P2: a pay-up-front intro offer

    struct Mutation: Sendable, CustomTestStringConvertible {
        let name: String
        let path: [String]
        let value: JSONValue?
        /// The skip expected (path after `params.storekit`), and what the import loses.
        let skippedPath: String
        let lostProducts: Int
        let lostPromotional: Int
        let lostIntro: Int
        var lostCode = 0
        var testDescription: String { name }
    }

    static let mutations: [Mutation] = [
        Mutation(
            name: "a promotional offer without its offerID", path: p1 + ["adHocOffers", "1", "offerID"], value: nil,
            skippedPath: ".subscriptionGroups[2].subscriptions[1].adHocOffers[1].offerID", lostProducts: 0,
            lostPromotional: 1, lostIntro: 0),
        Mutation(
            name: "an intro offer without a period", path: p2 + ["introductoryOffer", "subscriptionPeriod"],
            value: nil, skippedPath: ".subscriptionGroups[2].subscriptions[0].introductoryOffer.subscriptionPeriod",
            lostProducts: 0, lostPromotional: 0, lostIntro: 1),
        Mutation(
            name: "a paid intro offer with displayPrice \"\"", path: p2 + ["introductoryOffer", "displayPrice"],
            value: "", skippedPath: ".subscriptionGroups[2].subscriptions[0].introductoryOffer.displayPrice",
            lostProducts: 0, lostPromotional: 0, lostIntro: 1),
        Mutation(
            name: "a subscription with displayPrice \"\" (its offers go with it)", path: p1 + ["displayPrice"],
            value: "", skippedPath: ".subscriptionGroups[2].subscriptions[1].displayPrice", lostProducts: 1,
            lostPromotional: 3, lostIntro: 0, lostCode: 3),
        Mutation(
            name: "a promotional offer of an unknown payment mode", path: p1 + ["adHocOffers", "2", "paymentMode"],
            value: "payLater", skippedPath: ".subscriptionGroups[2].subscriptions[1].adHocOffers[2].paymentMode",
            lostProducts: 0, lostPromotional: 1, lostIntro: 0),
        Mutation(
            name: "a pay-as-you-go offer whose period is not the product's",
            path: p1 + ["adHocOffers", "2", "subscriptionPeriod"], value: "P1M",
            skippedPath: ".subscriptionGroups[2].subscriptions[1].adHocOffers[2]", lostProducts: 0,
            lostPromotional: 1, lostIntro: 0),
        Mutation(
            name: "a subscription entry that is not an object", path: p1, value: "P1",
            skippedPath: ".subscriptionGroups[2].subscriptions[1]", lostProducts: 1, lostPromotional: 3, lostIntro: 0,
            lostCode: 3),
    ]

    @Test(
        "one entry that cannot be modelled is skipped with its path; the rest of the file imports", arguments: mutations
    )
    func oddEntry(_ mutation: Mutation) async throws {
        let entry = try #require(try Self.manifest().first { $0.file == Self.base })
        let broken = Self.editing(try Self.file(Self.base), at: mutation.path, to: mutation.value)
        try await TestGateway.with { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            let result = try await Self.importFile(gw, admin: admin, slug: "odd", broken)
            let modelling = result.skipped.filter {
                !$0.path.contains(".products[") && !$0.path.contains(".nonRenewingSubscriptions[")
            }
            #expect(modelling.map(\.path) == ["params.storekit" + mutation.skippedPath], "\(result.skipped)")
            #expect(result.productIds.count == entry.subscriptions - mutation.lostProducts)
            #expect(result.offers("promotional").count == entry.promoOffers - mutation.lostPromotional)
            #expect(result.offers("introductory").count == entry.introOffers - mutation.lostIntro)
            #expect(result.offers("code").count == (entry.offerCodeLike["codeOffers"] ?? 0) - mutation.lostCode)
        }
    }

    @Test("one promotional offerID on two subscriptions: both import, each named by its product")
    func sharedOfferId() async throws {
        // File 01 with test_refname2's promotional offer renamed to the id test_product1's offer has ("test"), as
        // Xcode lets a developer do: promotional offers are set up per subscription.
        let renamed = Self.editing(
            try Self.file(Self.base),
            at: ["subscriptionGroups", "1", "subscriptions", "1", "adHocOffers", "0", "offerID"],
            to: "test")
        try await TestGateway.with { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            let result = try await Self.importFile(gw, admin: admin, slug: "shared", renamed)
            let shared = result.offers("promotional").filter { $0["id"]?.stringValue == "test" }
            #expect(
                Set(shared.compactMap { $0["productId"]?.stringValue }) == ["test_product1", "test_refname2"],
                "\(result.catalog.text)")
            // Importing again changes nothing: the offers are matched by product and id.
            _ = try await admin.call(method: "catalog.import", params: ["tenant": "shared", "storekit": renamed])
            let tenant = try await gw.tenantId("shared")
            #expect(
                try await gw.count(
                    "SELECT count(*)::int8 FROM offers WHERE tenant_id = \(tenant) AND offer_id = 'test'")
                    == 2)

            let app = try await gw.tenant(result.apiKey)
            defer { app.close() }
            try await gw.importKey(tenant: "shared", admin: admin)
            let customer = "7d1a0c9e-5b7f-4c43-9d43-2f7f3c0e8a11"
            // Lapsed in the group (a week of test_product1 in October): in the promotional offers' default audience.
            _ = try await app.call(
                method: "subscriptions.record",
                params: [
                    "customerId": .string(customer), "productId": "test_product1", "transactionId": "t-shared-1",
                    "purchaseDate": "2026-10-01T00:00:00Z", "expiresDate": "2026-10-08T00:00:00Z",
                ])
            for (product, mode) in [("test_product1", "payAsYouGo"), ("test_refname2", "freeTrial")] {
                let best = try await app.call(
                    method: "offers.best", params: ["customerId": .string(customer), "productId": .string(product)])
                #expect(best["offer"]?["offerId"] == "test", "\(best.text)")
                #expect(best["offer"]?["productId"]?.stringValue == product)
                #expect(best["offer"]?["paymentMode"]?.stringValue == mode, "\(best.text)")
                let signed = try await app.call(
                    method: "offers.sign",
                    params: [
                        "customerId": .string(customer), "productId": .string(product), "offerId": "test",
                        "format": "v1",
                    ])
                #expect(signed["productId"]?.stringValue == product && signed["offerId"] == "test")
            }
            #expect(
                try await gw.count(
                    "SELECT count(DISTINCT product_id)::int8 FROM issued_signatures WHERE tenant_id = \(tenant) AND offer_id = 'test'"
                ) == 2)

            // A campaign names its offer by id alone while that is unambiguous; here it must name the product.
            let ambiguous = await expectRPCError(-32602, param: "params.productId") {
                try await admin.call(
                    method: "campaigns.create",
                    params: [
                        "tenant": "shared", "campaignId": "c1", "offerId": "test", "kind": "custom", "code": "SHARED1",
                    ])
            }
            #expect(ambiguous?.reason == "ambiguous_offer")
            #expect(ambiguous?.message.contains("test_refname2") == true, "\(String(describing: ambiguous))")
            let created = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "shared", "campaignId": "c1", "offerId": "test", "productId": "test_refname2",
                    "kind": "custom", "code": "SHARED1",
                ])
            #expect(created["productId"]?.stringValue == "test_refname2")
            let validated = try await app.call(
                method: "codes.validate", params: ["code": "SHARED1", "customerId": .string(customer)])
            #expect(validated["productId"]?.stringValue == "test_refname2", "\(validated.text)")
            // An id only one product has still needs no product, as before.
            let single = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "shared", "campaignId": "c2", "offerId": "deema_promo2_offer_id", "kind": "custom",
                    "code": "SINGLE2",
                ])
            #expect(single["productId"]?.stringValue == "P1")
        }
    }

    /// `value` with the member or element at `path` set to `new` (removed when nil).
    static func editing(_ value: JSONValue, at path: [String], to new: JSONValue?) -> JSONValue {
        guard let head = path.first else { return new ?? .null }
        let rest = Array(path.dropFirst())
        switch value.expanded {
        case .array(var items):
            if let index = Int(head), items.indices.contains(index) {
                items[index] = editing(items[index], at: rest, to: new)
            }
            return .array(items)
        case .object(var object):
            if rest.isEmpty {
                object[head] = new
            } else if let child = object[head] {
                object[head] = editing(child, at: rest, to: new)
            }
            return .object(object)
        default: return value
        }
    }
}
