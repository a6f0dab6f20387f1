import Foundation
import Postgres

/// What the database held for one campaign at one moment.
public struct CampaignSnapshot: Sendable, Equatable {
    public let campaignId: String
    public let totalLimit: Int?
    /// Live (not rolled back) redemptions.
    public let recorded: Int
    /// The campaign row's own counter, `redeemed - rolled_back` (the gateway keeps it; shown beside the rows).
    public let counter: Int
    /// The ids (lowercase UUIDs) of the live redemptions, when asked for.
    public let ids: Set<String>?
}

/// Reads the facts of the invariant check from PostgreSQL, read-only: the campaigns, their live redemptions,
/// one-time codes with more than one live redemption, and the run's idempotency keys with more than one redemption.
///
/// Every query runs in a `READ ONLY` transaction on a connection of its own, so the check can never write.
public struct LedgerReader: Sendable {
    public let configuration: PostgresConfiguration

    /// - Parameter conninfo: a libpq conninfo or URI (`--database-url` / `DATABASE_URL`).
    public init(conninfo: String) throws(OfferLoadError) {
        do {
            configuration = try PostgresConfiguration(conninfo: conninfo, applicationName: "offer-load")
        } catch {
            throw OfferLoadError(.ledgerFailed, context: "--database-url", "not a usable connection string")
        }
    }

    /// The snapshot of `campaigns` of tenant `tenant` (slug); `withIds` also reads every live redemption id.
    public func snapshot(tenant: String, campaigns: [String], withIds: Bool) async throws(OfferLoadError)
        -> [CampaignSnapshot]
    {
        try await readOnly { connection in
            var out: [CampaignSnapshot] = []
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
                guard let row = rows.first else {
                    throw OfferLoadError(.ledgerFailed, context: campaign, "no such campaign in the database")
                }
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
                    CampaignSnapshot(
                        campaignId: campaign, totalLimit: limit, recorded: recorded, counter: counter, ids: ids))
            }
            return out
        }
    }

    /// One-time codes of the tenant's `campaigns` with more than one live redemption, and how many each has.
    public func oneTimeCodesRedeemedTwice(tenant: String, campaigns: [String]) async throws(OfferLoadError)
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
            var out: [String: Int] = [:]
            for row in rows {
                let (code, count) = try row.decode(String.self, Int.self)
                out[code] = count
            }
            return out
        }
    }

    /// Idempotency keys starting with `prefix` (the run's, `<runTag>-k`) with more than one redemption, rolled
    /// back or not.
    public func idempotencyKeysRedeemedTwice(tenant: String, prefix: String) async throws(OfferLoadError)
        -> [String: Int]
    {
        let pattern = prefix.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "%"
        return try await readOnly { connection in
            let rows = try await connection.query(
                """
                SELECT r.idempotency_key, count(*)::bigint
                  FROM redemptions r JOIN tenants t ON t.tenant_id = r.tenant_id
                 WHERE t.slug = \(tenant) AND r.idempotency_key LIKE \(pattern)
                 GROUP BY r.idempotency_key HAVING count(*) > 1
                """)
            var out: [String: Int] = [:]
            for row in rows {
                let (key, count) = try row.decode(String.self, Int.self)
                out[key] = count
            }
            return out
        }
    }

    /// Gathers the whole ledger after a run: `before` are the snapshots taken before it (nil: fresh campaigns).
    public func ledger(
        tenant: String, runTag: String, campaigns: [String], acknowledged: [AcknowledgedRedemption],
        before: [CampaignSnapshot]?
    ) async throws(OfferLoadError) -> RedemptionLedger {
        let after = try await snapshot(tenant: tenant, campaigns: campaigns, withIds: true)
        let facts = after.map { a in
            CampaignFacts(
                campaignId: a.campaignId, totalLimit: a.totalLimit,
                recordedBefore: before?.first(where: { $0.campaignId == a.campaignId })?.recorded ?? 0,
                recordedAfter: a.recorded, recordedIds: a.ids)
        }
        return RedemptionLedger(
            acknowledged: acknowledged, campaigns: facts,
            oneTimeCodeRedemptions: try await oneTimeCodesRedeemedTwice(tenant: tenant, campaigns: campaigns),
            idempotencyKeyRedemptions: try await idempotencyKeysRedeemedTwice(tenant: tenant, prefix: runTag + "-k"))
    }

    private func readOnly<T: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> T)
        async throws(OfferLoadError) -> T
    {
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration)
        } catch {
            throw OfferLoadError(.ledgerFailed, context: "--database-url", "cannot connect: \(error)")
        }
        do {
            _ = try await connection.simpleQuery(unsafeSQL: "BEGIN TRANSACTION READ ONLY")
            let value = try await body(connection)
            _ = try await connection.simpleQuery(unsafeSQL: "COMMIT")
            await connection.close()
            return value
        } catch let error as OfferLoadError {
            await connection.close()
            throw error
        } catch {
            await connection.close()
            throw OfferLoadError(.ledgerFailed, context: "database", String(describing: error))
        }
    }
}
