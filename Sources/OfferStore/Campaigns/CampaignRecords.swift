import Foundation
import OfferDomain
import Postgres

/// One code of a campaign, for `campaigns.codes`.
public struct CodeListing: Sendable, Hashable {
    public var code: String
    public var oneTime: Bool
    public var createdAt: Date
    /// When the live redemption of a one-time code happened, or when Apple's code was claimed (nil: not redeemed
    /// or claimed, or a custom code).
    public var redeemedAt: Date?
    /// One of Apple's codes (appleOneTime campaign): `redeemedAt` is when it was claimed.
    public var apple: Bool = false
}

/// Counters for `campaigns.stats`.
public struct CampaignStats: Sendable, Hashable {
    public var record: CampaignRecord
    /// Distinct codes with a live redemption (appleOneTime: codes claimed).
    public var codesRedeemed: Int
    /// Codes claimed (appleOneTime campaigns; 0 for the others).
    public var claimed: Int = 0
    /// Live redemptions, or claims, that a verified App Store transaction attributed a purchase to.
    public var purchased: Int = 0
}

/// Campaign records for operators: the list of a tenant's campaigns, one campaign's counters, its codes.
extension CampaignRepository {
    /// Every campaign of a tenant, by id.
    public func list(tenant: UUID) async throws(StoreError) -> [CampaignRecord] {
        try await storeCall {
            try await pool.query(
                """
                SELECT \(query: .unsafeRaw(Self.columns)) FROM campaigns c
                WHERE c.tenant_id = \(tenant) ORDER BY c.campaign_id
                """
            ).map { try Self.decodeRecord($0, at: 0) }
        }
    }

    /// Counters plus the number of distinct redeemed codes.
    public func stats(tenant: UUID, campaignId: String) async throws(StoreError) -> CampaignStats {
        guard let record = try await find(tenant: tenant, campaignId: campaignId) else {
            throw .notFound("campaign '\(campaignId)'")
        }
        if record.campaign.kind == .appleOneTime {
            let purchased: Int64 = try await storeCall {
                try await pool.query(
                    """
                    SELECT count(*) FROM apple_codes
                    WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId) AND purchased_at IS NOT NULL
                    """
                ).scalar(Int64.self) ?? 0
            }
            return CampaignStats(
                record: record, codesRedeemed: record.redeemed, claimed: record.redeemed, purchased: Int(purchased))
        }
        let row = try await storeCall {
            try await pool.query(
                """
                SELECT count(*) FILTER (WHERE one_time), count(*) FILTER (WHERE purchased_at IS NOT NULL)
                FROM redemptions
                WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId) AND rolled_back_at IS NULL
                """
            ).first.map { try $0.decode(Int64.self, Int64.self) }
        }
        let (oneTime, purchased) = row ?? (0, 0)
        let codesRedeemed = record.campaign.kind == .custom ? (record.redeemed > 0 ? 1 : 0) : Int(oneTime)
        return CampaignStats(record: record, codesRedeemed: codesRedeemed, purchased: Int(purchased))
    }

    /// A page of a campaign's codes in code order, after `after` (keyset paging).
    public func codes(tenant: UUID, campaignId: String, after: String?, limit: Int, apple: Bool = false)
        async throws(StoreError) -> [CodeListing]
    {
        if apple {
            return try await storeCall {
                try await pool.query(
                    """
                    SELECT code, imported_at, claimed_at FROM apple_codes
                    WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId)
                          AND (\(after)::text IS NULL OR code > \(after))
                    ORDER BY code LIMIT \(Int64(limit))
                    """, prepared: true
                ).map { row in
                    let (code, imported, claimed) = try row.decode(String.self, Date.self, Date?.self)
                    return CodeListing(code: code, oneTime: true, createdAt: imported, redeemedAt: claimed, apple: true)
                }
            }
        }
        return try await storeCall {
            try await pool.query(
                """
                SELECT oc.code, oc.one_time, oc.created_at,
                       (SELECT r.redeemed_at FROM redemptions r
                        WHERE r.tenant_id = oc.tenant_id AND r.code = oc.code AND r.one_time
                              AND r.rolled_back_at IS NULL)
                FROM offer_codes oc
                WHERE oc.tenant_id = \(tenant) AND oc.campaign_id = \(campaignId)
                      AND (\(after)::text IS NULL OR oc.code > \(after))
                ORDER BY oc.code LIMIT \(Int64(limit))
                """, prepared: true
            ).map { row in
                let (code, oneTime, created, redeemedAt) = try row.decode(String.self, Bool.self, Date.self, Date?.self)
                return CodeListing(code: code, oneTime: oneTime, createdAt: created, redeemedAt: redeemedAt)
            }
        }
    }
}
