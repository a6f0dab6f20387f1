import Foundation
import JSONRPC
import OfferDomain

/// `offers.*`: eligibility, the best offer with its copy, and signatures for StoreKit (see `OfferService`).
enum OfferMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "offers.eligibility", access: .tenant) { ctx in
            let request = try ctx.params(OfferService.EligibilityRequest.self)
            let answer = try await ctx.services.offers.eligibility(request, tenant: try await ctx.tenant())
            return [
                "productId": .string(answer.productId),
                "offers": .array(
                    answer.verdicts.map { verdict in
                        [
                            "offerId": .string(verdict.offerId), "type": .string(verdict.type.rawValue),
                            "eligible": .bool(verdict.eligible),
                            "reasons": Wire.strings(verdict.reasons.map(\.rawValue)),
                        ]
                    }),
            ]
        },
        MethodSpec(
            name: "offers.best", access: .tenant,
            run: { ctx in
                let request = try ctx.params(plain: OfferService.BestRequest.self)
                return Wire.best(try await ctx.services.offers.best(request, tenant: try await ctx.tenant()))
            },
            now: { ctx in
                guard let tenant = try ctx.ownTenant() else { return nil }
                let request = try ctx.params(plain: OfferService.BestRequest.self)
                // stdio's one reader thread serves the whole connection: its decisions go to the decision thread.
                let onDecisionThread = ctx.rpc.connection.transport == .stdio
                return try ctx.services.offers.bestNow(request, tenant: tenant, onDecisionThread: onDecisionThread)?
                    .map(Wire.best)
            }),
        MethodSpec(
            name: "offers.sign", access: .tenant,
            run: { ctx in
                let request = try ctx.params(plain: OfferService.SignRequest.self)
                return Wire.signed(try await ctx.services.offers.sign(request, tenant: try await ctx.tenant()))
            },
            now: { ctx in
                let request = try ctx.params(plain: OfferService.SignRequest.self)
                guard let tenant = try ctx.ownTenant() else { return nil }
                return try ctx.services.offers.signNow(request, tenant: tenant)?.map(Wire.signed)
            }),
        MethodSpec(name: "offers.introEligibility", access: .tenant) { ctx in
            let request = try ctx.params(OfferService.IntroRequest.self)
            let verdict = try await ctx.services.offers.introEligibility(request, tenant: try await ctx.tenant())
            return [
                "allowIntroductoryOffer": .bool(verdict.allow), "compactJWS": .string(verdict.compactJWS),
                "productId": .string(verdict.productId),
            ]
        },
    ]
}
