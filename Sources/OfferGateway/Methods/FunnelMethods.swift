import Foundation
import JSONRPC

/// `events.record` and `analytics.funnel` (tenant methods): the offer funnel (API.md §11; see `FunnelService`).
enum FunnelMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "events.record", access: .tenant) { ctx in
            let request = try ctx.params(FunnelService.RecordRequest.self)
            let result = try await ctx.services.funnel.record(request, tenant: try await ctx.tenant())
            return ["recorded": .int(result.recorded), "duplicates": .int(result.duplicates)]
        },
        MethodSpec(name: "analytics.funnel", access: .tenant) { ctx in
            let request = try ctx.params(FunnelService.FunnelRequest.self)
            return Wire.funnel(try await ctx.services.funnel.funnel(request, tenant: try await ctx.tenant()))
        },
    ]
}
