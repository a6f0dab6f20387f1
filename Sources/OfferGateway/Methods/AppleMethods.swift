import Foundation
import JSONRPC

/// `appstore.notification`, `appstore.transactions` and `customers.link`: Apple's signed data in (API.md §8; see
/// `AppleDataService`).
enum AppleMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "appstore.notification", access: .tenant) { ctx in
            let request = try ctx.params(AppleDataService.NotificationRequest.self)
            let result = try await ctx.services.apple.notification(request, tenant: try await ctx.tenant())
            return Wire.notification(result)
        },
        MethodSpec(name: "appstore.transactions", access: .tenant) { ctx in
            let request = try ctx.params(AppleDataService.TransactionsRequest.self)
            let result = try await ctx.services.apple.transactions(request, tenant: try await ctx.tenant())
            return [
                "applied": .int(result.applied), "duplicates": .int(result.duplicates),
                "customers": .array(result.customers.map { .string($0) }),
            ]
        },
        MethodSpec(name: "customers.link", access: .tenant) { ctx in
            let request = try ctx.params(AppleDataService.LinkRequest.self)
            let result = try await ctx.services.apple.link(request, tenant: try await ctx.tenant())
            return ["linked": .bool(result.linked), "applied": .int(result.applied)]
        },
    ]
}
