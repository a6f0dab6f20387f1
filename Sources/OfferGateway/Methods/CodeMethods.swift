import Foundation
import JSONRPC

/// `codes.*` (tenant methods): validate, redeem and roll back offer codes, claim Apple's one-time codes (see `CodeService`, docs/codes.md).
enum CodeMethods {
    static let all: [MethodSpec] = [
        MethodSpec(
            name: "codes.redeem", access: .tenant,
            run: { ctx in
                let request = try redeemRequest(ctx)
                let redeemed = try await ctx.services.codes.redeem(request, tenant: try await ctx.tenant())
                return Wire.receipt(redeemed.receipt, signature: redeemed.signature)
            },
            now: { ctx in
                let request = try redeemRequest(ctx)
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

    /// `codes.redeem`'s params: plain ones read off the object, anything else (and every error) through `Decodable`.
    static func redeemRequest(_ ctx: MethodContext) throws -> CodeService.RedeemRequest {
        try CodeService.RedeemRequest(plainParams: ctx.request.params) ?? ctx.params(CodeService.RedeemRequest.self)
    }
}

extension CodeService.RedeemRequest {
    /// The request of `params` that hold only strings, read straight off the object (through `Decodable`, a
    /// twentieth of a redemption's CPU in the gateway). Anything else (a missing `code` or `customerId`, a value of
    /// another type) is nil, and `Decodable` reads it, errors and all. Members the request does not read are
    /// ignored, as `Decodable` ignores them.
    init?(plainParams params: JSONValue?) {
        guard case .object(let object)? = params else { return nil }
        var code: String?
        var customerId: String?
        var idempotencyKey: String?
        var sign: String?
        var appAccountToken: String?
        var transactionId: String?
        for member in object.members {
            switch (member.key, member.value) {
            case ("code", .string(let text)): code = text
            case ("customerId", .string(let text)): customerId = text
            case ("idempotencyKey", .string(let text)): idempotencyKey = text
            case ("sign", .string(let text)): sign = text
            case ("appAccountToken", .string(let text)): appAccountToken = text
            case ("transactionId", .string(let text)): transactionId = text
            case ("code", _), ("customerId", _), ("idempotencyKey", _), ("sign", _), ("appAccountToken", _),
                ("transactionId", _):
                return nil
            default: continue
            }
        }
        guard let code, let customerId else { return nil }
        self.init(
            code: code, customerId: customerId, idempotencyKey: idempotencyKey, sign: sign,
            appAccountToken: appAccountToken, transactionId: transactionId)
    }
}
