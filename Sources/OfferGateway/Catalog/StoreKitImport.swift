import Foundation
import JSONRPC
import OfferDomain

/// Reads an Xcode `.storekit` configuration file (JSON) into catalog rows, leniently: unknown keys are ignored, and
/// one odd entry does not sink the file. An entry that cannot be modelled (a group without an id, a subscription
/// without a period or with `displayPrice: ""`, a promotional offer without its `offerID`, an intro offer without a
/// period, …) is left out and reported in `skipped` with the JSON path of the culprit, e.g.
/// `params.storekit.subscriptionGroups[0].subscriptions[1].recurringSubscriptionPeriod`, and why; a subscription
/// left out takes its offers with it. Non-subscription products are skipped and reported too. The file is refused
/// only when nothing in it imports as an auto-renewable subscription, or its storefront's currency is unknown.
///
/// Both layouts are read: newer files with `subscriptionGroups[].subscriptions[]`, and version 1 files with a
/// top-level `subscriptions[]` whose entries name their group (`subscriptionGroupID` or `subscriptionGroupNumber`).
/// v5+ files repeat the intro offer in `introductoryOffers[]` under the same `internalID`: it is imported once.
struct StoreKitImport {
    /// What the import found, for the caller's report.
    struct Report: Sendable {
        var skipped: [(path: String, reason: String)] = []
        /// The first skipped entry that was meant as a subscription (or its group or offer): what a refusal names.
        var firstModellingSkip: (path: String, reason: String)?
    }

    /// Storefronts (ISO 3166 alpha-3, as Xcode writes `settings._storefront`) and their currencies.
    static let storefrontCurrencies: [String: String] = [
        "USA": "USD", "CAN": "CAD", "GBR": "GBP", "AUS": "AUD", "NZL": "NZD", "JPN": "JPY", "CHN": "CNY",
        "KOR": "KRW", "IND": "INR", "BRA": "BRL", "MEX": "MXN", "CHE": "CHF", "SWE": "SEK", "NOR": "NOK",
        "DNK": "DKK", "POL": "PLN", "TUR": "TRY", "ZAF": "ZAR", "SGP": "SGD", "HKG": "HKD", "TWN": "TWD",
        "DEU": "EUR", "FRA": "EUR", "ITA": "EUR", "ESP": "EUR", "NLD": "EUR", "BEL": "EUR", "AUT": "EUR",
        "IRL": "EUR", "FIN": "EUR", "PRT": "EUR", "GRC": "EUR", "LUX": "EUR",
    ]

    let root: JSONValue
    let basePath: String
    let currencyOverride: String?

    private(set) var input = CatalogInput()
    private(set) var report = Report()
    private var currency = "USD"

    init(storekit: JSONValue, basePath: String = "params.storekit", currency: String? = nil) {
        self.root = storekit
        self.basePath = basePath
        self.currencyOverride = currency
    }

    mutating func run() throws -> (CatalogInput, Report) {
        guard let top = root.objectValue else { throw fail(basePath, "a .storekit file is a JSON object") }
        if let override = currencyOverride {
            currency = override
        } else if let storefront = top["settings"]?["_storefront"]?.stringValue {
            guard let known = Self.storefrontCurrencies[storefront] else {
                throw fail(
                    basePath + ".settings._storefront",
                    "unknown storefront '\(Validate.printable(storefront))'; pass 'currency' to say which currency its prices are in"
                )
            }
            currency = known
        }
        if let groups = top["subscriptionGroups"] {
            skipping(basePath + ".subscriptionGroups") { me in
                for (g, group) in try me.array(groups, me.basePath + ".subscriptionGroups").enumerated() {
                    me.group(group, path: "\(me.basePath).subscriptionGroups[\(g)]")
                }
            }
        }
        if let subscriptions = top["subscriptions"] {
            skipping(basePath + ".subscriptions") { me in
                for (s, subscription) in try me.array(subscriptions, me.basePath + ".subscriptions").enumerated() {
                    let path = "\(me.basePath).subscriptions[\(s)]"
                    me.skipping(path) { me in try me.topLevelSubscription(subscription, index: s, path: path) }
                }
            }
        }
        if let products = top["products"]?.arrayValue {
            for (p, product) in products.enumerated() {
                // Hand-made files list subscriptions here; Xcode never does, and they lack what a subscription needs
                // in Xcode's layout (its group's entry, a level), so they are reported, not guessed at.
                let type = product["type"]?.stringValue
                let reason =
                    type == "AutoRenewableSubscription" || type == "RecurringSubscription"
                    ? "an auto-renewable subscription outside subscriptionGroups[].subscriptions[] (not Xcode's layout)"
                    : "not an auto-renewable subscription"
                report.skipped.append(("\(basePath).products[\(p)]", reason))
            }
        }
        if let products = top["nonRenewingSubscriptions"]?.arrayValue {
            for (p, _) in products.enumerated() {
                report.skipped.append(("\(basePath).nonRenewingSubscriptions[\(p)]", "non-renewing subscription"))
            }
        }
        guard !input.products.isEmpty else {
            // Refused only when nothing is a subscription we could import: name the first subscription entry that
            // could not be modelled, if there was one.
            if let first = report.firstModellingSkip {
                let more = report.skipped.count > 1 ? " (\(report.skipped.count - 1) more entries skipped)" : ""
                throw fail(
                    first.path, "no auto-renewable subscription in this file could be imported: " + first.reason + more)
            }
            throw GatewayError.invalidParams(
                param: basePath,
                message: "no auto-renewable subscriptions in this file (Xcode lists them under "
                    + "subscriptionGroups[].subscriptions[], or subscriptions[] in version 1 files)",
                reason: "no_subscriptions")
        }
        return (input, report)
    }

