import Foundation
import JSONRPC
import Testing

@testable import OfferLoadKit

struct RedeemParams: Decodable, Equatable {
    let code: String
    let customerId: String
    let idempotencyKey: String
}

func decode<T: Decodable>(_ type: T.Type, _ params: JSONObject) throws -> T {
    try JSONValueDecoder().decode(T.self, from: .object(params))
}

@Suite struct ScenarioTests {
    /// `best` repeats every customer × product: its requests come from a table made once, and must be exactly the
    /// ones made per index, their params encoded as the params say.
    @Test func repeatingRequestsComeFromATableEqualToThePerIndexRequests() throws {
        let fixture = ScenarioFixture(runTag: "t", customers: ["c1", "c2", "c\"3"], products: ["p0", "p1"])
        let best = try Scenario(kind: .best).requests(fixture)
        #expect(Scenario.period(.best, fixture) == 6)
        for index in 0..<20 {
            let request = best(index)
            #expect(request == Scenario.request(.best, index: index, fixture: fixture))
            #expect(request.wireParams?.expanded == .object(request.params))
        }
        #expect(best(0).params["customerId"] == "c1" && best(3).params["productId"] == "p1")
        #expect(best(2).params["customerId"] == #"c"3"#)
        // Nothing to send for ping: no params member at all.
        #expect(try Scenario(kind: .ping).requests(fixture)(7).wireParams == nil)
        // A scenario that never repeats is not tabled.
        #expect(Scenario.period(.redeemOneTime, fixture) == nil)
    }

    /// `sign` repeats every customer × promotional offer and, independently, every format: the table is as long as
    /// both cycles together (3 × 1 customers and offers, 2 formats: 6, not 3).
    @Test func signRequestsComeFromATableOfBothCycles() throws {
        var fixture = ScenarioFixture(runTag: "t", customers: ["c1", "c2", "c3"], products: ["p0"])
        fixture.promotionalOffers = [OfferRef(productId: "p0", offerId: "o1")]
        fixture.signFormats = ["v1", "jws"]
        #expect(Scenario.period(.sign, fixture) == 6)
        let sign = try Scenario(kind: .sign).requests(fixture)
        for index in 0..<25 {
            #expect(sign(index) == Scenario.request(.sign, index: index, fixture: fixture))
        }
        #expect(sign(3).params["format"] == "jws" && sign(3).params["customerId"] == "c1")
        #expect(Scenario.lcm(4, 6) == 12 && Scenario.lcm(5, 1) == 5 && Scenario.lcm(0, 3) == 3)
    }

    @Test func mixParsesWeightsAndBuildsAnExactCycle() throws {
        let mix = try MixSpec.parse("best=70, sign=20 ,redeem-hot=10")
        #expect(mix.weights.map(\.kind) == [.best, .sign, .redeemHot])
        #expect(mix.weights.map(\.weight) == [70, 20, 10])
        #expect(mix.cycle.count == 10)  // reduced by the gcd 10
        #expect(mix.cycle.filter { $0 == .best }.count == 7)
        #expect(mix.cycle.filter { $0 == .sign }.count == 2)
        #expect(mix.cycle.filter { $0 == .redeemHot }.count == 1)
        // Spread, not clumped: never more than 3 best in a row within the cycle.
        var run = 0
        var longest = 0
        for k in mix.cycle + mix.cycle {
            run = k == .best ? run + 1 : 0
            longest = max(longest, run)
        }
        #expect(longest <= 3)
        #expect(mix.text == "best=70,sign=20,redeem-hot=10")
        let withZero = try MixSpec.parse("ping=3,best=0")
        #expect(withZero.cycle == [.ping])
    }

    @Test(arguments: [
        ("", "empty"),
        ("best", "not name=weight"),
        ("best=", "whole number"),
        ("best=x", "whole number"),
        ("best=-1", "whole number"),
        ("best=1.5", "whole number"),
        ("best=2000000", "whole number"),
        ("nope=1", "unknown scenario 'nope'"),
        ("mixed=1", "cannot be part of a mix"),
        ("retention=1", "cannot be part of a mix"),
        ("best=1,best=2", "given twice"),
        ("best=0,sign=0", "all weights are 0"),
        ("best=1,,sign=1", "empty item"),
        ("best=1=2", "not name=weight"),
    ])
    func invalidMixesAreRejected(text: String, message: String) {
        do {
            _ = try MixSpec.parse(text)
            Issue.record("'\(text)' was accepted")
        } catch {
            #expect(error.code == .invalidMix)
            #expect(error.context == "--mix")
            #expect(error.message.contains(message), "\(error.message)")
        }
    }

