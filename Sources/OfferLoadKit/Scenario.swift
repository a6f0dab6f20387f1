import Foundation
import JSONRPC

/// The scenarios `offer-load` knows.
public enum ScenarioKind: String, CaseIterable, Sendable, Codable {
    /// `system.ping`: the transport's own cost, the baseline.
    case ping
    /// `offers.best` for customers with histories over the catalog's products.
    case best
    /// `offers.sign` of promotional offers (v1 and JWS alternately, or as the fixture says).
    case sign
    /// `codes.redeem` of one custom code by unique customers.
    case redeemHot = "redeem-hot"
    /// `codes.redeem` of a pool of one-time codes, each by its own customer.
    case redeemOneTime = "redeem-onetime"
    /// `codes.claim` of an appleOneTime campaign's imported codes, each by its own customer.
    case claim
    /// A weighted mix of the others (`--mix best=70,sign=20,redeem-hot=10`).
    case mixed
    /// Apple's Retention Messaging realtime requests, signed, over HTTP (`POST /v1/apple/{tenant}/retention`), in
    /// the shape of Apple's performance test (see `RetentionReport`).
    case retention

    /// Parses a scenario name as given on the command line.
    public static func named(_ name: String) throws(OfferLoadError) -> ScenarioKind {
        guard let kind = ScenarioKind(rawValue: name) else {
            let known = allCases.map(\.rawValue).joined(separator: ", ")
            throw OfferLoadError(.unknownScenario, context: name, "unknown scenario (expected one of: \(known))")
        }
        return kind
    }

    /// Whether runs of this scenario redeem codes, so the invariant check must follow.
    public var redeems: Bool { self == .redeemHot || self == .redeemOneTime }

    /// What must exist before the run (set up through the admin API unless `--reuse`).
    public var needs: SetupNeeds {
        switch self {
        case .ping: []
        case .best: [.tenant, .catalog, .customersWithHistories]
        case .sign: [.tenant, .catalog, .signingKey, .customersWithHistories]
        case .redeemHot: [.tenant, .catalog, .customCodeCampaign]
        case .redeemOneTime: [.tenant, .catalog, .oneTimeCodeCampaign]
        case .claim: [.tenant, .catalog, .appleCodeCampaign]
        case .mixed: []
        case .retention: [.tenant, .catalog, .signingKey, .customersWithHistories, .retentionMessaging]
        }
    }
}

/// What a scenario needs set up before it runs.
public struct SetupNeeds: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// A tenant and its API key (the load connections authenticate with it).
    public static let tenant = SetupNeeds(rawValue: 1 << 0)
    /// Products and offers (`catalog.upsert`), including promotional ones.
    public static let catalog = SetupNeeds(rawValue: 1 << 1)
    /// A signing key (`keys.import`).
    public static let signingKey = SetupNeeds(rawValue: 1 << 2)
    /// A `custom` campaign with one code (`campaigns.create`).
    public static let customCodeCampaign = SetupNeeds(rawValue: 1 << 3)
    /// A `oneTime` campaign and its generated codes (`campaigns.generateCodes`, `campaigns.codes`).
    public static let oneTimeCodeCampaign = SetupNeeds(rawValue: 1 << 4)
    /// Customers with subscription histories (`subscriptions.record`), some lapsed, some active.
    public static let customersWithHistories = SetupNeeds(rawValue: 1 << 5)
    /// An `appleOneTime` campaign with imported codes (`campaigns.importCodes`), as many as `oneTimeCodes`.
    public static let appleCodeCampaign = SetupNeeds(rawValue: 1 << 6)
    /// The tenant's app Apple id, Sandbox allowed, and a Retention Messaging configuration (`retention.configure`).
    public static let retentionMessaging = SetupNeeds(rawValue: 1 << 7)
}

/// A product and one of its promotional offers, as the `sign` scenario uses them.
public struct OfferRef: Sendable, Equatable, Codable {
    public let productId: String
    public let offerId: String
    public init(productId: String, offerId: String) {
        self.productId = productId
        self.offerId = offerId
    }
}

