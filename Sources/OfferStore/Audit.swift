import Foundation
import Postgres

/// The audit log: who changed what for which tenant. Never holds secrets.
enum Audit {
    static func record(
        _ tx: PostgresTransaction, tenant: UUID, actor: String, action: String, detail: [String: String] = [:]
    ) async throws {
        let json = try PostgresJSON(encoding: detail)
        try await tx.query(
            "INSERT INTO audit_log (tenant_id, actor, action, detail) VALUES (\(tenant), \(actor), \(action), \(json))")
    }
}
