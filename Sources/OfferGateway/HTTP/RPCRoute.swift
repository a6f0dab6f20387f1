import Foundation
import HTTPServer
import JSONRPC

/// `POST /v1/rpc`: JSON-RPC over HTTP, through the same dispatcher and method table as the socket transports
/// (`RPCExchange.answer` over `Gateway.handle`). Each request is its own session, authenticated by its
/// `Authorization: Bearer <apiKey>` header.
enum RPCRoute {
    @Sendable static func handle(_ request: RouteRequest) async -> HTTPResponse {
        guard request.http.mediaType == "application/json" else {
            return HTTPErrors.response(
                415, reason: "unsupported_media_type", message: "send the JSON-RPC request as application/json")
        }
        let gateway = request.gateway
        let (info, session) = Self.session(request)
        var authenticated = false
        if let key = bearerKey(request.http.header("authorization")) {
            do {
                session.principal = try await request.services.tenants.authenticate(apiKey: key)
                authenticated = true
            } catch {
                let rendered = renderedError(error).rpc
                // A wrong key leaves the request anonymous (401 below unless it only asked open methods); anything
                // else (the database down) is answered as such.
                if rendered.code != -32001 {
                    return rpcFailure(rendered, status: HTTPStatus.of(rendered))
                }
            }
        }
        let answer = await RPCExchange.answer(
            request.http.body, handler: gateway, session: session, connection: info,
            maxDepth: JSONParsing.defaultMaxDepth)
        return response(answer, authenticated: authenticated)
    }

    /// `handle` without a task, when it can be (the socket transports' at-once path, decision 009, for HTTP): the
    /// request's key is told from memory (or there is none), and its one JSON-RPC request is answered at once or
    /// taken to be answered later without a task (`RPCHandler.answerNow`). Anything else (a key not seen yet, a
    /// batch, a method that needs a task) is left to `handle`, which gives the same answer.
    static func handleNow(_ request: RouteRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) -> Bool {
        guard request.http.mediaType == "application/json" else { return false }
        let gateway = request.gateway
        let (info, session) = Self.session(request)
        var authenticated = false
        if let key = bearerKey(request.http.header("authorization")) {
            switch request.services.tenants.authenticateFromMemory(apiKey: key) {
            case nil: return false
            case .success(let principal)?:
                session.principal = principal
                authenticated = true
            case .failure?: break  // a wrong key: anonymous, as in `handle`
            }
        }
        return RPCExchange.answerWithoutTask(
            request.http.body, handler: gateway, session: session, connection: info,
            maxDepth: JSONParsing.defaultMaxDepth
        ) { [authenticated] answer in
            respond(response(answer, authenticated: authenticated))
        }
    }

    /// The request's own connection and session: each HTTP request is a session of its own.
    static func session(_ request: RouteRequest) -> (ConnectionInfo, GatewaySession) {
        let info = ConnectionInfo(
            id: ConnectionIDs.next(), transport: .http, listenAddress: request.http.listenAddress, peer: nil)
        return (info, GatewaySession(connection: info))
    }

    /// The HTTP answer carrying a JSON-RPC answer: 204 when there is none (only notifications), 401 when an
    /// unauthenticated request was refused for want of a key, 200 otherwise.
    static func response(_ answer: [UInt8]?, authenticated: Bool) -> HTTPResponse {
        guard let answer else { return HTTPResponse(status: 204) }
        let body = answer.last == 0x0A ? Array(answer.dropLast()) : answer
        if !authenticated, asksForAuthentication(body) {
            var response = HTTPResponse.json(401, body)
            response.headers.append(("WWW-Authenticate", "Bearer"))
            return response
        }
        return .json(200, body)
    }

    /// `GET /v1/openrpc.json`: the same document as `rpc.discover`.
    @Sendable static func openRPC(_ request: RouteRequest) async -> HTTPResponse {
        .json(200, JSONSerializer.serialize(request.gateway.openRPCDocument))
    }

    /// The key of `Bearer <key>` (scheme case-insensitive, RFC 7235; spaces and tabs around it ignored); nil for no
    /// header. Another scheme, or none, is a key that cannot match (so: 401). Read over the header's bytes: it runs
    /// on every request, and Foundation's `trimmingCharacters` cost ~6 µs of it (docs/perf/README.md, session 18).
    static func bearerKey(_ header: String?) -> String? {
        guard let header else { return nil }
        let utf8 = header.utf8
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        guard let schemeStart = utf8.firstIndex(where: { !isSpace($0) }) else { return "" }
        let schemeEnd = utf8[schemeStart...].firstIndex(where: isSpace) ?? utf8.endIndex
        let scheme = utf8[schemeStart..<schemeEnd]
        // ASCII letters only: `| 0x20` lowers a capital and leaves a small letter as it is.
        guard scheme.elementsEqual("bearer".utf8, by: { $0 | 0x20 == $1 }),
            let keyStart = utf8[schemeEnd...].firstIndex(where: { !isSpace($0) })
        else { return "" }
        var keyEnd = utf8.endIndex
        while case let last = utf8.index(before: keyEnd), isSpace(utf8[last]) { keyEnd = last }
        return String(header[keyStart..<keyEnd])
    }

    /// Whether an unauthenticated answer refused something for want of a key (-32001 anywhere in it).
    static func asksForAuthentication(_ body: [UInt8]) -> Bool {
        guard let value = try? JSONParsing.parse(body) else { return false }
        let responses = value.arrayValue ?? [value]
        return responses.contains { $0["error"]?["code"]?.int64Value == -32001 }
    }

    static func rpcFailure(_ error: RPCError, status: Int) -> HTTPResponse {
        var bytes: [UInt8] = []
        RPCResponse(id: .null, result: .failure(error)).append(to: &bytes)
        return .json(status, bytes)
    }
}
