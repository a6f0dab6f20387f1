import Foundation
import JSONRPC

/// `campaigns.*` (admin): offer-code campaigns, their one-time codes and their counters (see `CampaignService`).
enum CampaignMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "campaigns.create", access: .admin) { ctx in
            let request = try ctx.params(CampaignService.CreateRequest.self)
            let created = try await ctx.services.campaigns.create(request, tenant: try await ctx.namedTenant())
            var object = Wire.campaign(created.record, at: ctx.services.clock())
            object["warnings"] = Wire.strings(created.warnings)
            return .object(object)
        },
        MethodSpec(name: "campaigns.generateCodes", access: .admin) { ctx in
            let request = try ctx.params(CampaignService.GenerateRequest.self)
            let tenant = try await ctx.namedTenant()
            let (rpc, campaignId, count) = (ctx.rpc, request.campaignId, request.count)
            let generated = try await ctx.services.campaigns.generateCodes(request, tenant: tenant) { made in
                rpc.notify(
                    method: "campaigns.generateCodes.progress",
                    params: ["campaignId": .string(campaignId), "generated": .int(made), "count": .int(count)])
            }
            return ["campaignId": .string(campaignId), "generated": .int(generated)]
        },
        MethodSpec(name: "campaigns.importCodes", access: .admin) { ctx in
            let request = try ctx.params(CampaignService.ImportRequest.self)
            let result = try await ctx.services.campaigns.importCodes(request, tenant: try await ctx.namedTenant())
            return [
                "campaignId": .string(request.campaignId), "imported": .int(result.imported),
                "duplicates": .int(result.duplicates),
            ]
        },
        MethodSpec(name: "campaigns.codes", access: .admin) { ctx in
            let request = try ctx.params(CampaignService.CodesRequest.self)
            let page = try await ctx.services.campaigns.codes(request, tenant: try await ctx.namedTenant())
            let codes: [JSONValue] = page.codes.map { code in
                let used = code.apple ? "claimed" : "redeemed"
                let state = !code.oneTime ? "custom" : (code.redeemedAt == nil ? "available" : used)
                return [
                    "code": .string(code.code), "state": .string(state), "redeemedAt": Wire.date(code.redeemedAt),
                    "createdAt": Wire.date(code.createdAt),
                ]
            }
            return [
                "campaignId": .string(page.campaignId), "codes": .array(codes),
                "next": page.next.map { .string($0) } ?? .null,
            ]
        },
        MethodSpec(name: "campaigns.stats", access: .admin) { ctx in
            let request = try ctx.params(CampaignService.CampaignRequest.self)
            let view = try await ctx.services.campaigns.stats(request, tenant: try await ctx.namedTenant())
            let record = view.stats.record
            return [
                "campaignId": .string(record.campaign.id), "state": .string(view.state.rawValue),
                "totalLimit": record.campaign.limits.totalLimit.map { .int($0) } ?? .null,
                "redeemed": .int(record.redeemed), "remaining": view.remaining.map { .int($0) } ?? .null,
                "rolledBack": .int(record.rolledBack), "codesGenerated": .int(record.codesGenerated),
                "codesRedeemed": .int(view.stats.codesRedeemed), "claimed": .int(view.stats.claimed),
                "purchased": .int(view.stats.purchased),
            ]
        },
        MethodSpec(name: "campaigns.list", access: .admin) { ctx in
            let records = try await ctx.services.campaigns.list(tenant: try await ctx.namedTenant())
            let now = ctx.services.clock()
            return ["campaigns": .array(records.map { .object(Wire.campaign($0, at: now)) })]
        },
        MethodSpec(name: "campaigns.deactivate", access: .admin) { ctx in
            let request = try ctx.params(CampaignService.CampaignRequest.self)
            let record = try await ctx.services.campaigns.deactivate(request, tenant: try await ctx.namedTenant())
            // The stored time is rounded to microseconds: show the state as of the deactivation at the latest.
            let now = ctx.services.clock()
            return .object(Wire.campaign(record, at: max(now, record.campaign.deactivatedAt ?? now)))
        },
    ]
}
