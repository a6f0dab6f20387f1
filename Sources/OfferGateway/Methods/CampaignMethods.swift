import Foundation
import JSONRPC
import OfferCrypto
import OfferDomain
import OfferStore

/// `campaigns.*` (admin methods): offer-code campaigns, their one-time codes and their counters.
enum CampaignMethods {
    struct CreateParams: Decodable {
        let campaignId: String
        let offerId: String
        let kind: String
        let code: String?
        let totalLimit: Int?
        let perCustomerLimit: Int?
        let startsAt: Date?
        let expiresAt: Date?
        let eligibility: [String]?
    }
    struct CampaignParams: Decodable {
        let campaignId: String
    }
    struct GenerateParams: Decodable {
        let campaignId: String
        let count: Int
        let pattern: String?
    }
    struct CodesParams: Decodable {
        let campaignId: String
        let after: String?
        let limit: Int?
    }

    /// Most codes one `campaigns.generateCodes` call makes.
    static let maxGenerate = 5_000_000
    /// Counts from which progress notifications are sent (one per pipelined round of 80,000 codes).
    static let progressThreshold = 50_000

    static let all: [MethodSpec] = [
        MethodSpec(name: "campaigns.create", access: .admin) { ctx in
            let params = try ctx.params(CreateParams.self)
            let tenant = try await ctx.namedTenant()
            let campaignId = try Validate.identifier(params.campaignId, param: "params.campaignId", maxBytes: 100)
            let offerId = try Validate.identifier(params.offerId, param: "params.offerId")
            guard let kind = CampaignKind(rawValue: params.kind) else {
                throw GatewayError.invalidParams(param: "params.kind", message: "kind must be oneTime or custom")
            }
            var eligibility = Set(CampaignAudience.allCases)
            if let names = params.eligibility {
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
                    id: campaignId, offerId: offerId, kind: kind, code: params.code, totalLimit: params.totalLimit,
                    perCustomerLimit: params.perCustomerLimit ?? 1, startsAt: params.startsAt,
                    expiresAt: params.expiresAt, eligibility: eligibility)
            } catch {
                throw GatewayError(error, paramPrefix: "params")
            }
            let catalog = try await ctx.gateway.catalogs.catalog(tenant.id)
            guard catalog.offer(offerId) != nil else {
                throw GatewayError.notFound("no offer '\(TenantDirectory.printable(offerId))'", reason: "unknown_offer")
            }
            let record = try await ctx.gateway.database.campaigns.create(tenant: tenant.id, campaign)
            ctx.gateway.logger.info("campaign created", ["tenant": tenant.slug, "campaign": campaignId])
            var object = json(record, at: ctx.gateway.now())
            object["warnings"] = .array(campaign.appleCapWarnings(createdAt: record.createdAt).map { .string($0) })
            return .object(object)
        },
        MethodSpec(name: "campaigns.generateCodes", access: .admin) { ctx in
            let params = try ctx.params(GenerateParams.self)
            let tenant = try await ctx.namedTenant()
            let campaignId = try Validate.identifier(params.campaignId, param: "params.campaignId", maxBytes: 100)
            guard (1...maxGenerate).contains(params.count) else {
                throw GatewayError.invalidParams(param: "params.count", message: "count must be 1-\(maxGenerate)")
            }
            let generator: CodeGenerator
            do throws(OfferDomainError) {
                generator = try CodeGenerator(pattern: params.pattern)
            } catch {
                throw GatewayError(error, paramPrefix: "params")
            }
            // Keep the space at least 10x larger than the request, so collisions stay rare and retries cheap.
            guard generator.capacity >= Double(params.count) * 10 else {
                throw GatewayError.invalidParams(
                    param: "params.pattern", message: "the pattern has too few # for \(params.count) codes",
                    reason: "pattern_too_small")
            }
            let count = params.count
            let rpc = ctx.rpc
            let notify = count >= progressThreshold
            let generated = try await ctx.gateway.database.campaigns.generateCodes(
                tenant: tenant.id, campaignId: campaignId, count: count,
                makeCodes: { n in
                    var random = SecureRandomGenerator()
                    return generator.generateNormalized(count: n, using: &random)
                },
                progress: { made in
                    guard notify else { return }
                    rpc.notify(
                        method: "campaigns.generateCodes.progress",
                        params: ["campaignId": .string(campaignId), "generated": .int(made), "count": .int(count)])
                })
            ctx.gateway.logger.info(
                "codes generated", ["tenant": tenant.slug, "campaign": campaignId, "count": String(generated)])
            return ["campaignId": .string(campaignId), "generated": .int(generated)]
        },
        MethodSpec(name: "campaigns.codes", access: .admin) { ctx in
            let params = try ctx.params(CodesParams.self)
            let tenant = try await ctx.namedTenant()
            let campaignId = try Validate.identifier(params.campaignId, param: "params.campaignId", maxBytes: 100)
            let limit = params.limit ?? 100
            guard (1...1000).contains(limit) else {
                throw GatewayError.invalidParams(param: "params.limit", message: "limit must be 1-1000")
            }
            let after: String?
            do throws(OfferDomainError) {
                if let raw = params.after {
                    after = try CodeNormalizer.normalize(raw, field: "after")
                } else {
                    after = nil
                }
            } catch {
                throw GatewayError(error, paramPrefix: "params")
            }
            let repository = ctx.gateway.database.campaigns
            guard try await repository.find(tenant: tenant.id, campaignId: campaignId) != nil else {
                throw unknownCampaign(campaignId)
            }
            let page = try await repository.codes(tenant: tenant.id, campaignId: campaignId, after: after, limit: limit)
            return [
                "campaignId": .string(campaignId),
                "codes": .array(
                    page.map { code in
                        let state = !code.oneTime ? "custom" : (code.redeemedAt == nil ? "available" : "redeemed")
                        return [
                            "code": .string(code.code), "state": .string(state),
                            "redeemedAt": CustomerMethods.date(code.redeemedAt),
                            "createdAt": CustomerMethods.date(code.createdAt),
                        ]
                    }),
                "next": page.count == limit ? page.last.map { .string($0.code) } ?? .null : .null,
            ]
        },
        MethodSpec(name: "campaigns.stats", access: .admin) { ctx in
            let params = try ctx.params(CampaignParams.self)
            let tenant = try await ctx.namedTenant()
            let campaignId = try Validate.identifier(params.campaignId, param: "params.campaignId", maxBytes: 100)
            let stats: CampaignStats
            do {
                stats = try await ctx.gateway.database.campaigns.stats(tenant: tenant.id, campaignId: campaignId)
            } catch StoreError.notFound {
                throw unknownCampaign(campaignId)
            }
            let record = stats.record
            let remaining = record.campaign.limits.remaining(redeemed: record.redeemed)
            return [
                "campaignId": .string(campaignId),
                "state": .string(record.campaign.state(at: ctx.gateway.now()).rawValue),
                "totalLimit": record.campaign.limits.totalLimit.map { .int($0) } ?? .null,
                "redeemed": .int(record.redeemed), "remaining": remaining.map { .int($0) } ?? .null,
                "rolledBack": .int(record.rolledBack), "codesGenerated": .int(record.codesGenerated),
                "codesRedeemed": .int(stats.codesRedeemed),
            ]
        },
        MethodSpec(name: "campaigns.list", access: .admin) { ctx in
            let tenant = try await ctx.namedTenant()
            let records = try await ctx.gateway.database.campaigns.list(tenant: tenant.id)
            let now = ctx.gateway.now()
            return ["campaigns": .array(records.map { .object(json($0, at: now)) })]
        },
        MethodSpec(name: "campaigns.deactivate", access: .admin) { ctx in
            let params = try ctx.params(CampaignParams.self)
            let tenant = try await ctx.namedTenant()
            let campaignId = try Validate.identifier(params.campaignId, param: "params.campaignId", maxBytes: 100)
            let now = ctx.gateway.now()
            let record: CampaignRecord
            do {
                record = try await ctx.gateway.database.campaigns.deactivate(
                    tenant: tenant.id, campaignId: campaignId, at: now)
            } catch StoreError.notFound {
                throw unknownCampaign(campaignId)
            }
            ctx.gateway.logger.info("campaign deactivated", ["tenant": tenant.slug, "campaign": campaignId])
            // The stored time is rounded to microseconds: show the state as of the deactivation at the latest.
            return .object(json(record, at: max(now, record.campaign.deactivatedAt ?? now)))
        },
    ]

    static func unknownCampaign(_ id: String) -> GatewayError {
        .notFound("no campaign '\(TenantDirectory.printable(id))'", reason: "unknown_campaign")
    }

    /// A campaign as the admin methods show it.
    static func json(_ record: CampaignRecord, at: Date) -> JSONObject {
        let c = record.campaign
        return [
            "campaignId": .string(c.id), "offerId": .string(c.offerId), "kind": .string(c.kind.rawValue),
            "code": c.code.map { .string($0) } ?? .null,
            "totalLimit": c.limits.totalLimit.map { .int($0) } ?? .null,
            "perCustomerLimit": .int(c.limits.perCustomerLimit), "startsAt": CustomerMethods.date(c.startsAt),
            "expiresAt": CustomerMethods.date(c.expiresAt),
            "eligibility": .array(c.eligibility.sorted().map { .string($0.rawValue) }),
            "state": .string(c.state(at: at).rawValue), "deactivatedAt": CustomerMethods.date(c.deactivatedAt),
            "redeemed": .int(record.redeemed), "rolledBack": .int(record.rolledBack),
            "codesGenerated": .int(record.codesGenerated), "createdAt": CustomerMethods.date(record.createdAt),
        ]
    }
}
