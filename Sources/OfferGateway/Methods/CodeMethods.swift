import Foundation
import JSONRPC
import OfferDomain
import OfferStore

/// `codes.*` (tenant methods): validate, redeem and roll back offer codes. Redemptions go through the gateway's
/// `RedemptionCoordinator` (group commit per campaign); see docs/codes.md.
enum CodeMethods {
    struct RedeemParams: Decodable {
        let code: String
        let customerId: String
        let idempotencyKey: String?
    }
    struct ValidateParams: Decodable {
        let code: String
        let customerId: String
        let at: Date?
    }
    struct RollbackParams: Decodable {
        let redemptionId: String
        let reason: String?
    }

    static let all: [MethodSpec] = [
        MethodSpec(name: "codes.redeem", access: .tenant) { ctx in
            let params = try ctx.params(RedeemParams.self)
            let tenant = try await ctx.tenant()
            let customerId = try Validate.customerId(params.customerId)
            let code = try normalizedCode(params.code)
            let key = try params.idempotencyKey.map {
                try Validate.identifier($0, param: "params.idempotencyKey", maxBytes: 200)
            }
            let gateway = ctx.gateway
            let repository = gateway.database.campaigns
            // A retried idempotency key needs no query of its own here: the redemption batch reads the stored
            // outcomes under the campaign lock and replays (or reports a conflict) from there.
            let replay: @Sendable () async throws -> JSONValue? = {
                guard let key, let record = try await repository.idempotencyRecord(tenant: tenant.id, key: key) else {
                    return nil
                }
                guard record.requestHash == RedemptionCoordinator.requestHash(code: code, customerId: customerId) else {
                    throw RedemptionCoordinator.keyConflict()
                }
                guard let stored = try? JSONParsing.parse(record.responseJSON) else {
                    throw GatewayError.internal("stored idempotency outcome is not JSON")
                }
                return RedemptionCoordinator.with(stored, replayed: true)
            }
            guard let lookup = try await gateway.redemptions.lookup(tenant: tenant.id, code: code) else {
                throw unknownCode()
            }
            let campaign = lookup.record.campaign
            let catalog = try await gateway.catalogs.catalog(tenant.id)
            guard let offer = catalog.offer(campaign.offerId) else {
                throw GatewayError.internal("campaign \(campaign.id) names an offer missing from the catalog")
            }
            if campaign.eligibility != Set(CampaignAudience.allCases) {
                let state = try await groupState(
                    ctx, tenant: tenant, customerId: customerId, offer: offer, at: gateway.now())
                guard campaign.admits(state) else {
                    // The customer's state may have changed since a success stored under this key: replay it.
                    if let replayed = try await replay() { return replayed }
                    throw RedemptionCoordinator.refusalError(.notInCampaignEligibility)
                }
            }
            return try await gateway.redemptions.redeem(
                tenant: tenant.id, lookup: lookup, productId: offer.productId, customerId: customerId,
                idempotencyKey: key)
        },
        MethodSpec(name: "codes.validate", access: .tenant) { ctx in
            let params = try ctx.params(ValidateParams.self)
            let tenant = try await ctx.tenant()
            let customerId = try Validate.customerId(params.customerId)
            let at = params.at ?? ctx.gateway.now()
            let code: String
            do {
                code = try normalizedCode(params.code)
            } catch GatewayError.code {
                return ["valid": false, "reason": "unknown_code"]
            }
            let repository = ctx.gateway.database.campaigns
            guard let lookup = try await repository.lookup(tenant: tenant.id, code: code) else {
                return ["valid": false, "reason": "unknown_code"]
            }
            let record = lookup.record
            let campaign = record.campaign
            let catalog = try await ctx.gateway.catalogs.catalog(tenant.id)
            guard let offer = catalog.offer(campaign.offerId) else {
                throw GatewayError.internal("campaign \(campaign.id) names an offer missing from the catalog")
            }
            let state = try await groupState(ctx, tenant: tenant, customerId: customerId, offer: offer, at: at)
            let usage = try await repository.usage(
                tenant: tenant.id, campaignId: campaign.id, customerId: customerId,
                oneTimeCode: lookup.oneTime ? code : nil)
            let refusal =
                campaign.refusal(
                    at: at, customerState: state, redeemed: record.redeemed, customerRedeemed: usage.customerRedeemed)
                ?? (usage.codeUsed ? .codeExhausted : nil)
            var result: JSONObject = [
                "valid": .bool(refusal == nil), "campaignId": .string(campaign.id),
                "offerId": .string(campaign.offerId),
                "productId": .string(offer.productId), "code": .string(code),
            ]
            if let refusal {
                result["reason"] = .string(refusal.rawValue)
                result["errorCode"] = .int(refusal.rpcCode)
            }
            return .object(result)
        },
        MethodSpec(name: "codes.rollback", access: .tenant) { ctx in
            let params = try ctx.params(RollbackParams.self)
            let tenant = try await ctx.tenant()
            let text = try Validate.uuid(params.redemptionId, param: "params.redemptionId")
            guard let id = UUID(uuidString: text) else {
                throw GatewayError.invalidParams(param: "params.redemptionId", message: "redemptionId must be a UUID")
            }
            if let reason = params.reason {
                _ = try Validate.identifier(reason, param: "params.reason", maxBytes: 500)
            }
            let already = try await ctx.gateway.database.campaigns.rollback(
                tenant: tenant.id, redemptionId: id, reason: params.reason)
            return ["redemptionId": .string(text), "rolledBack": true, "alreadyRolledBack": .bool(already)]
        },
    ]

    /// A code as typed, normalised. An empty code is an invalid param; one with characters no code can have is an
    /// unknown code (-32040), so apps handle one error for "no such code".
    static func normalizedCode(_ raw: String) throws -> String {
        do throws(OfferDomainError) {
            return try CodeNormalizer.normalize(raw)
        } catch {
            if raw.unicodeScalars.allSatisfy({ $0 == "-" || $0.properties.isWhitespace }) {
                throw GatewayError.invalidParams(
                    param: "params.code", message: error.message, reason: error.code.rawValue)
            }
            throw unknownCode()
        }
    }

    static func unknownCode() -> GatewayError {
        .code(-32040, "unknown code", reason: "unknown_code")
    }

    /// The customer's state in the group of the offer's product, from their recorded history.
    static func groupState(_ ctx: MethodContext, tenant: TenantRecord, customerId: String, offer: Offer, at: Date)
        async throws -> GroupState
    {
        let (catalog, history) = try await CustomerMethods.loadHistory(
            ctx, tenant: tenant, customerId: customerId, at: at)
        guard let groupId = catalog.groupId(ofProduct: offer.productId) else { return .never }
        return history.group(groupId).state
    }
}
