import Foundation
import HTTPServer
import JSONRPC

/// Every route of the HTTP listener (API.md §9), in this one table: to add a route, add a line here and its handler
/// (a thin adapter over one service, like a JSON-RPC method) in this folder. `name` is the route's label in the
/// metrics (bounded: never the raw path).
enum HTTPRoutes {
    static let all: [HTTPRoute] = [
        HTTPRoute("GET", "/livez", name: "livez", HealthRoutes.livez),
        HTTPRoute("GET", "/readyz", name: "readyz", HealthRoutes.readyz),
        HTTPRoute("GET", "/metrics", name: "metrics", HealthRoutes.metrics),
        HTTPRoute("POST", "/v1/rpc", name: "rpc", RPCRoute.handle, now: RPCRoute.handleNow),
        HTTPRoute("GET", "/v1/openrpc.json", name: "openrpc", RPCRoute.openRPC),
        HTTPRoute("POST", "/v1/apple/{tenant}/notifications", name: "apple_notifications", AppleRoutes.notifications),
        HTTPRoute("POST", "/v1/apple/{tenant}/retention", name: "apple_retention", RetentionRoute.handle),
    ]
}

/// One route: a method, a path pattern whose `{name}` segments match one path segment each, and its handler. A class,
/// so that routing hands a route on with one reference, not a copy of its fields.
final class HTTPRoute: Sendable {
    enum Segment: Sendable, Equatable {
        /// Matches this one segment, byte for byte (as RFC 9110 compares paths; no Unicode equivalence).
        case literal([UInt8])
        case parameter(String)
    }

    let method: String
    let pattern: [Segment]
    let name: String
    let handle: @Sendable (RouteRequest) async -> HTTPResponse
    /// Answers without a task when it can (see `HTTPImmediateHandler`); `handle` answers what it leaves.
    let handleNow: (@Sendable (RouteRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) -> Bool)?

    init(
        _ method: String, _ pattern: String, name: String,
        _ handle: @escaping @Sendable (RouteRequest) async -> HTTPResponse,
        now handleNow: (@Sendable (RouteRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) -> Bool)? = nil
    ) {
        self.method = method
        // Split as request paths are (`PathSegments`), so a pattern and the paths it matches are cut alike.
        let segments = PathSegments(pattern)
        self.pattern = segments.ranges.map { range in
            let part = segments.bytes[range]
            return part.first == UInt8(ascii: "{") && part.last == UInt8(ascii: "}")
                ? .parameter(String(decoding: part.dropFirst().dropLast(), as: UTF8.self)) : .literal(Array(part))
        }
        self.name = name
        self.handle = handle
        self.handleNow = handleNow
    }

    /// The path parameters when `path` matches the pattern. The literals are compared first, so a path that
    /// matches no route makes no strings.
    func match(_ path: PathSegments) -> [String: String]? {
        guard path.ranges.count == pattern.count else { return nil }
        for (range, part) in zip(path.ranges, pattern) {
            if case .literal(let literal) = part, !path.bytes[range].elementsEqual(literal) { return nil }
        }
        var parameters: [String: String] = [:]
        for (range, part) in zip(path.ranges, pattern) {
            if case .parameter(let name) = part {
                parameters[name] = String(decoding: path.bytes[range], as: UTF8.self)
            }
        }
        return parameters
    }
}

/// A request path's bytes and its segments after the first "/", split at each "/" byte (empty segments kept; what
/// comes before the first "/", normally nothing, is not a segment).
/// Split as bytes: splitting the `String` walks grapheme clusters, and its UTF-8 view's generic `split` was still
/// most of routing's cost (docs/perf/b9-retention.md, session 39).
struct PathSegments {
    let bytes: [UInt8]
    let ranges: [Range<Int>]

    init(_ path: String) {
        bytes = Array(path.utf8)
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(8)
        var start: Int?
        for index in bytes.indices where bytes[index] == UInt8(ascii: "/") {
            if let start { ranges.append(start..<index) }
            start = index + 1
        }
        if let start { ranges.append(start..<bytes.count) }
        self.ranges = ranges
    }
}

/// What a route handler gets: the request, its path parameters, and the gateway whose services it calls.
struct RouteRequest: Sendable {
    let http: HTTPRequest
    let parameters: [String: String]
    let gateway: Gateway

    var services: Services { gateway.services }
}

/// The HTTP listener's application side: routes a request, answers unknown paths and wrong methods, counts and
/// times every answer.
struct HTTPRouter: Sendable {
    let gateway: Gateway
    let routes: [HTTPRoute]

    init(gateway: Gateway, routes: [HTTPRoute] = HTTPRoutes.all) {
        self.gateway = gateway
        self.routes = routes
    }