    /// Runs `body`; an entry it cannot model (a `fail` thrown by the typed reads) is left out and reported.
    private mutating func skipping(_ path: String, _ body: (inout Self) throws -> Void) {
        do {
            try body(&self)
        } catch GatewayError.invalidParams(let param, let message, _) {
            skip(param, message)
        } catch {
            skip(path, "cannot be read")
        }
    }

    private mutating func skip(_ path: String, _ reason: String) {
        report.skipped.append((path, reason))
        if report.firstModellingSkip == nil { report.firstModellingSkip = (path, reason) }
    }

    /// A group of `subscriptionGroups[]` and its subscriptions. A group that cannot be read is skipped with them.
    private mutating func group(_ group: JSONValue, path: String) {
        skipping(path) { me in
            guard group.objectValue != nil else { throw me.fail(path, "a subscription group is a JSON object") }
            let id = try me.string(group["id"], path + ".id")
            let name = try group["name"].map { try me.string($0, path + ".name") } ?? id
            let subscriptions =
                try group["subscriptions"].map { try me.array($0, path + ".subscriptions") } ?? []
            if let earlier = me.input.groups.first(where: { $0.id == id }) {
                throw me.fail(path + ".id", "group id '\(Validate.printable(earlier.id))' appears earlier in the file")
            }
            me.input.groups.append(SubscriptionGroup(id: id, name: name))
            for (s, subscription) in subscriptions.enumerated() {
                let subscriptionPath = "\(path).subscriptions[\(s)]"
                me.skipping(subscriptionPath) { me in
                    try me.product(subscription, groupId: id, index: s, path: subscriptionPath)
                }
            }
        }
    }

    /// A version 1 subscription: it names its group, made on first mention.
    private mutating func topLevelSubscription(_ subscription: JSONValue, index: Int, path: String) throws {
        guard subscription.objectValue != nil else { throw fail(path, "a subscription is a JSON object") }
        guard let groupValue = subscription["subscriptionGroupID"] ?? subscription["subscriptionGroupNumber"] else {
            throw fail(path + ".subscriptionGroupID", "a subscription must name its group")
        }
        let groupId = try scalarText(groupValue, path + ".subscriptionGroupID")
        let name =
            try subscription["subscriptionGroupName"].map { try string($0, path + ".subscriptionGroupName") }
            ?? groupId
        try product(subscription, groupId: groupId, index: index, path: path)
        if !input.groups.contains(where: { $0.id == groupId }) {
            input.groups.append(SubscriptionGroup(id: groupId, name: name))
        }
    }

