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
        let connection = try HTTPConnection(Self.endpoint(address), timeout: callTimeout ?? .seconds(3600))
        var headers = [("Content-Type", "application/json")]
        if let apiKey { headers.append(("Authorization", "Bearer \(apiKey)")) }
        // One ping first, so a wrong address fails here (as a socket connect would), not as a run of errors.
        let probe = HTTPLoadConnection(connection: connection, headers: headers)
        if case .transportError(let why) = await probe.call(LoadRequest(method: "system.ping", params: [:])) {
            throw OfferLoadError(.connectFailed, context: address, why)
        }
        return probe
    }

    /// Where `--http ADDRESS` points: `http://HOST:PORT`, or `unix:/path` (HTTP over a Unix socket).
    static func endpoint(_ address: String) throws(OfferLoadError) -> HTTPEndpoint {
        if address.hasPrefix("unix:") {
            return HTTPEndpoint(baseURL: "http://localhost", unixSocketPath: String(address.dropFirst(5)))
        }
        guard address.hasPrefix("http://") else {
            throw OfferLoadError(.connectFailed, context: address, "--http takes http://HOST:PORT or unix:/path")
        }
        return HTTPEndpoint(baseURL: address)
    }
}

/// One kept-alive HTTP connection. Under a closed loop the runner uses ``start(_:_:)``: the answer is handled on the
/// HTTP client's loop thread, which sends the next request. Answers are read as the JSON-RPC client reads them: the
/// error, or the result located and only the members an outcome needs built.
struct HTTPLoadConnection: CallbackLoadConnection {
    let connection: HTTPConnection
    let headers: [(String, String)]

    func start(_ request: LoadRequest, _ done: @escaping @Sendable (CallOutcome) -> Void) {
        let method = request.method
        let fields = RPCLoadConnection.resultFields[method]
        // No params member for none (system.ping), as over a socket.
        let body = JSONSerializer.serialize(RPCRequest(method: method, params: request.wireParams, id: .int(1)).json)
        connection.start("POST", "/v1/rpc", headers: headers, body: body) { reply in
            done(Self.outcome(method: method, fields: fields, reply))
        }
    }

    static func outcome(
        method: String, fields: Set<String>?, _ reply: Result<HTTPClientResponse, HTTPClientError>
    ) -> CallOutcome {
        let response: HTTPClientResponse
        switch reply {
        case .success(let r): response = r
        case .failure(let error): return .transportError(String(describing: error))
        }
        switch RPCRawResult.response(response.body, checkingResult: false) {
        case .failure(let error): return .rpcError(code: error.code)
        case .success(let raw):
            do {
                return try RPCLoadConnection.outcome(method: method, fields: fields, raw: raw)
            } catch {
                return .transportError("unparsable result: \(error)")
            }
        case nil: return .transportError("HTTP \(response.status) without a JSON-RPC response")
        }
    }
}
