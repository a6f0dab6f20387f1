import Foundation
import JSONRPC
import OfferCrypto
import OfferDomain
import OfferStore

// The API's JSON shapes of the services' results, shared by every method (and by the HTTP routes, which send the
// same objects). Nothing here decides anything.

enum Wire {
    /// An instant as RFC 3339 text, or null.
    static func date(_ value: Date?) -> JSONValue {
        value.flatMap { RFC3339.format($0) }.map { .string($0) } ?? .null
    }

    static func strings(_ values: [String]) -> JSONValue {
        .array(values.map { .string($0) })
    }

    /// A campaign as the admin methods show it, in its state at `at`.
    static func campaign(_ record: CampaignRecord, at: Date) -> JSONObject {
        let c = record.campaign
        return [
            "campaignId": .string(c.id), "offerId": .string(c.offerId), "productId": .string(record.productId),
            "kind": .string(c.kind.rawValue),
            "code": c.code.map { .string($0) } ?? .null,
            "totalLimit": c.limits.totalLimit.map { .int($0) } ?? .null,
            "perCustomerLimit": .int(c.limits.perCustomerLimit), "startsAt": date(c.startsAt),
            "expiresAt": date(c.expiresAt), "eligibility": strings(c.eligibility.sorted().map(\.rawValue)),
            "state": .string(c.state(at: at).rawValue), "deactivatedAt": date(c.deactivatedAt),
            "redeemed": .int(record.redeemed), "rolledBack": .int(record.rolledBack),
            "codesGenerated": .int(record.codesGenerated), "createdAt": date(record.createdAt),
            "appleReferenceName": c.appleReferenceName.map { .string($0) } ?? .null,
        ]
    }

    /// A customer's state in one group.
    static func group(_ group: SubscriptionGroup, _ h: GroupHistory) -> JSONValue {
        [
            "groupId": .string(group.id), "state": .string(h.state.rawValue),
            "autoRenew": h.autoRenew.map { .bool($0) } ?? .null,
            "activeProductId": h.activeProductId.map { .string($0) } ?? .null,
            "firstPurchase": date(h.firstPurchaseDate), "lastExpiry": date(h.lastExpiresDate),
            "lapsedAt": date(h.lapsedAt), "paidMonths": .int(h.paidMonths),
            "introOfferUsed": .bool(h.introOfferUsed),
            "winBackRedemptions": .array(
                h.winBackRedemptions.map {
                    ["offerId": .string($0.offerId), "startedAt": date($0.startedAt), "endedAt": date($0.endedAt)]
                }),
            "source": h.source.map { .string($0.rawValue) } ?? .null,
            "environment": h.environment.map { .string($0.rawValue) } ?? .null,
            "autoRenewProductId": h.autoRenewProductId.map { .string($0) } ?? .null,
            "eligibleWinBackOfferIds": h.appleWinBackOfferIds.map { .array($0.map { .string($0) }) } ?? .null,
            "billingPlan": h.billingPlan.map { .string($0.rawValue) } ?? .null,
        ]
    }

    /// A tenant as `tenants.list` and `tenants.update` show it.
    static func tenant(_ tenant: TenantRecord) -> JSONValue {
        [
            "slug": .string(tenant.slug), "bundleId": .string(tenant.bundleId),
            "createdAt": date(tenant.createdAt), "name": tenant.name.map { .string($0) } ?? .null,
            "appAppleId": tenant.appAppleId.map { .int(Int($0)) } ?? .null, "allowSandbox": .bool(tenant.allowSandbox),
            "allowXcode": .bool(tenant.allowXcode),
        ]
    }

    /// An `offers.best` answer, encoded once per answer (remembered answers are sent as these bytes again).
    /// `appstore.notification`'s result, also the body of `POST /v1/apple/{tenant}/notifications`.
    static func notification(_ result: AppleDataService.NotificationResult) -> JSONValue {
        [
            "notificationUUID": .string(result.notificationUUID.uuidString.lowercased()),
            "notificationType": .string(result.notificationType),
            "subtype": result.subtype.map { .string($0) } ?? .null,
            "environment": .string(result.environment.rawValue),
            "customerId": result.customerId.map { .string($0) } ?? .null,
            "applied": .bool(result.applied), "duplicate": .bool(result.duplicate),
        ]
    }

    static func best(_ answer: BestOfferAnswer) -> JSONValue {
        answer.rendered {
            // Written straight to bytes: building a `JSONValue` of every considered offer first was a tenth of a
            // first answer's CPU (docs/perf/README.md). The same members in the same order as before.
            let result = answer.result
            // ~110 bytes per considered offer and ~250 for the winner and the frame (B8's answers: 1.17 KB with 10
            // offers). Remembered answers keep their buffer, so it is sized near the answer, not doubled past it.
            return .encoded(
                EncodedJSON(capacity: 320 + 128 * result.considered.count) { out in
                    if let winner = result.winner {
                        out.object("offer") { offer in
                            offer.string("offerId", winner.offer.id)
                            offer.string("type", winner.offer.type.rawValue)
                            offer.string("productId", winner.product.id)
                            offer.string("paymentMode", winner.offer.paymentMode.rawValue)
                            offer.string("period", winner.offer.period.iso8601)
                            offer.int("periodCount", winner.offer.periodCount)
                            offer.string("displayText", answer.displayText ?? "")
                            if let price = winner.offer.price {
                                offer.string("price", price.decimalString)
                                offer.string("currency", price.currency)
                            }
                        }
                    } else {
                        out.null("offer")
                    }
                    out.array("considered") { considered in
                        // Read in place: a `for candidate in` copy of each considered offer retains a dozen strings.
                        result.considered.withUnsafeBufferPointer { candidates in
                            for index in candidates.indices {
                                considered.object { c in
                                    c.string("offerId", candidates[index].offer.id)
                                    c.string("type", candidates[index].offer.type.rawValue)
                                    c.string("productId", candidates[index].product.id)
                                    c.bool("eligible", candidates[index].verdict.eligible)
                                    c.array("reasons") { reasons in
                                        for reason in candidates[index].verdict.reasons {
                                            reasons.string(reason.rawValue)
                                        }
                                    }
                                    if let rank = candidates[index].rank { c.int("rank", rank) } else { c.null("rank") }
                                }
                            }
                        }
                    }
                })
        }
    }

