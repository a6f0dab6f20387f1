import Foundation
import JSONRPC
import OfferDomain

/// Reads an Xcode `.storekit` configuration file (JSON) into catalog rows: leniently (unknown keys are ignored,
/// non-subscription products are skipped and reported), but what makes no sense is rejected with the JSON path of
/// the culprit, e.g. `params.storekit.subscriptionGroups[0].subscriptions[1].recurringSubscriptionPeriod`.
///
/// Both layouts are read: newer files with `subscriptionGroups[].subscriptions[]`, and version 1 files with a
/// top-level `subscriptions[]` whose entries name their group (`subscriptionGroupID` or `subscriptionGroupNumber`).
struct StoreKitImport {
    /// What the import found, for the caller's report.
    struct Report: Sendable {
        var skipped: [(path: String, reason: String)] = []
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
            let list = try array(groups, basePath + ".subscriptionGroups")
            for (g, group) in list.enumerated() {
                let path = "\(basePath).subscriptionGroups[\(g)]"
                let id = try string(group["id"], path + ".id")
                let name = try group["name"].map { try string($0, path + ".name") } ?? id
                input.groups.append(SubscriptionGroup(id: id, name: name))
                let subscriptions = try group["subscriptions"].map { try array($0, path + ".subscriptions") } ?? []
                for (s, subscription) in subscriptions.enumerated() {
                    try product(subscription, groupId: id, index: s, path: "\(path).subscriptions[\(s)]")
                }
            }
        }
        if let subscriptions = top["subscriptions"] {
            let list = try array(subscriptions, basePath + ".subscriptions")
            for (s, subscription) in list.enumerated() {
                let path = "\(basePath).subscriptions[\(s)]"
                guard let groupValue = subscription["subscriptionGroupID"] ?? subscription["subscriptionGroupNumber"]
                else {
                    throw fail(path + ".subscriptionGroupID", "a subscription must name its group")
                }
                let groupId = try scalarText(groupValue, path + ".subscriptionGroupID")
                if !input.groups.contains(where: { $0.id == groupId }) {
                    let name =
                        try subscription["subscriptionGroupName"].map {
                            try string($0, path + ".subscriptionGroupName")
                        } ?? groupId
                    input.groups.append(SubscriptionGroup(id: groupId, name: name))
                }
                try product(subscription, groupId: groupId, index: s, path: path)
            }
        }
        if let products = top["products"]?.arrayValue {
            for (p, _) in products.enumerated() {
                report.skipped.append(("\(basePath).products[\(p)]", "not an auto-renewable subscription"))
            }
        }
        if let products = top["nonRenewingSubscriptions"]?.arrayValue {
            for (p, _) in products.enumerated() {
                report.skipped.append(("\(basePath).nonRenewingSubscriptions[\(p)]", "non-renewing subscription"))
            }
        }
        guard !input.groups.isEmpty || !input.products.isEmpty else {
            throw fail(basePath, "no subscription groups or subscriptions found")
        }
        return (input, report)
    }

    private mutating func product(_ value: JSONValue, groupId: String, index: Int, path: String) throws {
        guard value.objectValue != nil else { throw fail(path, "a subscription is a JSON object") }
        if let type = value["type"]?.stringValue, type != "RecurringSubscription" {
            report.skipped.append((path, "type \(Validate.printable(type)) is not an auto-renewable subscription"))
            return
        }
        let productId = try string(value["productID"], path + ".productID")
        let period = try periodValue(value["recurringSubscriptionPeriod"], path + ".recurringSubscriptionPeriod")
        let price = try money(value["displayPrice"], path + ".displayPrice")
        let level = try value["groupNumber"].map { try int($0, path + ".groupNumber") } ?? (index + 1)
        guard level >= 1 else { throw fail(path + ".groupNumber", "groupNumber (the level) starts at 1") }
        input.products.append(Product(id: productId, groupId: groupId, period: period, price: price, level: level))

        if let intro = value["introductoryOffer"], !intro.isNull {
            let introPath = path + ".introductoryOffer"
            let id =
                try intro["internalID"].map { try string($0, introPath + ".internalID") }
                ?? intro["offerID"].map { try string($0, introPath + ".offerID") } ?? "\(productId).introductory"
            try offer(intro, id: id, type: .introductory, productId: productId, path: introPath)
        }
        let lists: [(String, OfferType)] = [
            ("adHocOffers", .promotional), ("codeOffers", .code), ("winbackOffers", .winBack),
        ]
        for (key, type) in lists {
            guard let listValue = value[key] else { continue }
            for (o, item) in try array(listValue, "\(path).\(key)").enumerated() {
                let offerPath = "\(path).\(key)[\(o)]"
                let id: String
                if let offerID = item["offerID"] {
                    id = try string(offerID, offerPath + ".offerID")
                } else if let internalID = item["internalID"], type != .promotional {
                    id = try string(internalID, offerPath + ".internalID")
                } else {
                    throw fail(offerPath + ".offerID", "an offer needs its offerID")
                }
                try offer(item, id: id, type: type, productId: productId, path: offerPath)
            }
        }
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
                report.skipped.append(
                    (path + ".billingPlanType", "billingPlanType \(shown) is not UPFRONT/BILLED_UPFRONT or MONTHLY"))
                return
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
        input.offers.append(
            Offer(
                id: id, type: type, productId: productId, paymentMode: mode, period: period, periodCount: count,
                price: price, winBack: winBack, billingPlan: billingPlan))
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
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
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
