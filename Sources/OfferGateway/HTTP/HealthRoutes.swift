import Foundation
import HTTPServer
import JSONRPC
import Metrics
import OfferStore

/// `/livez`, `/readyz`, `/metrics`: what an orchestrator and Prometheus ask.
enum HealthRoutes {
    @Sendable static func livez(_ request: RouteRequest) async -> HTTPResponse {
        .json(200, JSONSerializer.serialize(["status": "ok"]))
    }

    /// 200 when the database answers and holds every migration this binary carries; else 503 with the reason.
    @Sendable static func readyz(_ request: RouteRequest) async -> HTTPResponse {
        switch await request.services.system.schemaState() {
        case .current:
            return .json(200, JSONSerializer.serialize(["status": "ok", "database": "ok", "schema": "current"]))
        case .databaseDown:
            var response = HTTPErrors.response(
                503, reason: "database_down", message: "the database does not answer", retryable: true)
            response.headers.append(("Retry-After", "1"))
            return response
        case .behind(let missing):
            let body: JSONValue = [
                "reason": "schema_not_current", "message": "migrations not applied: run offergate migrate",
                "retryable": true, "missingMigrations": .array(missing.map { .int($0) }),
            ]
            return .json(503, JSONSerializer.serialize(body))
        }
    }

    @Sendable static func metrics(_ request: RouteRequest) async -> HTTPResponse {
        HTTPResponse(
            status: 200, headers: [("Content-Type", MetricsRegistry.contentType)],
            body: Array(request.gateway.metrics.registry.exposition().utf8))
    }
}