    /// The route's at-once answer (`HTTPRoute.handleNow`), counted and timed like `respond`'s; false when the
    /// request's route has none or it declined (then `respond` answers it).
    func respondNow(_ request: HTTPRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) -> Bool {
        let started = ContinuousClock.now
        let method = Self.method(of: request)
        guard let (route, parameters) = Self.matches(request, in: routes).first(where: { $0.0.method == method }),
            let handleNow = route.handleNow
        else { return false }
        let metrics = gateway.metrics
        return handleNow(RouteRequest(http: request, parameters: parameters, gateway: gateway)) { response in
            Self.count(response, route: route.name, since: started, metrics)
            respond(response)
        }
    }

    func respond(_ request: HTTPRequest) async -> HTTPResponse {
        let started = ContinuousClock.now
        let matching = Self.matches(request, in: routes)
        let method = Self.method(of: request)
        let response: HTTPResponse
        let name: String
        if let (route, parameters) = matching.first(where: { $0.0.method == method }) {
            name = route.name
            response = await route.handle(RouteRequest(http: request, parameters: parameters, gateway: gateway))
        } else if let first = matching.first {
            name = first.0.name
            var refusal = HTTPErrors.response(
                405, reason: "method_not_allowed", message: "use \(matching.map(\.0.method).joined(separator: ", "))")
            refusal.headers.append(("Allow", matching.map(\.0.method).joined(separator: ", ")))
            response = refusal
        } else {
            name = "unmatched"
            response = HTTPErrors.response(404, reason: "not_found", message: "no such route")
        }
        Self.count(response, route: name, since: started, gateway.metrics)
        return response
    }

    /// The routes whose pattern matches `request`'s path (any method), with their path parameters, in table order.
    static func matches(_ request: HTTPRequest, in routes: [HTTPRoute]) -> [(HTTPRoute, [String: String])] {
        let path = PathSegments(request.path)
        return routes.compactMap { route in route.match(path).map { (route, $0) } }
    }

    /// HEAD is GET without the body (libmicrohttpd drops the body).
    static func method(of request: HTTPRequest) -> String { request.method == "HEAD" ? "GET" : request.method }

    /// Counts and times one answer of a route (`offergate_http_requests_total`, `…_duration_seconds`).
    static func count(
        _ response: HTTPResponse, route: String, since started: ContinuousClock.Instant, _ metrics: GatewayMetrics
    ) {
        let elapsed = ContinuousClock.now - started
        metrics.httpRequests.increment([route, String(response.status)])
        metrics.httpDuration.observe(elapsed / .seconds(1), [route])
    }
}

/// JSON error bodies of the HTTP routes: `{"reason", "message", "retryable"}` (and the JSON-RPC `code` when the
/// failure came from a service).
enum HTTPErrors {
    static func response(_ status: Int, reason: String, message: String, retryable: Bool = false) -> HTTPResponse {
        let body: JSONValue = [
            "reason": .string(reason), "message": .string(message), "retryable": .bool(retryable),
        ]
        return .json(status, JSONSerializer.serialize(body))
    }

    /// A service's failure as an HTTP answer: the status from `HTTPStatus`, the rendered error's reason and message
    /// (never a secret: the same text a JSON-RPC client gets). Logs the gateway's own failures.
    static func response(for error: any Error, route: String, gateway: Gateway) -> HTTPResponse {
        let (rpc, detail) = renderedError(error)
        if let detail, rpc.code != GatewayError.unavailableCode || gateway.logFailureOfOutage(detail) {
            gateway.logger.error("http request failed", ["http.route": route, "error.detail": detail])
        }
        var body: JSONObject = [
            "reason": .string(rpc.reason ?? "error"), "message": .string(rpc.message), "code": .int(rpc.code),
            "retryable": .bool(rpc.data?["retryable"]?.boolValue ?? false),
        ]
        if let retryAfter = rpc.data?["retryAfterMs"] { body["retryAfterMs"] = retryAfter }
        var response = HTTPResponse.json(HTTPStatus.of(rpc), JSONSerializer.serialize(.object(body)))
        if rpc.code == -32050 || rpc.code == -32029 { response.headers.append(("Retry-After", "1")) }
        return response
    }
}

/// The one mapping from JSON-RPC error codes (API.md §7) to HTTP status codes, for routes that answer with a
/// status (`/v1/apple/…`, and `/v1/rpc`'s 401). `POST /v1/rpc` otherwise answers `200` with the JSON-RPC error.
enum HTTPStatus {
    static func of(_ error: RPCError) -> Int { of(code: error.code) }

    static func of(code: Int) -> Int {
        switch code {
        case -32700, -32600, -32602, -32060: 400
        case -32001: 401
        case -32002: 403
        case -32601, -32004: 404
        case -32009: 409
        case -32020, -32030, -32040, -32041, -32042, -32043: 422
        case -32029: 429
        case -32050: 503
        default: 500
        }
    }
}