    /// A subscription and its offers. What cannot be read throws (the caller skips the subscription); an offer that
    /// cannot be read is skipped alone.
    private mutating func product(_ value: JSONValue, groupId: String, index: Int, path: String) throws {
        guard value.objectValue != nil else {
            let shown = value.stringValue.map { " (found the string '\(Validate.printable($0))')" } ?? ""
            throw fail(path, "a subscription is a JSON object\(shown)")
        }
        if let type = value["type"]?.stringValue, type != "RecurringSubscription" {
            report.skipped.append((path, "type \(Validate.printable(type)) is not an auto-renewable subscription"))
            return
        }
        let productId = try string(value["productID"], path + ".productID")
        let period = try periodValue(value["recurringSubscriptionPeriod"], path + ".recurringSubscriptionPeriod")
        let price = try money(value["displayPrice"], path + ".displayPrice")
        let level = try value["groupNumber"].map { try int($0, path + ".groupNumber") } ?? (index + 1)
        guard level >= 1 else { throw fail(path + ".groupNumber", "groupNumber (the level) starts at 1") }
        if input.products.contains(where: { $0.id == productId }) {
            throw fail(path + ".productID", "productID '\(Validate.printable(productId))' appears earlier in the file")
        }
        input.products.append(Product(id: productId, groupId: groupId, period: period, price: price, level: level))

        // The intro offer; v5+ files repeat it in `introductoryOffers[]` under the same internalID.
        var seenInternalIds: Set<String> = []
        var introImported = false
        var intros: [(value: JSONValue, path: String)] = []
        if let intro = value["introductoryOffer"], !intro.isNull {
            intros.append((intro, path + ".introductoryOffer"))
        }
        if let list = value["introductoryOffers"] {
            skipping(path + ".introductoryOffers") { me in
                for (o, item) in try me.array(list, path + ".introductoryOffers").enumerated() {
                    intros.append((item, "\(path).introductoryOffers[\(o)]"))
                }
            }
        }
        for (intro, introPath) in intros {
            skipping(introPath) { me in
                guard intro.objectValue != nil else { throw me.fail(introPath, "an offer is a JSON object") }
                let internalID = try intro["internalID"].map { try me.string($0, introPath + ".internalID") }
                if let internalID, !seenInternalIds.insert(internalID).inserted { return }  // the v5 repetition
                let id =
                    try internalID ?? intro["offerID"].map { try me.string($0, introPath + ".offerID") }
                    ?? "\(productId).introductory"
                if introImported {
                    throw me.fail(introPath, "a product has one introductory offer at a time; this is a second one")
                }
                try me.offer(intro, id: id, type: .introductory, productId: productId, path: introPath)
                introImported = true
            }
        }
        let lists: [(String, OfferType)] = [
            ("adHocOffers", .promotional), ("codeOffers", .code), ("winbackOffers", .winBack),
        ]
        for (key, type) in lists {
            guard let listValue = value[key] else { continue }
            skipping("\(path).\(key)") { me in
                for (o, item) in try me.array(listValue, "\(path).\(key)").enumerated() {
                    let offerPath = "\(path).\(key)[\(o)]"
                    me.skipping(offerPath) { me in
                        try me.listedOffer(item, type: type, productId: productId, path: offerPath)
                    }
                }
            }
        }
    }

    /// An entry of `adHocOffers[]` (promotional: StoreKit needs its `offerID`), `codeOffers[]` (no `offerID` in
    /// Xcode's files: the `internalID` names it) or `winbackOffers[]`.
    private mutating func listedOffer(_ item: JSONValue, type: OfferType, productId: String, path: String) throws {
        guard item.objectValue != nil else { throw fail(path, "an offer is a JSON object") }
        let id: String
        if let offerID = item["offerID"] {
            id = try string(offerID, path + ".offerID")
        } else if let internalID = item["internalID"], type != .promotional {
            id = try string(internalID, path + ".internalID")
        } else {
            throw fail(path + ".offerID", "an offer needs its offerID (StoreKit names a promotional offer by it)")
        }
        if input.offers.contains(where: { $0.id == id && $0.productId == productId }) {
            throw fail(
                path + ".offerID",
                "offer id '\(Validate.printable(id))' appears earlier under product '\(Validate.printable(productId))'")
        }
        if type == .promotional {
            let active = input.offers.filter { $0.type == .promotional && $0.productId == productId }.count
            guard active < Catalog.maxActivePromotionalOffersPerProduct else {
                throw fail(
                    path,
                    "at most \(Catalog.maxActivePromotionalOffersPerProduct) promotional offers per product "
                        + "(Apple's limit); this is one more")
            }
        }
        try offer(item, id: id, type: type, productId: productId, path: path)
    }