/// The data a scenario's requests refer to, gathered by the setup (or read back with `--reuse`).
public struct ScenarioFixture: Sendable, Equatable, Codable {
    /// Distinguishes this run's synthetic customer ids and idempotency keys from other runs' (e.g. a timestamp).
    public var runTag: String
    /// Customers with histories (for `best` and `sign`).
    public var customers: [String]
    /// Product ids (for `best`).
    public var products: [String]
    /// Promotional offers the customers are eligible for (for `sign`).
    public var promotionalOffers: [OfferRef]
    /// Signature formats `sign` cycles through.
    public var signFormats: [String]
    /// The custom code and its campaign (for `redeem-hot`).
    public var hotCode: String?
    public var hotCampaignId: String?
    /// The one-time codes and their campaign (for `redeem-onetime`).
    public var oneTimeCodes: [String]
    public var oneTimeCampaignId: String?
    /// The appleOneTime campaign whose codes `claim` hands out.
    public var appleCampaignId: String?
    /// The subscribers retention requests ask about (for `retention`).
    public var retentionSubscribers: [RetentionSubscriber]

    public init(
        runTag: String, customers: [String] = [], products: [String] = [], promotionalOffers: [OfferRef] = [],
        signFormats: [String] = ["v1", "jws"], hotCode: String? = nil, hotCampaignId: String? = nil,
        oneTimeCodes: [String] = [], oneTimeCampaignId: String? = nil, appleCampaignId: String? = nil,
        retentionSubscribers: [RetentionSubscriber] = []
    ) {
        self.retentionSubscribers = retentionSubscribers
        self.runTag = runTag
        self.customers = customers
        self.products = products
        self.promotionalOffers = promotionalOffers
        self.signFormats = signFormats
        self.hotCode = hotCode
        self.hotCampaignId = hotCampaignId
        self.oneTimeCodes = oneTimeCodes
        self.oneTimeCampaignId = oneTimeCampaignId
        self.appleCampaignId = appleCampaignId
    }

    /// A fresh customer id for request `index` (redemptions: unique customers, so per-customer limits never bite).
    public func syntheticCustomer(_ index: Int) -> String { "\(runTag)-c\(index)" }

    /// The idempotency key of request `index`: unique per run and request.
    public func idempotencyKey(_ index: Int) -> String { "\(runTag)-k\(index)" }
}

/// The weights of the `mixed` scenario, parsed from `--mix best=70,sign=20,redeem-hot=10`.
public struct MixSpec: Sendable, Equatable {
    /// Scenario and weight, in the order given; weights are ≥ 0 and sum to more than 0.
    public let weights: [(kind: ScenarioKind, weight: Int)]
    /// The repeating sequence of scenarios: each appears `weight / gcd` times, spread evenly (smooth weighted
    /// round robin), so request `i` runs `cycle[i % cycle.count]` and every full cycle has the exact proportions.
    public let cycle: [ScenarioKind]

    public static func == (a: MixSpec, b: MixSpec) -> Bool {
        a.weights.map(\.kind) == b.weights.map(\.kind) && a.weights.map(\.weight) == b.weights.map(\.weight)
    }

    /// Parses `name=weight[,name=weight…]`. Spaces around items are ignored.
    public static func parse(_ text: String) throws(OfferLoadError) -> MixSpec {
        func fail(_ message: String) -> OfferLoadError { OfferLoadError(.invalidMix, context: "--mix", message) }
        let items = text.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard !(items.count == 1 && items[0].isEmpty) else {
            throw fail("empty; expected e.g. best=70,sign=20,redeem-hot=10")
        }
        var weights: [(kind: ScenarioKind, weight: Int)] = []
        for item in items {
            guard !item.isEmpty else { throw fail("empty item in '\(text)'") }
            let parts = item.split(separator: "=", omittingEmptySubsequences: false)
            guard parts.count == 2 else { throw fail("'\(item)' is not name=weight") }
            let name = parts[0].trimmingCharacters(in: .whitespaces)
            let weightText = parts[1].trimmingCharacters(in: .whitespaces)
            guard let kind = ScenarioKind(rawValue: name) else {
                let known = ScenarioKind.allCases.filter { $0 != .mixed && $0 != .retention }.map(\.rawValue)
                    .joined(separator: ", ")
                throw fail("unknown scenario '\(name)' (expected one of: \(known))")
            }
            guard kind != .mixed else { throw fail("'mixed' cannot be part of a mix") }
            guard kind != .retention else {
                throw fail("'retention' cannot be part of a mix (it is Apple's HTTP call)")
            }
            guard !weights.contains(where: { $0.kind == kind }) else { throw fail("'\(name)' given twice") }
            guard let weight = Int(weightText), weight >= 0, weight <= 1_000_000 else {
                throw fail("weight of '\(name)' must be a whole number in 0...1000000, got '\(weightText)'")
            }
            weights.append((kind, weight))
        }
        guard weights.contains(where: { $0.weight > 0 }) else { throw fail("all weights are 0") }
        return MixSpec(weights: weights)
    }

