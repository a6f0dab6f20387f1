import Foundation
import HTTPServer
import JSONRPC
import OfferStore

/// The URLs Apple calls (API.md §9): no API key, Apple's signature is the proof.
enum AppleRoutes {
    /// App Store Server Notifications V2: `200` applied or duplicate; `400 {"reason"}` when rejected; `404` for an
    /// unknown tenant; `503` while the database is down (Apple retries).
    @Sendable static func notifications(_ request: RouteRequest) async -> HTTPResponse {
        do {
            let tenant = try await request.tenant()
            guard let payload = signedPayload(request.http.body) else {
                return HTTPErrors.response(
                    400, reason: "invalid_body", message: "the body must be a JSON object with signedPayload")
            }
            let result = try await request.services.apple.notification(
                AppleDataService.NotificationRequest(signedPayload: payload), tenant: tenant)
            return .json(200, JSONSerializer.serialize(Wire.notification(result)))
        } catch {
            return HTTPErrors.response(for: error, route: "apple_notifications", gateway: request.gateway)
        }
    }

    /// `signedPayload` of a `{"signedPayload": "…"}` body.
    static func signedPayload(_ body: [UInt8]) -> String? {
        guard let value = try? JSONParsing.parse(body) else { return nil }
        return value["signedPayload"]?.stringValue
    }
}

extension RouteRequest {
    /// The tenant named by the `{tenant}` path segment (`-32004 unknown_tenant` for any other string, `../`
    /// included: only a well-formed slug reaches the database).
    func tenant() async throws -> TenantRecord {
        try await services.tenants.find(slug: parameters["tenant"] ?? "")
    }
}