    private mutating func offer(_ value: JSONValue, id: String, type: OfferType, productId: String, path: String)
        throws
    {
        var billingPlan: BillingPlan?
        if let planValue = value["billingPlanType"], !planValue.isNull {
            // Files of Xcode 26.4+ (format v5) say which billing plan an offer targets; a value we do not know is
            // not guessed at: the offer is left out and reported, the rest of the file imports.
            guard let text = planValue.stringValue, let plan = BillingPlan(apple: text) else {
                let shown = planValue.stringValue.map { "'\(Validate.printable($0))'" } ?? "a non-string"
                throw fail(
                    path + ".billingPlanType", "billingPlanType \(shown) is not UPFRONT/BILLED_UPFRONT or MONTHLY")
            }
            billingPlan = plan
        }
        let modeText = try string(value["paymentMode"], path + ".paymentMode")
        let mode: PaymentMode
        switch modeText {
        case "free", "freeTrial": mode = .freeTrial
        case "payAsYouGo": mode = .payAsYouGo
        case "payUpFront": mode = .payUpFront
        default: throw fail(path + ".paymentMode", "paymentMode must be free, freeTrial, payAsYouGo or payUpFront")
        }
        var period = try periodValue(value["subscriptionPeriod"], path + ".subscriptionPeriod")
        var count = try value["numberOfPeriods"].map { try int($0, path + ".numberOfPeriods") } ?? 1
        guard (1...12).contains(count) else { throw fail(path + ".numberOfPeriods", "numberOfPeriods must be 1-12") }
        var price: Money?
        if mode == .freeTrial {
            // A free trial is one period: fold "2 × P1W" into P2W when that is a period Apple offers.
            if count > 1 {
                guard let total = period.times(count), SubscriptionPeriod(iso8601: total.iso8601) != nil,
                    ["P3D", "P1W", "P2W", "P1M", "P2M", "P3M", "P6M", "P1Y"].contains(total.iso8601)
                else {
                    throw fail(
                        path + ".numberOfPeriods",
                        "a free trial of \(count) × \(period.iso8601) is not a period Apple offers")
                }
                period = total
                count = 1
            }
        } else {
            price = try money(value["displayPrice"], path + ".displayPrice")
        }
        var winBack: WinBackParameters?
        if type == .winBack {
            let lapse = value["monthsSinceLapse"] ?? value["customerEligibilityTimeSinceLastSubscribedInMonths"]
            winBack = WinBackParameters(
                minPaidMonths: try
                    (value["minPaidMonths"] ?? value["customerEligibilityPaidSubscriptionDurationInMonths"])
                    .map { try int($0, path + ".minPaidMonths") } ?? 1,
                monthsSinceLapse: .init(
                    min: try (lapse?["min"] ?? lapse?["minimum"]).map { try int($0, path + ".monthsSinceLapse.min") }
                        ?? 1,
                    max: try (lapse?["max"] ?? lapse?["maximum"]).map { try int($0, path + ".monthsSinceLapse.max") }
                        ?? 24),
                waitBetweenOffersMonths: try
                    (value["waitBetweenOffersMonths"]
                    ?? value["customerEligibilityWaitBetweenOffersInMonths"]).map {
                        try int($0, path + ".waitBetweenOffersMonths")
                    })
        }
        let offer = Offer(
            id: id, type: type, productId: productId, paymentMode: mode, period: period, periodCount: count,
            price: price, winBack: winBack, billingPlan: billingPlan)
        // The domain's own rules for one offer (a pay-as-you-go period other than the product's, a pay-up-front offer
        // of several periods, …), checked here so that such an offer is skipped rather than refusing the file.
        if let product = input.products.first(where: { $0.id == productId }) {
            let alone = Catalog(
                groups: [SubscriptionGroup(id: product.groupId, name: product.groupId)], products: [product],
                offers: [offer])
            if let problem = alone.validate(at: .distantPast).first { throw fail(path, problem.message) }
        }
        input.offers.append(offer)
    }

    // MARK: Typed reads that fail with the path

    private func fail(_ path: String, _ message: String) -> GatewayError {
        .invalidParams(param: path, message: message, reason: "invalid_storekit")
    }

    private func array(_ value: JSONValue, _ path: String) throws -> [JSONValue] {
        guard let list = value.arrayValue else { throw fail(path, "expected an array") }
        return list
    }

    private func string(_ value: JSONValue?, _ path: String) throws -> String {
        guard let value else { throw fail(path, "missing") }
        guard let text = value.stringValue, !text.isEmpty, text.utf8.count <= 200 else {
            throw fail(path, "expected a non-empty string of at most 200 bytes")
        }
        // Control characters (NUL above all: libpq would cut the value there) are never part of an id or a name.
        guard !text.hasControlCharacters else {
            throw fail(path, "expected a string without control characters")
        }
        return text
    }

    private func scalarText(_ value: JSONValue, _ path: String) throws -> String {
        if value.stringValue != nil { return try string(value, path) }
        if case .number(let number) = value, let int = number.int64 { return String(int) }
        throw fail(path, "expected a string or a whole number")
    }

    private func int(_ value: JSONValue, _ path: String) throws -> Int {
        if case .number(let number) = value, let int = number.int64, let small = Int(exactly: int),
            (0...1_000_000).contains(small)
        {
            return small
        }
        throw fail(path, "expected a whole number")
    }

    private func periodValue(_ value: JSONValue?, _ path: String) throws -> SubscriptionPeriod {
        let text = try string(value, path)
        guard let period = SubscriptionPeriod(iso8601: text) else {
            throw fail(path, "expected a period such as P1W, P1M or P1Y")
        }
        return period
    }

    private func money(_ value: JSONValue?, _ path: String) throws -> Money {
        guard let value else { throw fail(path, "missing") }
        let text: String
        switch value {
        case .string(let s): text = s
        case .number(let n): text = n.decimalString
        default: throw fail(path, "expected a price such as \"4.99\"")
        }
        do {
            return try Money(text, currency: currency)
        } catch {
            throw fail(path, error.message)
        }
    }
}