    @Test func scenarioNamesAndMixRules() throws {
        #expect(try ScenarioKind.named("redeem-onetime") == .redeemOneTime)
        #expect(throws: OfferLoadError.self) { try ScenarioKind.named("redeem") }
        #expect(throws: OfferLoadError.self) { try Scenario(kind: .mixed) }
        #expect(throws: OfferLoadError.self) { try Scenario(kind: .ping, mix: MixSpec.parse("ping=1")) }
        let mixed = try Scenario(kind: .mixed, mix: MixSpec.parse("best=1,redeem-onetime=1"))
        #expect(mixed.name == "mixed(best=1,redeem-onetime=1)")
        #expect(mixed.needs == [.tenant, .catalog, .customersWithHistories, .oneTimeCodeCampaign])
        #expect(mixed.redeems)
        #expect(try Scenario(kind: .sign).needs.contains(.signingKey))
        #expect(try !Scenario(kind: .best).redeems)
        #expect(try Scenario(kind: .ping).needs.isEmpty)
    }

    @Test func redeemHotUsesOneCodeUniqueCustomersAndKeys() throws {
        let fixture = ScenarioFixture(runTag: "r1", hotCode: "SPRING \"25\"", hotCampaignId: "spring")
        let next = try Scenario(kind: .redeemHot).requests(fixture)
        let requests = (0..<100).map(next)
        #expect(requests.allSatisfy { $0.method == "codes.redeem" })
        let params = try requests.map { try decode(RedeemParams.self, $0.params) }
        #expect(params.allSatisfy { $0.code == "SPRING \"25\"" })
        #expect(Set(params.map(\.customerId)).count == 100)
        #expect(Set(params.map(\.idempotencyKey)).count == 100)
        #expect(params[7] == RedeemParams(code: "SPRING \"25\"", customerId: "r1-c7", idempotencyKey: "r1-k7"))
    }

    @Test func redeemOneTimeCyclesThroughThePool() throws {
        let fixture = ScenarioFixture(runTag: "t", oneTimeCodes: ["A", "B", "C"], oneTimeCampaignId: "c")
        let next = try Scenario(kind: .redeemOneTime).requests(fixture)
        let codes = try (0..<6).map { try decode(RedeemParams.self, next($0).params).code }
        #expect(codes == ["A", "B", "C", "A", "B", "C"])
    }

    @Test func bestAndSignCoverCustomersAndOffers() throws {
        struct Best: Decodable, Equatable {
            let customerId: String
            let productId: String
        }
        struct Sign: Decodable, Equatable {
            let customerId: String
            let productId: String
            let offerId: String
            let format: String
        }
        let fixture = ScenarioFixture(
            runTag: "t", customers: ["c1", "c2"], products: ["p1", "p2", "p3"],
            promotionalOffers: [OfferRef(productId: "p1", offerId: "o1")])
        let best = try Scenario(kind: .best).requests(fixture)
        let pairs = try (0..<6).map { try decode(Best.self, best($0).params) }
        #expect(Set(pairs.map { "\($0.customerId)/\($0.productId)" }).count == 6)  // every pair once
        #expect(best(0).method == "offers.best")
        let sign = try Scenario(kind: .sign).requests(fixture)
        #expect(
            try decode(Sign.self, sign(0).params)
                == Sign(
                    customerId: "c1", productId: "p1", offerId: "o1",
                    format: "v1"))
        #expect(try decode(Sign.self, sign(1).params).format == "jws")
        let ping = try Scenario(kind: .ping).requests(ScenarioFixture(runTag: "t"))
        #expect(ping(3) == LoadRequest(method: "system.ping", params: [:]))
    }

    @Test func mixedFollowsTheCycle() throws {
        let fixture = ScenarioFixture(runTag: "t", customers: ["c"], products: ["p"], hotCode: "HOT")
        let scenario = try Scenario(kind: .mixed, mix: MixSpec.parse("best=3,redeem-hot=1,ping=0"))
        let next = try scenario.requests(fixture)
        let methods = (0..<400).map { next($0).method }
        #expect(methods.filter { $0 == "offers.best" }.count == 300)
        #expect(methods.filter { $0 == "codes.redeem" }.count == 100)
    }

    @Test func missingFixtureDataIsReported() {
        let empty = ScenarioFixture(runTag: "t")
        for kind in [ScenarioKind.best, .sign, .redeemHot, .redeemOneTime] {
            do {
                _ = try Scenario(kind: kind).requests(empty)
                Issue.record("\(kind) accepted an empty fixture")
            } catch {
                #expect(error.code == .missingFixture)
                #expect(error.context == kind.rawValue)
            }
        }
    }

    @Test func paramsGoOutEscaped() throws {
        let text = String(decoding: JSONSerializer.serialize(.object(["k\"": "a\\b\n\u{1}é\t"])), as: UTF8.self)
        #expect(text == #"{"k\"":"a\\b\n\u0001é\t"}"#)
        let decoded = try JSONDecoder().decode([String: String].self, from: Data(text.utf8))
        #expect(decoded == ["k\"": "a\\b\n\u{1}é\t"])
    }
}
