import Foundation
import JSONRPC
import OfferStore

/// `retention.configure` and `retention.get` (admin): a tenant's Retention Messaging configuration (API.md §12; see
/// `RetentionService`). Apple's own request comes over HTTP (`POST /v1/apple/{tenant}/retention`).
enum RetentionMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "retention.configure", access: .admin) { ctx in
            let request = try ctx.params(RetentionService.ConfigureRequest.self)
            let tenant = try await ctx.namedTenant()
            return Wire.retention(try await ctx.services.retention.configure(request, tenant: tenant), tenant: tenant)
        },
        MethodSpec(name: "retention.get", access: .admin) { ctx in
            _ = try ctx.params(TenantMethods.TenantParam.self)
            let tenant = try await ctx.namedTenant()
            return Wire.retention(try await ctx.services.retention.get(tenant: tenant), tenant: tenant)
        },
    ]
}

extension Wire {
    /// A tenant's Retention Messaging configuration, in `retention.configure`'s own shape.
    static func retention(_ settings: RetentionSettings, tenant: TenantRecord) -> JSONValue {
        [
            "tenant": .string(tenant.slug), "defaultMessageId": .string(settings.defaultMessageId),
            "offers": .array(
                settings.offers.map { ["offerId": .string($0.targetId), "messageId": .string($0.messageId)] }),
            "alternateProducts": .array(
                settings.alternateProducts.map {
                    ["productId": .string($0.targetId), "messageId": .string($0.messageId)]
                }),
            "budgetMs": .int(settings.budgetMs), "updatedAt": date(settings.updatedAt),
        ]
    }

    /// Apple's answer shapes (APPLE_OFFERS.md §8), the body of a `200` to Apple's request.
    static func retentionAnswer(_ answer: RetentionService.Answer) -> JSONValue {
        switch answer {
        case .promotionalOffer(let messageId, let jws):
            [
                "promotionalOffer": [
                    "messageIdentifier": .string(messageId), "promotionalOfferSignatureV2": .string(jws),
                ]
            ]
        case .alternateProduct(let messageId, let productId):
            ["alternateProduct": ["messageIdentifier": .string(messageId), "productId": .string(productId)]]
        case .message(let messageId):
            ["message": ["messageIdentifier": .string(messageId)]]
        }
    }
}
