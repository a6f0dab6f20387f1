import Foundation
import HTTPClient
import JSONRPC
import OfferTestSupport
import Testing

/// The venv's Python (Apple's library, prometheus_client, jsonschema): `OFFERGATE_PYTHON`, else `.build/pyenv`.
func venvPython() throws -> String {
    let configured = ProcessInfo.processInfo.environment["OFFERGATE_PYTHON"] ?? ""
    let python =
        configured.isEmpty ? PackagePaths.root.appendingPathComponent(".build/pyenv/bin/python3").path : configured
    try #require(
        FileManager.default.isExecutableFile(atPath: python), "no venv Python at \(python): run ops/pyenv")
    return python
}

/// Runs one of `Tests/OfferGatewayTests/HTTPScripts/*.py` with the venv's Python.
func runHTTPScript(_ name: String, _ arguments: [String], timeout: Duration = .seconds(120)) async throws
    -> ChildProcess.Outcome
{
    let script = PackagePaths.root.appendingPathComponent("Tests/OfferGatewayTests/HTTPScripts/\(name)").path
    return try await ChildProcess.run(
        try venvPython(), [script] + arguments, environment: ChildProcess.environment(), timeout: timeout)
}

/// JSON-RPC over `POST /v1/rpc` with a key per request: the HTTP twin of `RPCClient.call`.
struct HTTPRPCClient: Sendable {
    let connection: HTTPConnection
    let apiKey: String?

    init(_ gateway: TestGateway, apiKey: String?) throws {
        connection = try gateway.httpConnection()
        self.apiKey = apiKey
    }

    /// The raw exchange: status and body.
    func post(_ body: [UInt8]) async throws -> HTTPClientResponse {
        var headers = [("Content-Type", "application/json")]
        if let apiKey { headers.append(("Authorization", "Bearer \(apiKey)")) }
        return try await connection.send("POST", "/v1/rpc", headers: headers, body: body)
    }

    /// One call: its result, or its error thrown as `RPCError`.
    func call(method: String, params: JSONValue = [:]) async throws -> JSONValue {
        let request: JSONValue = ["jsonrpc": "2.0", "id": "h1", "method": .string(method), "params": params]
        let response = try await post(JSONSerializer.serialize(request))
        let answer = try JSONParsing.parse(response.body)
        if let error = answer["error"], let rpc = RPCError(json: error) { throw rpc }
        return try #require(answer["result"], "no result: \(response.text)")
    }
}
