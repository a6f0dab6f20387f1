import Foundation
import OfferCrypto
import OfferDomain
import OfferStore

/// Offer-code campaigns (admin): their definition, their one-time codes and their counters.
struct CampaignService: Sendable {
    let repository: CampaignRepository
    let caches: GatewayCaches
    let clock: @Sendable () -> Date
    let logger: Logger

    /// Most codes one `campaigns.generateCodes` call makes.
    static let maxGenerate = 5_000_000
    /// Counts from which progress is reported (one report per pipelined round of 80,000 codes).
    static let progressThreshold = 50_000

    struct CreateRequest: Decodable, Sendable {
        let campaignId: String
        let offerId: String
        /// The offer's product: needed only when several products have an offer with `offerId`.
        let productId: String?
        let kind: String
        let code: String?
        let totalLimit: Int?
        let perCustomerLimit: Int?
        let startsAt: Date?
        let expiresAt: Date?
        let eligibility: [String]?
        let appleReferenceName: String?
    }

    struct ImportRequest: Decodable, Sendable {
        let campaignId: String
        let codes: [String]
    }

    /// Most codes one `campaigns.importCodes` call takes (offerctl sends a file in calls of this size).
    static let maxImport = 10_000

    struct CampaignRequest: Decodable, Sendable {
        let campaignId: String
    }

    struct GenerateRequest: Decodable, Sendable {
        let campaignId: String
        let count: Int
        let pattern: String?
    }

    struct CodesRequest: Decodable, Sendable {
        let campaignId: String
        let after: String?
        let limit: Int?
    }

    /// A created campaign, with Apple's caps it exceeds (warnings, not failures).
    struct Created: Sendable {
        let record: CampaignRecord
        let warnings: [String]
    }

    /// One page of a campaign's codes; `next` is the `after` of the next page (nil on the last).
    struct CodesPage: Sendable {
        let campaignId: String
        let codes: [CodeListing]
        let next: String?
    }

    func create(_ request: CreateRequest, tenant: TenantRecord) async throws -> Created {
        let campaignId = try Validate.identifier(request.campaignId, param: "params.campaignId", maxBytes: 100)
        let offerId = try Validate.identifier(request.offerId, param: "params.offerId")
        let productId = try request.productId.map { try Validate.identifier($0, param: "params.productId") }
        guard let kind = CampaignKind(rawValue: request.kind) else {
            throw GatewayError.invalidParams(
                param: "params.kind", message: "kind must be oneTime, custom or appleOneTime")
        }
        var eligibility = Set(CampaignAudience.allCases)
        if let names = request.eligibility {
            eligibility = []
            for (index, name) in names.enumerated() {
                guard let audience = CampaignAudience(rawValue: name) else {
                    throw GatewayError.invalidParams(
                        param: "params.eligibility[\(index)]", message: "eligibility takes new, existing, expired")
                }
                eligibility.insert(audience)
            }
        }
        let campaign: Campaign
        do throws(OfferDomainError) {
            campaign = try Campaign(
                id: campaignId, offerId: offerId, kind: kind, code: request.code, totalLimit: request.totalLimit,
                perCustomerLimit: request.perCustomerLimit ?? 1, startsAt: request.startsAt,
                expiresAt: request.expiresAt, eligibility: eligibility, appleReferenceName: request.appleReferenceName)
        } catch {
            throw GatewayError(error, paramPrefix: "params")
        }
        let offer = try CatalogService.offer(
            offerId, product: productId, in: try await caches.catalogs.catalog(tenant.id))
        // Apple's one-time codes redeem an offer code configured in App Store Connect.
        if kind == .appleOneTime && offer.type != .code {
            throw GatewayError.invalidParams(
                param: "params.offerId",
                message: "an appleOneTime campaign grants a code offer; '\(offer.id)' is \(offer.type.rawValue)",
                reason: "not_a_code_offer")
        }
        let record = try await repository.create(tenant: tenant.id, campaign, productId: offer.productId)
        logger.info("campaign created", ["tenant": tenant.slug, "campaign": campaignId])
        return Created(record: record, warnings: campaign.appleCapWarnings(createdAt: record.createdAt))
    }

    /// Makes `count` new one-time codes; for counts from `progressThreshold`, `progress` hears the running total
    /// after each stored round.
    func generateCodes(
        _ request: GenerateRequest, tenant: TenantRecord, progress: @escaping @Sendable (Int) -> Void
    ) async throws -> Int {
        let campaignId = try Validate.identifier(request.campaignId, param: "params.campaignId", maxBytes: 100)
        guard (1...Self.maxGenerate).contains(request.count) else {
            throw GatewayError.invalidParams(param: "params.count", message: "count must be 1-\(Self.maxGenerate)")
        }
        let generator: CodeGenerator
        do throws(OfferDomainError) {
            generator = try CodeGenerator(pattern: request.pattern)
        } catch {
            throw GatewayError(error, paramPrefix: "params")
        }
        // Keep the space at least 10x larger than the request, so collisions stay rare and retries cheap.
        guard generator.capacity >= Double(request.count) * 10 else {
            throw GatewayError.invalidParams(
                param: "params.pattern", message: "the pattern has too few # for \(request.count) codes",
                reason: "pattern_too_small")
        }
        let generated = try await repository.generateCodes(
            tenant: tenant.id, campaignId: campaignId, count: request.count,
            makeCodes: { n in
                var random = SecureRandomGenerator()
                return generator.generateNormalized(count: n, using: &random)
            },
            progress: { made in if request.count >= Self.progressThreshold { progress(made) } })
        logger.info("codes generated", ["tenant": tenant.slug, "campaign": campaignId, "count": String(generated)])
        return generated
    }

