import Foundation
import JSONRPC

/// `codes.*` (tenant methods): validate, redeem and roll back offer codes, claim Apple's one-time codes (see `CodeService`, docs/codes.md).
enum CodeMethods {
    static let all: [MethodSpec] = [
        MethodSpec(
            name: "codes.redeem", access: .tenant,
            run: { ctx in
                let request = try ctx.params(plain: CodeService.RedeemRequest.self)
                let redeemed = try await ctx.services.codes.redeem(request, tenant: try await ctx.tenant())
                return Wire.receipt(redeemed.receipt, signature: redeemed.signature)
            },
            now: { ctx in
                let request = try ctx.params(plain: CodeService.RedeemRequest.self)
                guard let tenant = try ctx.ownTenant() else { return nil }
                return try ctx.services.codes.redeemNow(request, tenant: tenant)?.map {
                    Wire.receipt($0.receipt, signature: $0.signature)
                }
            }),
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

extension CodeService.RedeemRequest: PlainStringParams {
    init?(plainParams params: JSONValue?) {
        var code: String?
        var customerId: String?
        var idempotencyKey: String?
        var sign: String?
        var appAccountToken: String?
        var transactionId: String?
        let plain = Self.readStrings(params) { name, text in
            switch name {
            case "code": code = text
            case "customerId": customerId = text
            case "idempotencyKey": idempotencyKey = text
            case "sign": sign = text
            case "appAccountToken": appAccountToken = text
            case "transactionId": transactionId = text
            default: return true
            }
            return text != nil
        }
        guard plain, let code, let customerId else { return nil }
        self.init(
            code: code, customerId: customerId, idempotencyKey: idempotencyKey, sign: sign,
            appAccountToken: appAccountToken, transactionId: transactionId)
    }
}
