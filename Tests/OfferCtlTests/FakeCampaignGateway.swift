// A stand-in gateway for the campaign commands: it answers in API.md's shapes (see docs/offerctl.md) and records
// what offerctl sent, so the CLI side is tested on its own (CampaignCommandTests runs them against the real one).
import Foundation
import JSONRPC
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

final class FakeCampaignGateway: RPCHandler, Sendable {
    /// Whether the connection authenticated.
    final class Session: Sendable {
        let authenticated = Atomic<Bool>(false)
    }

    struct State {
        var requests: [RPCRequest] = []
        var codes: [JSONValue] = []
        var campaigns: [JSONValue] = []
    }

    let adminKey: String
    let state = Mutex(State())

    init(adminKey: String, codes: [JSONValue] = [], campaigns: [JSONValue] = []) {
        self.adminKey = adminKey
        state.withLock {
            $0.codes = codes
            $0.campaigns = campaigns
        }
    }

    /// The requests received for `method`, in order.
    func requests(_ method: String) -> [RPCRequest] { state.withLock { $0.requests.filter { $0.method == method } } }

    func makeSession(_ info: ConnectionInfo) -> Session { Session() }

    func handle(_ request: RPCRequest, session: Session, context: RPCContext) async -> Result<JSONValue, RPCError> {
        state.withLock { $0.requests.append(request) }
        let params = request.params ?? [:]
        switch request.method {
        case "system.health":
            return .success(["status": "ok", "database": "ok", "version": "fake"])
        case "session.authenticate":
            guard params["apiKey"]?.stringValue == adminKey else {
                return .failure(RPCError(code: -32001, message: "invalid API key", reason: "invalid_api_key"))
            }
            session.authenticated.store(true, ordering: .relaxed)
            return .success(["tenant": nil, "role": "admin"])
        default:
            break
        }
        guard session.authenticated.load(ordering: .relaxed) else {
            return .failure(RPCError(code: -32001, message: "authenticate first", reason: "unauthenticated"))
        }
        let campaignId = params["campaignId"]?.stringValue ?? ""
        if campaignId == "missing" {
            return .failure(RPCError(code: -32004, message: "no campaign 'missing'", reason: "unknown_campaign"))
        }
        switch request.method {
        case "campaigns.create":
            return .success([
                "campaignId": .string(campaignId), "offerId": params["offerId"] ?? nil,
                "warnings": [
                    "Apple allows at most 150,000 one-time codes per offer a quarter",
                    ["code": "custom_code_cap", "message": "custom codes are capped at 1,000,000 redemptions"],
                ],
            ])
        case "campaigns.list":
            return .success(["campaigns": .array(state.withLock { $0.campaigns })])
        case "campaigns.stats":
            return .success([
                "campaignId": .string(campaignId), "state": "active", "totalLimit": nil, "redeemed": 3,
                "remaining": nil, "rolledBack": 1, "codesGenerated": 5,
                "codesRedeemed": 2,
            ])
        case "campaigns.deactivate":
            return .success(["campaignId": .string(campaignId), "active": false])
        case "campaigns.generateCodes":
            let count = Int(params["count"]?.int64Value ?? 0)
            if campaignId != "quiet" {
                for done in stride(from: count / 4, through: count, by: max(1, count / 4)) {
                    context.notify(
                        method: "campaigns.generateCodes.progress",
                        params: ["campaignId": .string(campaignId), "generated": .int(done), "total": .int(count)])
                }
            }
            return .success(["generated": .int(count)])
        case "campaigns.codes":
            let limit = Int(params["limit"]?.int64Value ?? 1000)
            let after = params["after"]?.stringValue
            let all = state.withLock { $0.codes }
            let start =
                after.flatMap { cursor in all.firstIndex { $0["code"]?.stringValue == cursor }.map { $0 + 1 } } ?? 0
            let page = Array(all[min(start, all.count)..<min(start + limit, all.count)])
            if campaignId == "quiet" {
                // No cursor in the answer: offerctl must page on the last code of a full page.
                return .success(["codes": .array(page)])
            }
            let more = start + limit < all.count
            return .success(["codes": .array(page), "next": more ? (page.last?["code"] ?? nil) : nil])
        default:
            return .failure(RPCError.methodNotFound(request.method))
        }
    }

    /// Serves on a fresh Unix socket for the duration of `body`.
    func serve(_ body: (String) async throws -> Void) async throws {
        let server = try RPCServer(handler: self)
        let path = "/tmp/ogctl-fake-\(UUID().uuidString.prefix(8).lowercased()).sock"
        try server.listen(ListenAddress(parsing: "unix:" + path))
        do {
            try await body("unix:" + path)
        } catch {
            await server.shutdown(gracePeriod: .seconds(1))
            throw error
        }
        await server.shutdown(gracePeriod: .seconds(1))
    }
}