    /// Stores Apple's codes for an appleOneTime campaign. Every code must be valid (else -32602 naming it by index,
    /// never by value, and nothing is stored); codes the tenant holds already, or repeated in the call, count as
    /// duplicates.
    func importCodes(_ request: ImportRequest, tenant: TenantRecord) async throws -> (imported: Int, duplicates: Int) {
        let campaignId = try Validate.identifier(request.campaignId, param: "params.campaignId", maxBytes: 100)
        guard (1...Self.maxImport).contains(request.codes.count) else {
            throw GatewayError.invalidParams(
                param: "params.codes", message: "codes takes 1-\(Self.maxImport) codes per call", reason: "too_many")
        }
        var codes: [String] = []
        codes.reserveCapacity(request.codes.count)
        for (index, raw) in request.codes.enumerated() {
            do throws(OfferDomainError) {
                codes.append(try CodeNormalizer.normalize(raw, field: "codes[\(index)]"))
            } catch {
                throw GatewayError(error, paramPrefix: "params")
            }
        }
        let result: (imported: Int, duplicates: Int)
        do {
            result = try await repository.importAppleCodes(tenant: tenant.id, campaignId: campaignId, codes: codes)
        } catch StoreError.notFound {
            throw Self.unknownCampaign(campaignId)
        } catch StoreError.conflict(let what) {
            throw GatewayError.invalidParams(param: "params.campaignId", message: what, reason: "not_an_apple_campaign")
        }
        logger.info(
            "codes imported",
            [
                "tenant": tenant.slug, "campaign": campaignId, "count": String(result.imported),
                "duplicates": String(result.duplicates),
            ])
        return result
    }

    func codes(_ request: CodesRequest, tenant: TenantRecord) async throws -> CodesPage {
        let campaignId = try Validate.identifier(request.campaignId, param: "params.campaignId", maxBytes: 100)
        let limit = request.limit ?? 100
        guard (1...1000).contains(limit) else {
            throw GatewayError.invalidParams(param: "params.limit", message: "limit must be 1-1000")
        }
        var after: String?
        if let raw = request.after {
            do throws(OfferDomainError) {
                after = try CodeNormalizer.normalize(raw, field: "after")
            } catch {
                throw GatewayError(error, paramPrefix: "params")
            }
        }
        guard let record = try await repository.find(tenant: tenant.id, campaignId: campaignId) else {
            throw Self.unknownCampaign(campaignId)
        }
        let page = try await repository.codes(
            tenant: tenant.id, campaignId: campaignId, after: after, limit: limit,
            apple: record.campaign.kind == .appleOneTime)
        return CodesPage(campaignId: campaignId, codes: page, next: page.count == limit ? page.last?.code : nil)
    }

    /// A campaign's counters, its state now and its remaining capacity (nil: unlimited).
    struct Stats: Sendable {
        let stats: CampaignStats
        let state: CampaignState
        let remaining: Int?
    }

    func stats(_ request: CampaignRequest, tenant: TenantRecord) async throws -> Stats {
        let campaignId = try Validate.identifier(request.campaignId, param: "params.campaignId", maxBytes: 100)
        do {
            let stats = try await repository.stats(tenant: tenant.id, campaignId: campaignId)
            let record = stats.record
            return Stats(
                stats: stats, state: record.campaign.state(at: clock()),
                remaining: record.campaign.limits.remaining(redeemed: record.redeemed))
        } catch StoreError.notFound {
            throw Self.unknownCampaign(campaignId)
        }
    }

    func list(tenant: TenantRecord) async throws -> [CampaignRecord] {
        try await repository.list(tenant: tenant.id)
    }

    func deactivate(_ request: CampaignRequest, tenant: TenantRecord) async throws -> CampaignRecord {
        let campaignId = try Validate.identifier(request.campaignId, param: "params.campaignId", maxBytes: 100)
        let record: CampaignRecord
        do {
            record = try await repository.deactivate(tenant: tenant.id, campaignId: campaignId, at: clock())
        } catch StoreError.notFound {
            throw Self.unknownCampaign(campaignId)
        }
        logger.info("campaign deactivated", ["tenant": tenant.slug, "campaign": campaignId])
        return record
    }

    private static func unknownCampaign(_ id: String) -> GatewayError {
        .notFound("no campaign '\(Validate.printable(id))'", reason: "unknown_campaign")
    }
}
