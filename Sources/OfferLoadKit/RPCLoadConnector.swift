import Foundation
import JSONRPC
import OfferCrypto

/// The JSON-RPC adapter of the load engine: one ``RPCClient`` per connection, authenticated with a tenant's API key
/// (or the admin key) inside ``connect(address:)``.
public struct RPCLoadConnector: LoadConnector {
    /// The key each connection authenticates with; nil leaves connections unauthenticated (enough for
    /// `system.ping`).
    public let apiKey: String?
    /// How long one call may take before it counts as a transport error; nil waits for ever.
    public let callTimeout: Duration?

    public init(apiKey: String?, callTimeout: Duration? = .seconds(60)) {
        self.apiKey = apiKey
        self.callTimeout = callTimeout
    }

    public func connect(address: String) async throws -> any LoadConnection {
        // Most answers are only counted: their results are located, not read (docs/perf/offer-load.md). Those an
        // outcome reads are parsed, and so checked, in full.
        var configuration = RPCClientConfiguration()
        configuration.checksUnreadResults = false
        let client = try await RPCClient.connect(to: address, configuration: configuration)
        if let apiKey {
            do {
                _ = try await client.call(method: "session.authenticate", params: ["apiKey": .string(apiKey)])
            } catch let error as RPCError {
                client.close()
                // The key itself never appears in the message.
                throw OfferLoadError(
                    .connectFailed, context: address, "session.authenticate failed: \(error.code) \(error.message)")
            } catch {
                client.close()
                throw error
            }
        }
        return RPCLoadConnection(client: client, timeout: callTimeout)
    }
}

/// One authenticated client connection; calls pipeline on it. Under a closed loop the runner uses
/// ``start(_:_:)``: the answer is handled on the client's event loop thread, which sends the next request. Under an
/// open loop that thread's timer paces the sends (``pace(after:_:)``).
struct RPCLoadConnection: PacedLoadConnection {
    let client: RPCClient
    let timeout: Duration?

    func call(_ request: LoadRequest) async -> CallOutcome {
        let params = JSONValue.object(request.params)
        do {
            let result: JSONValue
            if let timeout {
                result = try await client.call(method: request.method, params: params, timeout: timeout)
            } else {
                result = try await client.call(method: request.method, params: params)
            }
            return Self.outcome(method: request.method, result: result)
        } catch {
            return Self.outcome(failure: error)
        }
    }

    func start(_ request: LoadRequest, _ done: @escaping @Sendable (CallOutcome) -> Void) {
        let method = request.method
        // No params member for none (system.ping): the line a minimal client sends, `{"jsonrpc","method","id"}`.
        let params = request.wireParams
        // Looked up once per call here, not per answer on the loop (most methods read nothing of their result).
        let fields = Self.resultFields[method]
        client.sendForRawResult(method: method, params: params, timeout: timeout) { result in
            switch result {
            case .success(let raw):
                do {
                    done(try Self.outcome(method: method, fields: fields, raw: raw))
                } catch {
                    done(.transportError("unparsable result: \(error)"))
                }
            case .failure(let error): done(Self.outcome(failure: error))
            }
        }
    }

    func pace(after nanoseconds: UInt64, _ tick: @escaping @Sendable () -> UInt64?) async throws {
        try await client.onLoop(after: nanoseconds, tick)
    }

    /// The methods whose outcome reads its result, and the members it reads (``outcome(method:result:)``): only
    /// those are built.
    static let resultFields: [String: Set<String>] = [
        "offers.sign": ["nonce", "compactJWS"], "codes.redeem": ["redemptionId", "campaignId", "replayed"],
    ]

    /// The outcome of an answer from its result as it arrived. Most answers are only counted, their results not
    /// parsed (an `offers.best` answer costs offer-load more to parse than the gateway spends making it); the
    /// outcomes that carry a field build only the members they read (``resultFields``).
    static func outcome(method: String, fields: Set<String>?, raw: RPCRawResult) throws(JSONRPCError) -> CallOutcome {
        guard let fields else { return .success }
        return outcome(method: method, result: try raw.value(keeping: fields))
    }

    func close() async { client.close() }

    /// An error response keeps its code; anything else (connection lost, timeout) is a transport error.
    static func outcome(failure error: any Error) -> CallOutcome {
        if let error = error as? RPCError { return .rpcError(code: error.code) }
        return .transportError(String(describing: error))
    }

    /// A result mapped to an outcome: `codes.redeem` results with a redemption id become `.redeemed`, `offers.sign`
    /// results `.signed` with their nonce (V1's `nonce`, or the JWS payload's).
    static func outcome(method: String, result: JSONValue) -> CallOutcome {
        if method == "offers.sign", let nonce = signatureNonce(result) { return .signed(nonce: nonce.lowercased()) }
        if method == "codes.redeem", let id = result["redemptionId"]?.stringValue,
            let campaign = result["campaignId"]?.stringValue
        {
            return .redeemed(
                redemptionId: id.lowercased(), campaignId: campaign, replayed: result["replayed"]?.boolValue ?? false)
        }
        return .success
    }

    /// The nonce of an `offers.sign` result: `nonce` (v1) or the `nonce` claim of `compactJWS` (jws).
    static func signatureNonce(_ result: JSONValue) -> String? {
        if let nonce = result["nonce"]?.stringValue { return nonce }
        guard let jws = result["compactJWS"]?.stringValue else { return nil }
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(parts[1]),
            let claims = try? JSONParsing.parse(payload)
        else { return nil }
        return claims["nonce"]?.stringValue
    }
}
