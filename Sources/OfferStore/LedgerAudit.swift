import Foundation
import Postgres

/// Read-only questions about the redemption ledger, for checking its invariants from outside a gateway (the load
/// harness after a run). The store owns the SQL; callers see plain values.
///
/// Every call runs in a `READ ONLY` transaction on a connection of its own (opened and closed by the call), so an
/// audit can never write, and never competes with a gateway's pool.
public struct LedgerAudit: Sendable {
    /// One campaign's counts at one moment.
    public struct CampaignCounts: Sendable, Equatable {
        public let campaignId: String
        public let totalLimit: Int?
        /// Live (not rolled back) redemption rows.
        public let recorded: Int
        /// The campaign row's own counter, `redeemed - rolled_back`.
        public let counter: Int
        /// The ids (lowercase UUIDs) of the live redemptions, when asked for.
        public let ids: Set<String>?
    }

    let configuration: PostgresConfiguration

    /// - Parameter url: a libpq connection string or URI. Throws `.database` for one that cannot be parsed (its
    ///   text is not echoed: it may hold a password).
    public init(url: String, applicationName: String = "offergate-audit") throws(StoreError) {
        do {
            configuration = try PostgresConfiguration(conninfo: url, applicationName: applicationName)
        } catch {
            throw StoreError.wrap(error)
        }
    }

    /// The counts of `campaigns` of the tenant with slug `tenant`, in the order asked; `withIds` also reads every
    /// live redemption id. Throws `.notFound` for a campaign the tenant does not have.
    public func campaigns(tenant: String, _ campaigns: [String], withIds: Bool) async throws(StoreError)
        -> [CampaignCounts]
    {
        try await readOnly { connection in
            var out: [CampaignCounts] = []
            for campaign in campaigns {
                let rows = try await connection.query(
                    """
                    SELECT c.total_limit, (c.redeemed - c.rolled_back)::bigint,
                           (SELECT count(*) FROM redemptions r
                             WHERE r.tenant_id = c.tenant_id AND r.campaign_id = c.campaign_id
                               AND r.rolled_back_at IS NULL)::bigint
                      FROM campaigns c JOIN tenants t ON t.tenant_id = c.tenant_id
                     WHERE t.slug = \(tenant) AND c.campaign_id = \(campaign)
                    """)
                guard let row = rows.first else { throw StoreError.notFound("campaign '\(campaign)'") }
                let (limit, counter, recorded) = try row.decode(Int?.self, Int.self, Int.self)
                var ids: Set<String>?
                if withIds {
                    let idRows = try await connection.query(
                        """
                        SELECT r.redemption_id::text FROM redemptions r JOIN tenants t ON t.tenant_id = r.tenant_id
                         WHERE t.slug = \(tenant) AND r.campaign_id = \(campaign) AND r.rolled_back_at IS NULL
                        """)
                    ids = Set(try idRows.map { try $0.decode(String.self, at: 0).lowercased() })
                }
                out.append(
                    CampaignCounts(
                        campaignId: campaign, totalLimit: limit, recorded: recorded, counter: counter, ids: ids))
            }
            return out
        }
    }

    /// One-time codes of the tenant's `campaigns` with more than one live redemption, and how many each has.
    public func oneTimeCodesRedeemedTwice(tenant: String, campaigns: [String]) async throws(StoreError)
        -> [String: Int]
    {
        try await readOnly { connection in
            let rows = try await connection.query(
                """
                SELECT r.code, count(*)::bigint FROM redemptions r JOIN tenants t ON t.tenant_id = r.tenant_id
                 WHERE t.slug = \(tenant) AND r.campaign_id = ANY(\(campaigns)) AND r.one_time
                   AND r.rolled_back_at IS NULL
                 GROUP BY r.code HAVING count(*) > 1
                """)
            return try Self.counts(rows)
        }
    }

    /// Idempotency keys starting with `prefix` with more than one redemption (rolled back or not), and how many.
    public func idempotencyKeysRedeemedTwice(tenant: String, prefix: String) async throws(StoreError)
        -> [String: Int]
    {
        let pattern =
            prefix.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "%"
        return try await readOnly { connection in
            let rows = try await connection.query(
                """
                SELECT r.idempotency_key, count(*)::bigint
                  FROM redemptions r JOIN tenants t ON t.tenant_id = r.tenant_id
                 WHERE t.slug = \(tenant) AND r.idempotency_key LIKE \(pattern)
                 GROUP BY r.idempotency_key HAVING count(*) > 1
                """)
            return try Self.counts(rows)
        }
    }

    /// How many of `nonces` (signature nonces, UUID text) the tenant's issued-signature ledger does not hold; a
    /// nonce that is not a UUID counts as missing.
    public func signaturesMissing(tenant: String, nonces: [String]) async throws(StoreError) -> Int {
        let wellFormed = nonces.filter { UUID(uuidString: $0) != nil }
        let malformed = nonces.count - wellFormed.count
        let missing = try await readOnly { connection in
            let rows = try await connection.query(
                """
                SELECT count(*)::bigint FROM unnest(\(wellFormed)::uuid[]) AS n(nonce)
                 WHERE NOT EXISTS (
                       SELECT 1 FROM issued_signatures s JOIN tenants t ON t.tenant_id = s.tenant_id
                        WHERE t.slug = \(tenant) AND s.nonce = n.nonce)
                """)
            return try rows.first.map { try $0.decode(Int.self, at: 0) } ?? 0
        }
        return missing + malformed
    }

    private static func counts(_ rows: PostgresRows) throws -> [String: Int] {
        var out: [String: Int] = [:]
        for row in rows {
            let (key, count) = try row.decode(String.self, Int.self)
            out[key] = count
        }
        return out
    }

    private func readOnly<T: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> T)
        async throws(StoreError) -> T
    {
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration)
        } catch {
            throw StoreError.wrap(error)
        }
        do {
            try await connection.simpleQuery(unsafeSQL: "BEGIN TRANSACTION READ ONLY")
            let value = try await body(connection)
            try await connection.simpleQuery(unsafeSQL: "COMMIT")
            await connection.close()
            return value
        } catch {
            await connection.close()
            throw StoreError.wrap(error)
        }
    }
}
