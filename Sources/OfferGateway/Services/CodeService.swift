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
    let claims: ClaimCoordinator
    /// Signs a redemption's promotional offer (`sign`), the same signing path as `offers.sign`.
    let offers: OfferService
    let clock: @Sendable () -> Date
    /// `offergate_code_redemptions_total{outcome}`.
    let outcomes: Counter

    struct RedeemRequest: Decodable, Sendable {
        let code: String
        let customerId: String
        let idempotencyKey: String?
        /// `v1` or `jws`: also sign the granted promotional offer, bound to the redemption.
        let sign: String?
        let appAccountToken: String?
        let transactionId: String?
    }

    struct ClaimRequest: Decodable, Sendable {
        let campaignId: String
        let customerId: String
        let idempotencyKey: String?
    }

    /// A redemption, and its signature when one was asked for.
    struct Redeemed: Sendable {
        let receipt: RedemptionReceipt
        let signature: OfferService.SignedOffer?
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
    func redeem(_ request: RedeemRequest, tenant: TenantRecord) async throws -> Redeemed {
        do {
            let redeemed = try await redeemOnce(request, tenant: tenant)
            count(.success(redeemed))
            return redeemed
        } catch {
            count(.failure(error))
            throw error
        }
    }

    /// `codes.redeem` without a task (decision 011): when the custom code and the catalog are in memory, the
    /// campaign is open to everyone and nothing is to be signed, the request joins the campaign's batch from the
    /// transport's thread and is answered from the thread that committed the batch. Nil (nothing done, nothing
    /// counted) when something must be read first: `redeem` then answers, in the same order of checks.
    func redeemNow(_ request: RedeemRequest, tenant: TenantRecord) throws -> NowOrLater<Redeemed>? {
        let query: RedeemQuery
        let lookup: CodeLookup
        let offer: Offer
        do {
            query = try RedeemQuery(request)
            guard query.format == nil,
                let found = caches.customCodes.cachedLookup(tenant: tenant.id, code: query.code),
                found.record.campaign.admitsEveryone, let catalog = caches.catalogs.cachedSnapshot(tenant.id)
            else { return nil }
            // Counted only now: a declined request's `redeem` looks the code and the catalog up again and counts
            // those.
            caches.customCodes.recordHit()
            caches.catalogs.recordHit()
            lookup = found
            offer = try Self.grantedOffer(found.record, in: catalog.catalog)
        } catch {
            count(.failure(error))
            throw error
        }
        let (redemptions, counted) = (redemptions, count)
        return .later { reply in
            redemptions.redeem(
                tenant: tenant.id, lookup: lookup, productId: offer.productId, customerId: query.customerId,
                eligible: true, idempotencyKey: query.key
            ) { result in
                let redeemed = result.map { Redeemed(receipt: $0, signature: nil) }
                counted(redeemed)
                reply(redeemed)
            }
        }
    }

    /// Counts a redemption's outcome in `offergate_code_redemptions_total`.
    private func count(_ outcome: Result<Redeemed, any Error>) {
        switch outcome {
        case .success(let redeemed): outcomes.increment([redeemed.receipt.replayed ? "replayed" : "redeemed"])
        case .failure(let error): outcomes.increment([renderedError(error).rpc.reason ?? "error"])
        }
    }

    /// A `codes.redeem` request's params, checked (nothing read yet).
    private struct RedeemQuery: Sendable {
        let customerId: String
        let code: String
        let key: String?
        let format: IssuedSignature.Format?
        let token: String?
        let transactionId: String?

        init(_ request: RedeemRequest) throws {
            customerId = try Validate.customerId(request.customerId)
            code = try CodeService.normalizedCode(request.code)
            key = try request.idempotencyKey.map {
                try Validate.identifier($0, param: "params.idempotencyKey", maxBytes: 200)
            }
            format = try request.sign.map { try OfferService.format($0, param: "params.sign") }
            token = try request.appAccountToken.map { try Validate.uuid($0, param: "params.appAccountToken") }
            transactionId = try request.transactionId.map {
                try Validate.identifier($0, param: "params.transactionId", maxBytes: 100)
            }
            if format == nil, request.appAccountToken != nil || request.transactionId != nil {
                throw GatewayError.invalidParams(
                    param: request.appAccountToken != nil ? "params.appAccountToken" : "params.transactionId",
                    message: "appAccountToken and transactionId go with sign", reason: "missing_param")
            }
        }
    }

    /// Redeems a code; with `sign`, then signs the granted promotional offer for the redemption. Everything that
    /// could refuse the signature (its params, the offer's type, the signing key) is checked before the redemption,
    /// so a refused signature redeems nothing. A failure after the redemption committed (the ledger's database
    /// went away) is answered as the error: a retry with the idempotency key replays the redemption and signs it.
    private func redeemOnce(_ request: RedeemRequest, tenant: TenantRecord) async throws -> Redeemed {
        let query = try RedeemQuery(request)
        let (repository, code) = (repository, query.code)
        guard
            let lookup = try await caches.customCodes.lookup(
                tenant: tenant.id, code: code, load: { try await repository.lookup(tenant: tenant.id, code: code) })
        else { throw GatewayError.unknownCode }
        let campaign = lookup.record.campaign
        let offer = try await grantedOffer(lookup.record, tenant: tenant)
        if let format = query.format {
            guard offer.type == .promotional else {
                throw GatewayError.invalidParams(
                    param: "params.sign",
                    message: "the campaign grants the \(offer.type.rawValue) offer '\(offer.id)': only promotional "
                        + "offers are signed", reason: "offer_not_signable")
            }
            try await offers.requireSigner(format, tenant: tenant)
        }
        // A stored outcome under `key` replays from inside the batch, whatever the customer's state is now.
        let eligible = try await isEligible(
            campaign, tenant: tenant, customerId: query.customerId, productId: offer.productId, at: clock())
        let receipt = try await redemptions.redeem(
            tenant: tenant.id, lookup: lookup, productId: offer.productId, customerId: query.customerId,
            eligible: eligible, idempotencyKey: query.key)
        guard let format = query.format else { return Redeemed(receipt: receipt, signature: nil) }
        let signature = try await offers.sign(
            redemption: receipt, format: format, customerId: query.customerId, token: query.token,
            transactionId: query.transactionId, tenant: tenant)
        return Redeemed(receipt: receipt, signature: signature)
    }

    /// Hands the customer one of an appleOneTime campaign's codes (the same one again if they hold one), through
    /// the campaign's group commit, deciding windows, limits and eligibility as redemptions do.
    func claim(_ request: ClaimRequest, tenant: TenantRecord) async throws -> ClaimReceipt {
        let campaignId = try Validate.identifier(request.campaignId, param: "params.campaignId", maxBytes: 100)
        let customerId = try Validate.customerId(request.customerId)
        let key = try request.idempotencyKey.map {
            try Validate.identifier($0, param: "params.idempotencyKey", maxBytes: 200)
        }
        let repository = repository
        let record = try await caches.claimedCampaigns.campaign(tenant: tenant.id, campaignId: campaignId) {
            try await repository.find(tenant: tenant.id, campaignId: campaignId)
        }
        guard let record else {
            throw GatewayError.notFound(
                "no campaign '\(Validate.printable(campaignId))'", reason: "unknown_campaign")
        }
        let campaign = record.campaign
        guard campaign.kind.isClaimed else {
            throw GatewayError.invalidParams(
                param: "params.campaignId",
                message: "campaign '\(campaign.id)' is a \(campaign.kind.rawValue) campaign: its codes are redeemed "
                    + "with codes.redeem", reason: "not_an_apple_campaign")
        }
        let offer = try await grantedOffer(record, tenant: tenant)
        let eligible = try await isEligible(
            campaign, tenant: tenant, customerId: customerId, productId: offer.productId, at: clock())
        return try await claims.claim(
            tenant: tenant.id, campaign: campaign, productId: offer.productId, customerId: customerId,
            eligible: eligible, idempotencyKey: key)
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
        let productId = try await grantedOffer(lookup.record, tenant: tenant).productId
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

    /// The campaign's offer (its product fixed at creation), as the catalog holds it now.
    private func grantedOffer(_ record: CampaignRecord, tenant: TenantRecord) async throws -> Offer {
        try Self.grantedOffer(record, in: try await caches.catalogs.catalog(tenant.id))
    }

    /// The campaign's offer in `catalog`.
    private static func grantedOffer(_ record: CampaignRecord, in catalog: Catalog) throws -> Offer {
        let campaign = record.campaign
        guard let offer = catalog.offer(campaign.offerId, product: record.productId) else {
            throw GatewayError.internal("campaign \(campaign.id) names an offer missing from the catalog")
        }
        return offer
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