    static func signed(_ signed: OfferService.SignedOffer) -> JSONValue {
        switch signed {
        case .v1(let keyId, let nonce, let timestamp, let signature, let offerId, let productId, let appAccountToken):
            return [
                "format": "v1", "keyId": .string(keyId), "nonce": .string(nonce),
                "timestamp": .number(JSONNumber(timestamp)), "signature": .string(signature),
                "offerId": .string(offerId), "productId": .string(productId),
                "appAccountToken": .string(appAccountToken),
            ]
        case .jws(let jws, let keyId, let nonce, let offerId, let productId):
            return [
                "format": "jws", "compactJWS": .string(jws), "offerId": .string(offerId),
                "productId": .string(productId), "keyId": .string(keyId), "nonce": .string(nonce),
            ]
        }
    }

    /// A redemption, with its signature when `codes.redeem` was asked to sign.
    static func receipt(_ receipt: RedemptionReceipt, signature: OfferService.SignedOffer?) -> JSONValue {
        guard var object = Wire.receipt(receipt).objectValue else { return Wire.receipt(receipt) }
        if let signature { object["signature"] = signed(signature) }
        return .object(object)
    }

    /// A claimed code (`codes.claim`). The code is a secret: this object goes to the client only.
    static func claim(_ claim: ClaimReceipt) -> JSONValue {
        [
            "claimId": .string(claim.claimId), "code": .string(claim.code), "campaignId": .string(claim.campaignId),
            "offerId": .string(claim.offerId), "productId": .string(claim.productId), "replayed": .bool(claim.replayed),
        ]
    }

    static func receipt(_ receipt: RedemptionReceipt) -> JSONValue {
        [
            "redemptionId": .string(receipt.redemptionId), "campaignId": .string(receipt.campaignId),
            "offerId": .string(receipt.offerId), "productId": .string(receipt.productId),
            "replayed": .bool(receipt.replayed),
        ]
    }

    static func validation(_ validation: CodeService.Validation) -> JSONValue {
        guard let campaign = validation.campaign, let code = validation.code, let productId = validation.productId
        else { return ["valid": false, "reason": "unknown_code"] }
        var result: JSONObject = [
            "valid": .bool(validation.refusal == nil), "campaignId": .string(campaign.id),
            "offerId": .string(campaign.offerId), "productId": .string(productId), "code": .string(code),
        ]
        if case .refused(let refusal) = validation.refusal {
            result["reason"] = .string(refusal.rawValue)
            result["errorCode"] = .int(GatewayError.refused(refusal).rpcError.code)
        }
        return .object(result)
    }

    static func catalogChange(_ change: CatalogService.Change, tenant: TenantRecord) -> JSONValue {
        let input = change.input
        return [
            "tenant": .string(tenant.slug),
            "imported": [
                "groups": .int(input.groups.count), "products": .int(input.products.count),
                "offers": .int(input.offers.count),
            ],
            "groups": strings(input.groups.map(\.id)), "products": strings(input.products.map(\.id)),
            "offers": strings(input.offers.map(\.id)),
            "skipped": .array(change.skipped.map { ["path": .string($0.path), "reason": .string($0.reason)] }),
        ]
    }
}

// MARK: The offer funnel

extension Wire {
    /// The funnel stages as `analytics.funnel` names them, in funnel order (the contract's eight, then the other
    /// paywall events).
    static let funnelStages: [(key: String, stage: FunnelStage)] = [
        ("offered", .offered), ("impressions", .impression), ("taps", .tap), ("signed", .signed),
        ("redeemed", .redeemed), ("claimed", .claimed), ("purchased", .purchased), ("renewed", .renewed),
        ("dismissals", .dismiss), ("purchasesStarted", .purchaseStarted), ("purchasesFailed", .purchaseFailed),
    ]

    static func funnelCounts(_ counts: FunnelService.Counts) -> JSONObject {
        var object: JSONObject = [:]
        for (key, stage) in funnelStages { object[key] = .int(counts[stage]) }
        return object
    }

    static func funnel(_ funnel: FunnelService.Funnel) -> JSONValue {
        [
            "bucket": .string(funnel.bucket.rawValue), "from": date(funnel.from), "to": date(funnel.to),
            "buckets": .array(
                funnel.buckets.map { bucket in
                    var object = funnelCounts(bucket.counts)
                    object["start"] = date(bucket.start)
                    return .object(object)
                }),
            "totals": .object(funnelCounts(funnel.totals)),
        ]
    }
}
