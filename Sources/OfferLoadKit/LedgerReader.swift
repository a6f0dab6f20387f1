import Foundation
import OfferStore

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

/// Reads the facts of the invariant check from PostgreSQL, read-only, through the store's `LedgerAudit` (the store
/// owns the SQL against its tables): the campaigns, their live redemptions, one-time codes with more than one live
/// redemption, and the run's idempotency keys with more than one redemption.
///
/// Every query runs in a `READ ONLY` transaction on a connection of its own, so the check can never write.
public struct LedgerReader: Sendable {
    let audit: LedgerAudit

    /// - Parameter conninfo: a libpq conninfo or URI (`--database-url` / `DATABASE_URL`).
    public init(conninfo: String) throws(OfferLoadError) {
        do {
            audit = try LedgerAudit(url: conninfo, applicationName: "offer-load")
        } catch {
            throw OfferLoadError(.ledgerFailed, context: "--database-url", "not a usable connection string")
        }
    }

    /// The snapshot of `campaigns` of tenant `tenant` (slug); `withIds` also reads every live redemption id.
    public func snapshot(tenant: String, campaigns: [String], withIds: Bool) async throws(OfferLoadError)
        -> [CampaignSnapshot]
    {
        do {
            return try await audit.campaigns(tenant: tenant, campaigns, withIds: withIds).map {
                CampaignSnapshot(
                    campaignId: $0.campaignId, totalLimit: $0.totalLimit, recorded: $0.recorded, counter: $0.counter,
                    ids: $0.ids)
            }
        } catch {
            throw Self.ledgerError(error)
        }
    }

    /// One-time codes of the tenant's `campaigns` with more than one live redemption, and how many each has.
    public func oneTimeCodesRedeemedTwice(tenant: String, campaigns: [String]) async throws(OfferLoadError)
        -> [String: Int]
    {
        do {
            return try await audit.oneTimeCodesRedeemedTwice(tenant: tenant, campaigns: campaigns)
        } catch {
            throw Self.ledgerError(error)
        }
    }

    /// Idempotency keys starting with `prefix` (the run's, `<runTag>-k`) with more than one redemption, rolled
    /// back or not.
    public func idempotencyKeysRedeemedTwice(tenant: String, prefix: String) async throws(OfferLoadError)
        -> [String: Int]
    {
        do {
            return try await audit.idempotencyKeysRedeemedTwice(tenant: tenant, prefix: prefix)
        } catch {
            throw Self.ledgerError(error)
        }
    }

    /// How many of the answered signatures' `nonces` the tenant's issued-signature ledger does not hold.
    public func signaturesMissing(tenant: String, nonces: [String]) async throws(OfferLoadError) -> Int {
        do {
            return try await audit.signaturesMissing(tenant: tenant, nonces: nonces)
        } catch {
            throw Self.ledgerError(error)
        }
    }

    static func ledgerError(_ error: StoreError) -> OfferLoadError {
        switch error {
        case .notFound(let what): OfferLoadError(.ledgerFailed, context: what, "no such campaign in the database")
        case .unavailable: OfferLoadError(.ledgerFailed, context: "--database-url", "cannot connect: \(error)")
        default: OfferLoadError(.ledgerFailed, context: "database", String(describing: error))
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
}
