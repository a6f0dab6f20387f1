import Foundation
import Metrics
import OfferDomain
import OfferStore

/// Offer codes for customers: validate (read-only), redeem (exactly once, within limits, through the campaign's
/// group commit), roll back. Validate and redeem decide with the same domain rule, `Campaign.refusal`, over the
/// same facts, so they always agree.
struct CodeService: Sendable {
    let repository: CampaignRepository
    let customers: CustomerService
    let caches: GatewayCaches
    let redemptions: RedemptionCoordinator
    let clock: @Sendable () -> Date
    /// `offergate_code_redemptions_total{outcome}`.
    let outcomes: Counter

    struct RedeemRequest: Decodable, Sendable {
        let code: String
        let customerId: String
        let idempotencyKey: String?
    }

    struct ValidateRequest: Decodable, Sendable {
        let code: String
        let customerId: String
        let at: Date?
    }

    struct RollbackRequest: Decodable, Sendable {
        let redemptionId: String
        let reason: String?
    }

    /// What `codes.validate` found: the campaign behind the code (nil for an unknown code) and the refusal, if any.
    struct Validation: Sendable {
        let code: String?
        let campaign: Campaign?
        let productId: String?
        let refusal: Refusal?

        enum Refusal: Sendable, Equatable {
            case unknownCode
            case refused(Campaign.Refusal)
        }
    }

    struct Rollback: Sendable {
        let redemptionId: String
        let alreadyRolledBack: Bool
    }

    /// Redeems, counting the outcome: `redeemed`, `replayed`, or the error's reason (a fixed set of snake_case codes).
    func redeem(_ request: RedeemRequest, tenant: TenantRecord) async throws -> RedemptionReceipt {
        do {
            let receipt = try await redeemOnce(request, tenant: tenant)
            outcomes.increment([receipt.replayed ? "replayed" : "redeemed"])
            return receipt
        } catch {
            outcomes.increment([renderedError(error).rpc.reason ?? "error"])
            throw error
        }
    }

    private func redeemOnce(_ request: RedeemRequest, tenant: TenantRecord) async throws -> RedemptionReceipt {
        let customerId = try Validate.customerId(request.customerId)
        let code = try Self.normalizedCode(request.code)
        let key = try request.idempotencyKey.map {
            try Validate.identifier($0, param: "params.idempotencyKey", maxBytes: 200)
        }
        let repository = repository
        guard
            let lookup = try await caches.customCodes.lookup(
                tenant: tenant.id, code: code, load: { try await repository.lookup(tenant: tenant.id, code: code) })
        else { throw GatewayError.unknownCode }
        let productId = try await offerProduct(lookup.record.campaign, tenant: tenant)
        // A stored outcome under `key` replays from inside the batch, whatever the customer's state is now.
        let eligible = try await isEligible(
            lookup.record.campaign, tenant: tenant, customerId: customerId, productId: productId, at: clock())
        return try await redemptions.redeem(
            tenant: tenant.id, lookup: lookup, productId: productId, customerId: customerId, eligible: eligible,
            idempotencyKey: key)
    }

    func validate(_ request: ValidateRequest, tenant: TenantRecord) async throws -> Validation {
        let customerId = try Validate.customerId(request.customerId)
        let at = request.at ?? clock()
        let unknown = Validation(code: nil, campaign: nil, productId: nil, refusal: .unknownCode)
        let code: String
        do {
            code = try Self.normalizedCode(request.code)
        } catch GatewayError.unknownCode {
            return unknown
        }
        guard let lookup = try await repository.lookup(tenant: tenant.id, code: code) else { return unknown }
        let campaign = lookup.record.campaign
        let productId = try await offerProduct(campaign, tenant: tenant)
        let eligible = try await isEligible(
            campaign, tenant: tenant, customerId: customerId, productId: productId, at: at)
        let usage = try await repository.usage(
            tenant: tenant.id, campaignId: campaign.id, customerId: customerId,
            oneTimeCode: lookup.oneTime ? code : nil)
        let facts = RedemptionFacts(
            at: at, customerEligible: eligible, oneTimeCodeUsed: usage.codeUsed, redeemed: lookup.record.redeemed,
            customerRedeemed: usage.customerRedeemed)
        return Validation(
            code: code, campaign: campaign, productId: productId, refusal: campaign.refusal(facts).map { .refused($0) })
    }

    func rollback(_ request: RollbackRequest, tenant: TenantRecord) async throws -> Rollback {
        let text = try Validate.uuid(request.redemptionId, param: "params.redemptionId")
        guard let id = UUID(uuidString: text) else {
            throw GatewayError.invalidParams(param: "params.redemptionId", message: "redemptionId must be a UUID")
        }
        if let reason = request.reason {
            _ = try Validate.identifier(reason, param: "params.reason", maxBytes: 500)
        }
        let already = try await repository.rollback(tenant: tenant.id, redemptionId: id, reason: request.reason)
        return Rollback(redemptionId: text, alreadyRolledBack: already)
    }

    /// The product of the campaign's offer.
    private func offerProduct(_ campaign: Campaign, tenant: TenantRecord) async throws -> String {
        guard let offer = try await caches.catalogs.catalog(tenant.id).offer(campaign.offerId) else {
            throw GatewayError.internal("campaign \(campaign.id) names an offer missing from the catalog")
        }
        return offer.productId
    }

    /// Whether the customer is in the campaign's eligibility at `at`; a campaign open to everyone needs no history.
    private func isEligible(
        _ campaign: Campaign, tenant: TenantRecord, customerId: String, productId: String, at: Date
    ) async throws -> Bool {
        if campaign.admitsEveryone { return true }
        let state = try await customers.groupState(
            tenant: tenant.id, customerId: customerId, productId: productId, at: at)
        return campaign.admits(state)
    }

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
            throw GatewayError.unknownCode
        }
    }
}