    init(weights: [(kind: ScenarioKind, weight: Int)]) {
        self.weights = weights
        let divisor = weights.map(\.weight).reduce(0, Scenario.gcd)
        let reduced = weights.map { (kind: $0.kind, weight: $0.weight / max(1, divisor)) }
        let total = reduced.map(\.weight).reduce(0, +)
        var current = reduced.map { _ in 0 }
        var cycle: [ScenarioKind] = []
        cycle.reserveCapacity(total)
        for _ in 0..<total {
            var best = 0
            for i in reduced.indices {
                current[i] += reduced[i].weight
                if current[i] > current[best] { best = i }
            }
            current[best] -= total
            cycle.append(reduced[best].kind)
        }
        self.cycle = cycle
    }

    /// The `--mix` text of this spec.
    public var text: String { weights.map { "\($0.kind.rawValue)=\($0.weight)" }.joined(separator: ",") }
}

/// A scenario ready to run: its kind, the mix for `mixed`, and what it needs.
public struct Scenario: Sendable, Equatable {
    public let kind: ScenarioKind
    public let mix: MixSpec?

    /// - Throws: `invalidMix` when `mixed` has no mix, or another kind is given one.
    public init(kind: ScenarioKind, mix: MixSpec? = nil) throws(OfferLoadError) {
        if kind == .mixed && mix == nil {
            throw OfferLoadError(.invalidMix, context: "--mix", "the mixed scenario needs --mix, e.g. best=70,sign=30")
        }
        if kind != .mixed && mix != nil {
            throw OfferLoadError(.invalidMix, context: "--mix", "--mix only applies to the mixed scenario")
        }
        self.kind = kind
        self.mix = mix
    }

    /// The scenario's name as shown in reports (`mixed(best=70,sign=30)` for a mix).
    public var name: String { mix.map { "mixed(\($0.text))" } ?? kind.rawValue }

    /// The kinds whose requests this scenario sends.
    public var kinds: [ScenarioKind] {
        mix.map { m in m.weights.filter { $0.weight > 0 }.map(\.kind) } ?? [kind]
    }

    /// Everything to set up before the run.
    public var needs: SetupNeeds { kinds.reduce(into: SetupNeeds()) { $0.formUnion($1.needs) } }

    /// Whether the run redeems codes and must be followed by the invariant check.
    public var redeems: Bool { kinds.contains(where: \.redeems) }

    /// Checks `fixture` holds what the requests refer to and returns the request generator.
    ///
    /// A single-kind scenario whose requests repeat with a short period (`best` asks about every customer and
    /// product in turn, `sign` every customer and promotional offer) gets them made once, into a table: the harness
    /// then spends no CPU per request on building and encoding what it sent before (issue 15: its CPU must stay well
    /// below the gateway's).
    public func requests(_ fixture: ScenarioFixture) throws(OfferLoadError) -> @Sendable (Int) -> LoadRequest {
        for kind in kinds { try Self.check(kind, fixture) }
        let single = kind
        if mix == nil, let period = Self.period(single, fixture), (1...Self.tabledRequestsLimit).contains(period) {
            let table = (0..<period).map { Self.request(single, index: $0, fixture: fixture) }
            return { index in table[index % period] }
        }
        let cycle = mix?.cycle
        return { index in
            let k = cycle.map { $0[index % $0.count] } ?? single
            return Self.request(k, index: index, fixture: fixture)
        }
    }

