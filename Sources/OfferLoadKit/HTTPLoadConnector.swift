import Foundation
import HTTPClient
import JSONRPC

/// The load engine over `POST /v1/rpc` (API.md §9): one libcurl connection (kept alive) per load connection, each
/// request carrying `Authorization: Bearer <apiKey>`. HTTP/1.1 through libcurl does not pipeline: a connection's
/// calls queue and go one at a time, so `--depth` above 1 only adds queueing on that connection.
public struct HTTPLoadConnector: LoadConnector {
    public let apiKey: String?
    public let callTimeout: Duration?

    public init(apiKey: String?, callTimeout: Duration? = .seconds(60)) {
        self.apiKey = apiKey
        self.callTimeout = callTimeout
    }

    /// `address`: the gateway's HTTP base URL (`http://127.0.0.1:8080`), or `unix:/path` for HTTP over a Unix socket.
    public func connect(address: String) async throws -> any LoadConnection {
        let endpoint =
            address.hasPrefix("unix:")
            ? HTTPEndpoint(baseURL: "http://localhost", unixSocketPath: String(address.dropFirst(5)))
            : HTTPEndpoint(baseURL: address)
        guard address.hasPrefix("unix:") || address.hasPrefix("http://") else {
            throw OfferLoadError(.connectFailed, context: address, "--http takes http://HOST:PORT or unix:/path")
        }
        let connection = try HTTPConnection(endpoint, timeout: callTimeout ?? .seconds(3600))
        var headers = [("Content-Type", "application/json")]
        if let apiKey { headers.append(("Authorization", "Bearer \(apiKey)")) }
        // One ping first, so a wrong address fails here (as a socket connect would), not as a run of errors.
        let probe = HTTPLoadConnection(connection: connection, headers: headers)
        if case .transportError(let why) = await probe.call(LoadRequest(method: "system.ping", params: [:])) {
            throw OfferLoadError(.connectFailed, context: address, why)
        }
        return probe
    }
}

struct HTTPLoadConnection: LoadConnection {
    let connection: HTTPConnection
    let headers: [(String, String)]

    func call(_ request: LoadRequest) async -> CallOutcome {
        let body = JSONSerializer.serialize(
            RPCRequest(method: request.method, params: .object(request.params), id: .int(1)).json)
        do {
            let response = try await connection.send("POST", "/v1/rpc", headers: headers, body: body)
            let answer = try JSONParsing.parse(response.body)
            if let error = answer["error"] {
                return .rpcError(code: Int(error["code"]?.int64Value ?? -32603))
            }
            guard let result = answer["result"] else {
                return .transportError("HTTP \(response.status) without a JSON-RPC result")
            }
            return RPCLoadConnection.outcome(method: request.method, result: result)
        } catch {
            return .transportError(String(describing: error))
        }
    }
}
