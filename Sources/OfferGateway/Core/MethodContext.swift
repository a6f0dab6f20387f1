import Foundation
import JSONRPC
import OfferStore

/// Who may call a method.
enum Access: Sendable {
    /// Anyone, authenticated or not.
    case open
    /// A tenant (for its own data) or the admin naming a tenant.
    case tenant
    /// The admin only.
    case admin
}

/// An answer given at once, or later without a task: `later` starts the work and calls its reply exactly once, on
/// whichever thread has the answer (a batched read's, for a customer's first question).
enum NowOrLater<Value: Sendable>: Sendable {
    typealias Start = @Sendable (_ reply: @escaping @Sendable (Result<Value, any Error>) -> Void) -> Void

    case now(Value)
    case later(Start)

    /// The same answer, transformed when it is there (a transform that throws fails it).
    func map<T: Sendable>(_ transform: @escaping @Sendable (Value) throws -> T) throws -> NowOrLater<T> {
        switch self {
        case .now(let value):
            return .now(try transform(value))
        case .later(let start):
            return .later { reply in start { reply($0.flatMap { value in Result { try transform(value) } }) } }
        }
    }
}

/// One method of the API: its name, who may call it, and what it does.
struct MethodSpec: Sendable {
    let name: String
    let access: Access
    let run: @Sendable (MethodContext) async throws -> JSONValue
    /// The answer without a task: at once when the method can give it from memory, or later from the thread that
    /// has it (nil: `run` answers, the same way). Runs on a transport's thread (`Gateway.answerNow`): lookups and at
    /// most one signature's CPU (tens of µs, `offers.sign`), never a query or a lock held for long; a `.later`
    /// answer's work runs after it returned.
    let now: (@Sendable (MethodContext) throws -> NowOrLater<JSONValue>?)?

    init(
        name: String, access: Access, run: @escaping @Sendable (MethodContext) async throws -> JSONValue,
        now: (@Sendable (MethodContext) throws -> NowOrLater<JSONValue>?)? = nil
    ) {
        self.name = name
        self.access = access
        self.run = run
        self.now = now
    }
}

/// Everything a method needs for one call.
struct MethodContext: Sendable {
    let request: RPCRequest
    let session: GatewaySession
    /// Who the connection spoke for when the request arrived (the session's, read once per request).
    let principal: Principal
    let rpc: RPCContext
    let gateway: Gateway

    /// The application services a method calls.
    var services: Services { gateway.services }

    /// The params decoded into `T`; wrong shapes become -32602 naming the param.
    func params<T: Decodable>(_ type: T.Type) throws -> T {
        try request.decodeParams(type)
    }

    /// The params as `T`: read straight off the object when every member `T` reads is a string (the usual call),
    /// else through `Decodable`, which names what is wrong.
    func params<T: PlainStringParams>(plain type: T.Type) throws -> T {
        try T(plainParams: request.params) ?? params(T.self)
    }

    /// The `tenant` param, if given as a string.
    private var tenantParam: JSONValue? { request.params?["tenant"] }

    /// The tenant this call acts on: the connection's own tenant (a different `tenant` param is forbidden), or for
    /// the admin the tenant named by the required `tenant` param.
    func tenant() async throws -> TenantRecord {
        if let own = try ownTenant() { return own }
        return try await namedTenant()
    }

    /// The connection's own tenant (a different `tenant` param is forbidden); nil for the admin, who names one
    /// (`namedTenant`).
    func ownTenant() throws -> TenantRecord? {
        switch principal {
        case .anonymous:
            throw GatewayError.unauthenticated()
        case .tenant(let own):
            if let named = tenantParam, !named.isNull {
                guard named.stringValue != nil else {
                    throw GatewayError.invalidParams(
                        param: "params.tenant", message: "'tenant' must be a string", reason: "wrong_type")
                }
                guard named.stringValue == own.slug else {
                    throw GatewayError.forbidden("a tenant key acts on its own tenant only", reason: "other_tenant")
                }
            }
            return own
        case .admin:
            return nil
        }
    }

    /// For admin methods: the tenant named by the `tenant` param.
    func namedTenant() async throws -> TenantRecord {
        guard let named = tenantParam, !named.isNull else {
            throw GatewayError.invalidParams(
                param: "params.tenant", message: "missing param 'tenant' (the tenant's slug)", reason: "missing_param")
        }
        guard let slug = named.stringValue else {
            throw GatewayError.invalidParams(
                param: "params.tenant", message: "'tenant' must be a string", reason: "wrong_type")
        }
        return try await services.tenants.find(slug: slug)
    }
}

/// Params that a hot method reads straight off the request's JSON object when every member it reads is a string,
/// without `Decodable` (15 % of a remembered `offers.best` answer's cost, a twentieth of a redemption's). Anything
/// else (a missing member, a value of another type) is left to `Decodable`, errors and all; members a request does
/// not read are ignored, as `Decodable` ignores them.
protocol PlainStringParams: Decodable {
    /// The params, or nil for `Decodable` to read them.
    init?(plainParams params: JSONValue?)
}

extension PlainStringParams {
    /// Walks the members of `params` (false when it is not an object): `read` gets each member's name and its text
    /// (nil when the value is not a string) and answers false to leave the params to `Decodable`. A non-escaping
    /// closure over the reader's locals: nothing is allocated per request.
    static func readStrings(_ params: JSONValue?, _ read: (_ name: String, _ text: String?) -> Bool) -> Bool {
        guard case .object(let object)? = params else { return false }
        for member in object.members {
            let text: String? = if case .string(let text) = member.value { text } else { nil }
            guard read(member.key, text) else { return false }
        }
        return true
    }
}
