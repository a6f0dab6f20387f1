import Foundation
import HTTPServer
import JSONRPC
import Testing

@testable import OfferGateway

/// The route table's matching: which routes a path selects (any method, in table order), with which parameters.
/// Paths are compared as bytes, segment by segment; `http_routes.py` checks the answers end to end.
@Suite struct HTTPRouteMatchingTests {
    static func matched(_ path: String) -> [String] {
        let request = HTTPRequest(
            method: "GET", path: path, headers: [], body: [], listenAddress: .tcp(host: "127.0.0.1", port: 0))
        return HTTPRouter.matches(request, in: HTTPRoutes.all).map { route, parameters in
            ([route.name] + parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" })
                .joined(separator: " ")
        }
    }

    @Test func literalPathsSelectTheirRoutes() {
        #expect(Self.matched("/livez") == ["livez"])
        #expect(Self.matched("/readyz") == ["readyz"])
        #expect(Self.matched("/metrics") == ["metrics"])
        #expect(Self.matched("/v1/rpc") == ["rpc"])
        #expect(Self.matched("/v1/openrpc.json") == ["openrpc"])
    }

    @Test func parametersAreWholeSegments() {
        #expect(Self.matched("/v1/apple/acme/retention") == ["apple_retention tenant=acme"])
        #expect(Self.matched("/v1/apple/acme/notifications") == ["apple_notifications tenant=acme"])
        #expect(Self.matched("/v1/apple/é€😀/retention") == ["apple_retention tenant=é€😀"])
        #expect(Self.matched("/v1/apple//retention") == ["apple_retention tenant="])
        // A combining mark after "/" makes one grapheme with it; the path is still split at the byte.
        #expect(Self.matched("/v1/apple/\u{301}x/retention") == ["apple_retention tenant=\u{301}x"])
    }

    @Test func anythingElseMatchesNothing() {
        for path in [
            "", "/", "*", "livez", "v1/rpc", "/livez/", "//livez", "/Livez", "/livez2", "/live", "/v1", "/v1/",
            "/v1/rpc/", "/v1/RPC",
            "/v1/apple/acme", "/v1/apple/acme/retention/", "/v1/apple/acme/other", "/v2/apple/acme/retention",
            "/v1/apple/a/b/retention", "/livez\u{301}", "/\u{212A}", "/v1/rpc\0",
        ] {
            #expect(Self.matched(path) == [], "\(path.debugDescription)")
        }
    }
}
