import Foundation
import JSONRPC
import OfferDomain
import OfferStore

/// Every way a gateway service can fail. Messages are for humans and never carry secrets (keys, codes,
/// signatures, bound values). How each case looks on the wire is decided in one place, `rpcError` below, reached
/// through `RenderableError` (ErrorRendering.swift) for every error a service may throw.
public enum GatewayError: Error, Sendable {
    /// -32602: a parameter is missing, of the wrong type or out of range. `param` names it (`params.productId`).
    case invalidParams(param: String, message: String, reason: String = "invalid_value")
    /// -32001: the connection has not authenticated, or the key was wrong.
    case unauthenticated(String = "authenticate first with session.authenticate", reason: String = "unauthenticated")
    /// -32002: the role may not call this, or the resource belongs to another tenant.
    case forbidden(String, reason: String = "forbidden")
    /// -32004: a named thing does not exist (for this tenant).
    case notFound(String, reason: String = "not_found")
    /// -32009: exists already, or an idempotency key was reused with other params.
    case conflict(String, reason: String = "conflict")
    /// -32020: the customer may not have this offer; `reasons` are the eligibility reason codes.
    case notEligible(String, reasons: [String])
    /// -32030: the tenant has no active signing key.
    case noActiveSigningKey
    /// -32030: the active signing key cannot make this kind of signature (e.g. a JWS without an issuer id).
    case signingKeyUnusable(String, reason: String)
    /// -32029: too many requests for this tenant.
    case rateLimited(retryAfterMs: Int)
    /// -32050: a dependency (the database) is unavailable; retry later.
    case unavailable(String)
    /// -32603: a bug or a broken invariant; details are logged, not returned.
    case `internal`(String)
    /// -32040: no such code for this tenant.
    case unknownCode
    /// A redemption refused by the campaign's rules: -32042 (not active), -32020 (eligibility), -32041 (exhausted),
    /// -32043 (customer limit).
    case refused(Campaign.Refusal)

    /// The JSON-RPC error the client sees.
    public var rpcError: RPCError {
        switch self {
        case .invalidParams(let param, let message, let reason):
            return RPCError(
                code: -32602, message: message, reason: reason, retryable: false, details: ["param": .string(param)])
        case .unauthenticated(let message, let reason):
            return RPCError(code: -32001, message: message, reason: reason, retryable: false)
        case .forbidden(let message, let reason):
            return RPCError(code: -32002, message: message, reason: reason, retryable: false)
        case .notFound(let message, let reason):
            return RPCError(code: -32004, message: message, reason: reason, retryable: false)
        case .conflict(let message, let reason):
            return RPCError(code: -32009, message: message, reason: reason, retryable: false)
        case .notEligible(let message, let reasons):
            return RPCError(
                code: -32020, message: message, reason: "not_eligible", retryable: false,
                details: ["reasons": .array(reasons.map { .string($0) })])
        case .noActiveSigningKey:
            return RPCError(
                code: -32030, message: "the tenant has no active signing key (import one with keys.import)",
                reason: "no_active_signing_key", retryable: false)
        case .signingKeyUnusable(let message, let reason):
            return RPCError(code: -32030, message: message, reason: reason, retryable: false)
        case .rateLimited(let retryAfterMs):
            return RPCError(
                code: -32029, message: "rate limit reached; retry later", reason: "rate_limited", retryable: true,
                details: ["retryAfterMs": .int(retryAfterMs)])
        case .unavailable(let message):
            return RPCError(code: Self.unavailableCode, message: message, reason: "unavailable", retryable: true)
        case .internal:
            return RPCError(code: -32603, message: "internal error", reason: "internal_error", retryable: false)
        case .unknownCode:
            return RPCError(code: -32040, message: "unknown code", reason: "unknown_code", retryable: false)
        case .refused(let refusal):
            return Self.rpcError(refusal)
        }
    }

    private static func rpcError(_ refusal: Campaign.Refusal) -> RPCError {
        let (code, message): (Int, String) =
            switch refusal {
            case .campaignNotStarted: (-32042, "the campaign has not started")
            case .campaignExpired: (-32042, "the campaign has expired")
            case .campaignDeactivated: (-32042, "the campaign was deactivated")
            case .codeExhausted: (-32041, "the code is exhausted (limit reached or one-time code used)")
            case .customerLimitReached: (-32043, "the customer reached this campaign's limit")
            case .notInCampaignEligibility: (-32020, "the customer is not in the campaign's eligibility")
            }
        if refusal == .notInCampaignEligibility {
            return RPCError(
                code: code, message: message, reason: "not_eligible", retryable: false,
                details: ["reasons": .array([.string(refusal.rawValue)])])
        }
        return RPCError(code: code, message: message, reason: refusal.rawValue, retryable: false)
    }

    /// What the server log gets when the failure is the gateway's or the database's; nil when it is the client's
    /// doing (a conflict, a miss, a refusal), which is not logged as a failure. Never carries secrets.
    var failureDetail: String? {
        switch self {
        case .internal(let detail): "internal: \(detail)"
        case .unavailable(let detail): "unavailable: \(detail)"
        default: nil
        }
    }
}

extension GatewayError {
    /// -32050, `unavailable`: the code clients retry with the same request (API.md).
    static let unavailableCode = -32050

    /// Classifies a repository failure. Not-found and conflict messages come from the store and name only ids the
    /// client sent.
    init(_ error: StoreError) {
        switch error {
        case .conflict(let what): self = .conflict(what)
        case .notFound(let what): self = .notFound(what)
        case .unavailable: self = .unavailable("the database is unavailable; retry later")
        case .database(let failure) where failure.isCancelled:
            // The request's task was cancelled (its client went away): nobody reads this answer.
            self = .unavailable("the request was cancelled")
        case .database(let failure): self = .internal("database: \(failure)")
        case .corrupt(let what): self = .internal("corrupt stored value: \(what)")
        }
    }

    /// A domain validation failure, attributed to a parameter (`defaultField` when the error names none).
    init(_ error: OfferDomainError, paramPrefix: String, defaultField: String? = nil) {
        let param = (error.field ?? defaultField).map { "\(paramPrefix).\($0)" } ?? paramPrefix
        self = .invalidParams(param: param, message: error.message, reason: error.code.rawValue)
    }
}
