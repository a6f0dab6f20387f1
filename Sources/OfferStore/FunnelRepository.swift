import Foundation
import Postgres

/// One paywall event (`events.record`), validated by the gateway.
public struct FunnelEvent: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case impression, tap, dismiss, purchaseStarted, purchaseFailed
    }

    /// The app's id of the event (the idempotency key); nil: not deduplicated.
    public var eventId: String?
    public var customerId: String
    public var offerId: String
    public var kind: Kind
    public var at: Date

    public init(eventId: String?, customerId: String, offerId: String, kind: Kind, at: Date) {
        self.eventId = eventId
        self.customerId = customerId
        self.offerId = offerId
        self.kind = kind
        self.at = at
    }
}

/// The stages of the funnel, as the rollups name them.
public enum FunnelStage: String, Sendable, Hashable, CaseIterable {
    case offered, impression, tap, dismiss, purchaseStarted, purchaseFailed, signed, redeemed, claimed, purchased
    case renewed
}

/// How many `offers.best` answers chose an offer in one UTC hour (a gateway's in-memory counts, flushed).
public struct OfferedCount: Sendable, Hashable {
    public var tenant: UUID
    public var offerId: String
    /// Hours since 1970-01-01T00:00Z.
    public var hour: Int64
    public var count: Int64

    public init(tenant: UUID, offerId: String, hour: Int64, count: Int64) {
        self.tenant = tenant
        self.offerId = offerId
        self.hour = hour
        self.count = count
    }
}

/// The width of a funnel bucket (buckets are whole UTC hours or days).
public enum FunnelBucket: String, Sendable, Hashable {
    case hour, day
}

/// One stage's count in one bucket.
public struct FunnelCell: Sendable, Hashable {
    public var bucketStart: Date
    public var stage: FunnelStage
    public var count: Int

    public init(bucketStart: Date, stage: FunnelStage, count: Int) {
        self.bucketStart = bucketStart
        self.stage = stage
        self.count = count
    }
}

/// The offer funnel (migration 0009): recorded events, and the rollups per offer, UTC hour and stage that every
/// writer maintains in its own transaction (triggers for events, signatures, redemptions and verified
/// transactions; `addOffered` for the gateways' in-memory `offered` counts). Reads sum rollup rows, never events.
public struct FunnelRepository: Sendable {
    let pool: PostgresPool

    /// Stores events not stored before (per tenant and event id) in one statement; returns how many were new. Their
    /// rollups are added in the same transaction (trigger `funnel_events_rollup`). A retry whose events are all
    /// stored already is answered only once the standby has them (`waitForStandbyAtCommit`, pipelined with it).
    public func record(tenant: UUID, _ events: [FunnelEvent]) async throws(StoreError) -> Int {
        guard !events.isEmpty else { return 0 }
        let micros = events.map { Int64(($0.at.timeIntervalSince1970 * 1_000_000).rounded()) }
        return try await storeCall {
            let insert: PostgresQuery =
                """
                WITH stored AS (
                    INSERT INTO funnel_events (tenant_id, event_id, customer_id, offer_id, event, at)
                    SELECT \(tenant), COALESCE(e, 'og:' || gen_random_uuid()::text), c, o, k,
                           to_timestamp(us::double precision / 1000000)
                    FROM unnest(\(events.map(\.eventId))::text[], \(events.map(\.customerId))::text[],
                                \(events.map(\.offerId))::text[], \(events.map(\.kind.rawValue))::text[],
                                \(micros)::int8[]) AS r(e, c, o, k, us)
                    ON CONFLICT (tenant_id, event_id) DO NOTHING
                    RETURNING 1
                )
                SELECT count(*) FROM stored
                """
            let results = try await pool.pipeline([.waitForStandbyAtCommit, insert], prepared: true)
            guard results.count == 2 else { throw StoreError.corrupt("pipeline returned \(results.count) results") }
            _ = try results[0].get()
            guard let row = try results[1].get().first else { throw StoreError.corrupt("count returned no row") }
            return Int(try row.decode(Int64.self, at: 0))
        }
    }

    /// Adds `offers.best` counts (of any tenants) to the rollups in one statement. Counts of a tenant that no longer
    /// exists are dropped.
    public func addOffered(_ counts: [OfferedCount]) async throws(StoreError) {
        guard !counts.isEmpty else { return }
        try await storeCall {
            try await pool.query(
                """
                INSERT INTO funnel_rollups AS r (tenant_id, offer_id, bucket_start, stage, campaign_id, slot, count)
                SELECT x.t, x.o, to_timestamp(x.h * 3600), 'offered', '', offergate_funnel_slot(), sum(x.n)
                FROM unnest(\(counts.map(\.tenant))::uuid[], \(counts.map(\.offerId))::text[],
                            \(counts.map(\.hour))::int8[], \(counts.map(\.count))::int8[]) AS x(t, o, h, n)
                JOIN tenants ON tenants.tenant_id = x.t
                GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
                ON CONFLICT (tenant_id, offer_id, bucket_start, stage, campaign_id, slot)
                    DO UPDATE SET count = r.count + EXCLUDED.count
                """, prepared: true)
        }
    }

    /// The counts per bucket and stage of `offers` in the buckets from the one holding `from` up to the one holding
    /// the instant before `to`. With `campaignId`, redemptions and claims are that campaign's only. Buckets without
    /// any count are absent.
    public func funnel(
        tenant: UUID, offers: [String], campaignId: String?, from: Date, to: Date, bucket: FunnelBucket
    ) async throws(StoreError) -> [FunnelCell] {
        guard !offers.isEmpty else { return [] }
        return try await storeCall {
            try await pool.query(
                """
                SELECT date_trunc(\(bucket.rawValue), bucket_start, 'UTC') AS b, stage, sum(count)::int8
                FROM funnel_rollups
                WHERE tenant_id = \(tenant) AND offer_id = ANY(\(offers)::text[])
                  AND bucket_start >= date_trunc(\(bucket.rawValue), \(from)::timestamptz, 'UTC')
                  AND bucket_start < \(to)
                  AND (\(campaignId)::text IS NULL OR stage NOT IN ('redeemed', 'claimed')
                       OR campaign_id = \(campaignId)::text)
                GROUP BY 1, 2
                ORDER BY 1, 2
                """, prepared: true
            ).compactMap { row -> FunnelCell? in
                let (start, stage, count) = try row.decode(Date.self, String.self, Int64.self)
                // A stage this binary does not know (a newer gateway wrote it) is not shown.
                return FunnelStage(rawValue: stage).map { FunnelCell(bucketStart: start, stage: $0, count: Int(count)) }
            }
        }
    }

    /// How many events the tenant has stored (for operators and tests).
    public func eventCount(tenant: UUID) async throws(StoreError) -> Int {
        try await storeCall {
            let rows = try await pool.query("SELECT count(*) FROM funnel_events WHERE tenant_id = \(tenant)")
            guard let row = rows.first else { throw StoreError.corrupt("count returned no row") }
            return Int(try row.decode(Int64.self, at: 0))
        }
    }
}
