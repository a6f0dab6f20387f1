import Foundation
import JSONRPC

/// `codes.*` (tenant methods): validate, redeem and roll back offer codes, claim Apple's one-time codes (see `CodeService`, docs/codes.md).
enum CodeMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "codes.redeem", access: .tenant) { ctx in
            let request = try ctx.params(CodeService.RedeemRequest.self)
            let redeemed = try await ctx.services.codes.redeem(request, tenant: try await ctx.tenant())
            return Wire.receipt(redeemed.receipt, signature: redeemed.signature)
        },
        MethodSpec(name: "codes.claim", access: .tenant) { ctx in
            let request = try ctx.params(CodeService.ClaimRequest.self)
            return Wire.claim(try await ctx.services.codes.claim(request, tenant: try await ctx.tenant()))
        },
        MethodSpec(name: "codes.validate", access: .tenant) { ctx in
            let request = try ctx.params(CodeService.ValidateRequest.self)
            return Wire.validation(try await ctx.services.codes.validate(request, tenant: try await ctx.tenant()))
        },
        MethodSpec(name: "codes.rollback", access: .tenant) { ctx in
            let request = try ctx.params(CodeService.RollbackRequest.self)
            let rollback = try await ctx.services.codes.rollback(request, tenant: try await ctx.tenant())
            return [
                "redemptionId": .string(rollback.redemptionId), "rolledBack": true,
                "alreadyRolledBack": .bool(rollback.alreadyRolledBack),
            ]
        },
    ]
}
