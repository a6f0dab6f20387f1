import Foundation
import HTTPServer
import JSONRPC

/// `POST /v1/apple/{tenant}/retention`: Apple's Retention Messaging realtime request (API.md §12), a thin adapter
/// over `RetentionService`. `200` with one of Apple's answer shapes (the default message too, when the gateway
/// could not do better in time); `400 {"reason"}` for a body that is not `{"signedPayload"}` or a request Apple did
/// not sign for this tenant (`-32060` reasons); `404` for an unknown tenant or one without a configuration; `503`
/// when neither the tenant nor its configuration can be read (Apple then shows its own default).
enum RetentionRoute {
    @Sendable static func handle(_ request: RouteRequest) async -> HTTPResponse {
        // The budget counts from the request's arrival at the listener: time queued in this process counts too.
        do {
            let outcome = try await request.services.retention.answer(
                tenant: request.parameters["tenant"] ?? "", body: request.http.body,
                receivedAt: request.http.receivedAt)
            return .json(200, JSONSerializer.serialize(Wire.retentionAnswer(outcome.answer)))
        } catch {
            return HTTPErrors.response(for: error, route: "apple_retention", gateway: request.gateway)
        }
    }
}