    /// Requests kept in a table at most (a few hundred bytes each with their encoding: B5's 1,000 customers × 120
    /// promotional offers raised offer-load's peak RSS from 37 to 76 MB).
    static let tabledRequestsLimit = 250_000

    /// After how many indices `request(kind, index:, fixture:)` repeats itself; nil when it never does (codes
    /// redeemed once, fresh customers).
    static func period(_ kind: ScenarioKind, _ f: ScenarioFixture) -> Int? {
        switch kind {
        case .ping: 1
        case .best: f.customers.count * f.products.count
        case .sign: lcm(f.customers.count * f.promotionalOffers.count, f.signFormats.count)
        default: nil
        }
    }

    static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

    static func lcm(_ a: Int, _ b: Int) -> Int {
        guard a > 0, b > 0 else { return max(a, b) }
        return a / gcd(a, b) * b
    }

    static func check(_ kind: ScenarioKind, _ f: ScenarioFixture) throws(OfferLoadError) {
        func missing(_ what: String) -> OfferLoadError {
            OfferLoadError(.missingFixture, context: kind.rawValue, "the setup provided no \(what)")
        }
        switch kind {
        case .ping, .mixed: return
        case .best:
            if f.customers.isEmpty { throw missing("customers") }
            if f.products.isEmpty { throw missing("products") }
        case .sign:
            if f.customers.isEmpty { throw missing("customers") }
            if f.promotionalOffers.isEmpty { throw missing("promotional offers") }
            if f.signFormats.isEmpty { throw missing("signature formats") }
        case .redeemHot:
            if f.hotCode == nil { throw missing("custom code") }
        case .redeemOneTime:
            if f.oneTimeCodes.isEmpty { throw missing("one-time codes") }
        case .claim:
            if f.appleCampaignId == nil { throw missing("appleOneTime campaign") }
        case .retention:
            if f.retentionSubscribers.isEmpty { throw missing("retention subscribers") }
        }
    }

    /// Request `index` of a single kind (the fixture was checked).
    static func request(_ kind: ScenarioKind, index: Int, fixture f: ScenarioFixture) -> LoadRequest {
        switch kind {
        case .ping, .mixed:
            return LoadRequest(method: "system.ping", params: [:])
        case .best:
            let customer = f.customers[index % f.customers.count]
            let product = f.products[(index / f.customers.count) % f.products.count]
            return LoadRequest(
                method: "offers.best", params: ["customerId": .string(customer), "productId": .string(product)])
        case .sign:
            let customer = f.customers[index % f.customers.count]
            let offer = f.promotionalOffers[(index / f.customers.count) % f.promotionalOffers.count]
            let format = f.signFormats[index % f.signFormats.count]
            return LoadRequest(
                method: "offers.sign",
                params: [
                    "customerId": .string(customer), "productId": .string(offer.productId),
                    "offerId": .string(offer.offerId), "format": .string(format),
                ])
        case .redeemHot:
            return redeem(code: f.hotCode ?? "", index: index, f)
        case .redeemOneTime:
            return redeem(code: f.oneTimeCodes[index % f.oneTimeCodes.count], index: index, f)
        case .claim:
            return LoadRequest(
                method: "codes.claim",
                params: [
                    "campaignId": .string(f.appleCampaignId ?? ""), "customerId": .string(f.syntheticCustomer(index)),
                    "idempotencyKey": .string(f.idempotencyKey(index)),
                ])
        case .retention:
            // The body is signed before the run; the retention connection picks it by index.
            return LoadRequest(method: "retention", params: ["index": .int(index)])
        }
    }

    private static func redeem(code: String, index: Int, _ f: ScenarioFixture) -> LoadRequest {
        LoadRequest(
            method: "codes.redeem",
            params: [
                "code": .string(code), "customerId": .string(f.syntheticCustomer(index)),
                "idempotencyKey": .string(f.idempotencyKey(index)),
            ])
    }
}
