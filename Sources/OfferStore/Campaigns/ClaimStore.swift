import Foundation
import OfferDomain
import Postgres

/// A customer's claim of one of Apple's one-time codes.
public struct StoredClaim: Sendable, Hashable {
    public var claimId: UUID
    public var code: String
    public var customerId: String

    public init(claimId: UUID, code: String, customerId: String) {
        self.claimId = claimId
        self.code = code
        self.customerId = customerId
    }
}

/// What a claim batch sees inside its transaction, after it locked the campaign row.
public struct ClaimSnapshot: Sendable {
    /// The campaign row (`redeemed` counts claims).
    public var record: CampaignRecord
    /// The claims the batch's customers hold already, by customer.
    public var claims: [String: StoredClaim]
    /// Free codes, in the order they are handed out, at most as many as the batch has attempts.
    public var freeCodes: [String]
    /// Stored outcomes for the batch's idempotency keys.
    public var idempotency: [String: IdempotencyRecord]
}

/// The writes a claim batch decided on.
public struct ClaimWrites: Sendable {
    /// New claims; each code is one of the snapshot's free codes.
    public var claims: [(claim: StoredClaim, idempotencyKey: String?)]
    /// Outcomes to remember, by idempotency key.
    public var idempotency: [(key: String, record: IdempotencyRecord)]

    public init(
        claims: [(claim: StoredClaim, idempotencyKey: String?)], idempotency: [(key: String, record: IdempotencyRecord)]
    ) {
        self.claims = claims
        self.idempotency = idempotency
    }
}

/// Where a batch's claimed codes lie among the free codes it read (which are in code order, after the campaign's
/// claim cursor): the first and the last of them, which bound the batch's update, and the campaign's next cursor.
struct ClaimedSpan: Equatable {
    var first: String
    var last: String
    /// The last code of the run claimed from the start of the free codes, or nil to leave the cursor where it is
    /// (migration 0015). Every code before it is claimed now, so every free code sorts after it. `decide` hands
    /// codes out from the start, so the run is all of the batch's claims; a code it skipped would end the run
    /// there, never be passed.
    var cursor: String?
}

extension ClaimedSpan {
    /// Nil when nothing is claimed, or when a claimed code is not one of `free`. Positions in `free`, never a
    /// comparison of strings here: the database's collation orders codes.
    init?(free: [String], claimed: [String]) {
        let claimed = Set(claimed)
        let positions = free.indices.filter { claimed.contains(free[$0]) }
        guard let low = positions.first, let high = positions.last, positions.count == claimed.count else {
            return nil
        }
        first = free[low]
        last = free[high]
        cursor = free.prefix { claimed.contains($0) }.last
    }
}

/// Apple's one-time codes (migration 0008): imports and claim batches.
///
/// Claims go through the same group commit as redemptions: one transaction per batch locks the campaign row
/// (`FOR UPDATE`, which serialises the batches of every process), reads the batch customers' claims and as many
/// free codes as the batch has attempts, lets a pure `decide` pair them, then claims the codes with a conditional
/// `UPDATE … WHERE claim_id IS NULL` and raises the campaign's counter conditionally on its limit, and commits, in
/// one more round trip (two in all, as a redemption batch). A code row has
/// one claim column set, so no code can have two claims; the partial unique index on (campaign, customer) gives
/// no customer two codes, even if `decide` were wrong.
extension CampaignRepository {
    /// Stores codes for an appleOneTime campaign; returns how many were new and how many the tenant had already
    /// (in this or another campaign) or were repeated in `codes`. Throws `.notFound` for an unknown campaign,
    /// `.conflict` for a campaign of another kind.
    public func importAppleCodes(tenant: UUID, campaignId: String, codes: [String]) async throws(StoreError)
        -> (imported: Int, duplicates: Int)
    {
        try await storeCall {
            try await pool.withTransaction { tx in
                let kind = try await tx.query(
                    """
                    SELECT kind FROM campaigns WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId) FOR UPDATE
                    """
                ).scalar(String.self)
                guard let kind else { throw StoreError.notFound("campaign '\(campaignId)'") }
                guard kind == CampaignKind.appleOneTime.rawValue else {
                    throw StoreError.conflict("campaign '\(campaignId)' is not an appleOneTime campaign")
                }
                // A new code that does not sort after the campaign's claim cursor clears it (migration 0015's
                // trigger, which keeps the cursor true for every writer).
                let inserted =
                    try await tx.query(
                        """
                        INSERT INTO apple_codes (tenant_id, code, campaign_id)
                        SELECT \(tenant), x, \(campaignId) FROM unnest(\(codes)::text[]) AS x
                        ON CONFLICT DO NOTHING
                        """
                    ).affectedRows ?? 0
                try await tx.query(
                    """
                    UPDATE campaigns SET codes_generated = codes_generated + \(Int64(inserted))
                    WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId)
                    """)
                try await Audit.record(
                    tx, tenant: tenant, actor: "admin", action: "campaign.importCodes",
                    detail: ["campaignId": campaignId, "imported": String(inserted)])
                return (inserted, codes.count - inserted)
            }
        }
    }

    /// Commits one batch of claims of a campaign in ONE transaction and returns `decide`'s result after `COMMIT`.
    /// `wanted` is how many free codes the batch may need (its number of attempts); `at` is the claims' time (the
    /// gateway's decision clock, as signatures have). `decide` must be pure: it runs again when the transaction is
    /// retried.
    public func commitClaimBatch<T: Sendable>(
        tenant: UUID, campaignId: String, customers: [String], keys: [String], wanted: Int, at: Date,
        decide: @escaping @Sendable (ClaimSnapshot) throws -> (ClaimWrites, T)
    ) async throws(StoreError) -> T {
        try await storeCall {
            try await PostgresPool.retrying(maxAttempts: 4, when: Self.retriesBatch) {
                try await pool.withConnection { connection in
                    try await Self.claimTransaction(
                        connection, tenant: tenant, campaignId: campaignId, customers: customers, keys: keys,
                        wanted: wanted, at: at, decide: decide)
                }
            }
        }
    }

    /// The same without a task (`batchWithoutTask`): the transaction runs on a leased connection's own queue and
    /// `reply` is called there, once, right after it; the campaign's next batch starts from it.
    public func commitClaimBatch<T: Sendable>(
        tenant: UUID, campaignId: String, customers: [String], keys: [String], wanted: Int, at: Date,
        decide: @escaping @Sendable (ClaimSnapshot) throws -> (ClaimWrites, T),
        reply: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        batchWithoutTask(
            { connection in
                try Self.claimTransaction(
                    connection, tenant: tenant, campaignId: campaignId, customers: customers, keys: keys,
                    wanted: wanted, at: at, decide: decide)
            },
            retried: {
                try await self.commitClaimBatch(
                    tenant: tenant, campaignId: campaignId, customers: customers, keys: keys, wanted: wanted, at: at,
                    decide: decide)
            }, reply: reply)
    }

    /// The batch's reads besides the campaign row: the claims its customers hold, `wanted` free codes in code order
    /// after the campaign's claim cursor (migration 0015: the walk starts after the codes claimed before, whose
    /// entries stay in `apple_codes_free` until a vacuum), and the stored outcomes of its idempotency keys. One index
    /// probe per customer and key: the `LIMIT 1` keeps the planner from turning the customer lookup into a scan of
    /// every claim of the campaign, which PostgreSQL 15's generic plan did (as it did for redemptions, see
    /// `batchLookups`); `ClaimQueryPlanTests` checks the plans.
    static func claimLookups(tenant: UUID, campaignId: String, customers: [String], keys: [String], wanted: Int)
        -> [PostgresQuery]
    {
        [
            """
            SELECT c.customer_id, a.claim_id, a.code
            FROM unnest(\(customers)::text[]) AS c(customer_id)
            CROSS JOIN LATERAL (SELECT claim_id, code FROM apple_codes
                                WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId)
                                      AND customer_id = c.customer_id LIMIT 1) AS a
            """,
            """
            SELECT code FROM apple_codes
            WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId) AND claim_id IS NULL
                  AND code > COALESCE((SELECT claim_cursor FROM campaigns
                                       WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId)), '')
            ORDER BY code LIMIT \(Int64(wanted))
            """,
            idempotencyLookup(tenant: tenant, keys: keys),
        ]
    }

    /// Runs on the connection's own queue, `decide` included, like `batchTransaction` (no wait for the cooperative
    /// pool while the campaign row is locked).
    static func claimTransaction<T: Sendable>(
        _ connection: isolated PostgresConnection, tenant: UUID, campaignId: String, customers: [String],
        keys: [String],
        wanted: Int, at: Date, decide: @Sendable (ClaimSnapshot) throws -> (ClaimWrites, T)
    ) throws -> T {
        // On any failure the pool rolls the open transaction back when the connection is returned.
        let reads = try connection.pipelineNow(
            [
                "BEGIN ISOLATION LEVEL READ COMMITTED",
                """
                SELECT \(query: .unsafeRaw(columns)) FROM campaigns c
                WHERE c.tenant_id = \(tenant) AND c.campaign_id = \(campaignId) FOR UPDATE
                """,
            ] + claimLookups(tenant: tenant, campaignId: campaignId, customers: customers, keys: keys, wanted: wanted),
            prepared: true)
        guard reads.count == 5 else { throw StoreError.corrupt("pipeline returned \(reads.count) results") }
        _ = try reads[0].get()
        guard let campaignRow = try reads[1].get().first else {
            throw StoreError.notFound("campaign '\(campaignId)'")
        }
        let record = try decodeRecord(campaignRow, at: 0)
        var claims: [String: StoredClaim] = [:]
        for row in try reads[2].get() {
            let (customer, claimId, code) = try row.decode(String.self, UUID.self, String.self)
            claims[customer] = StoredClaim(claimId: claimId, code: code, customerId: customer)
        }
        let free = try reads[3].get().map { try $0.decode(String.self, at: 0) }
        var records: [String: IdempotencyRecord] = [:]
        for row in try reads[4].get() {
            let (key, hash, response) = try row.decode(String.self, String.self, String.self)
            records[key] = IdempotencyRecord(requestHash: hash, responseJSON: response)
        }
        let snapshot = ClaimSnapshot(record: record, claims: claims, freeCodes: free, idempotency: records)
        let (writes, value) = try decide(snapshot)
        let n = Int64(writes.claims.count)
        guard n > 0 else {
            try connection.queryNow("COMMIT")
            return value
        }
        guard let span = ClaimedSpan(free: free, claimed: writes.claims.map(\.claim.code)) else {
            throw StoreError.corrupt("decide() handed out a code that is not free")
        }
        // The COMMIT is pipelined with the write (one round trip, as for redemptions); so a mismatch between the
        // counter and the rows (only if `decide` admitted more than the locked row allows) must fail the statement
        // itself, which skips the COMMIT: the cast of a non-number fails at run time, never at planning.
        let results = try connection.pipelineNow(
            [claimWrite(tenant: tenant, campaignId: campaignId, writes: writes, span: span, at: at), "COMMIT"],
            prepared: true)
        guard results.count == 2 else { throw StoreError.corrupt("pipeline returned \(results.count) results") }
        let written = try results[0].get().first.map { try $0.decode(Int64.self, at: 0) }
        let commit = try results[1].get()
        guard commit.commandTag == "COMMIT" else {
            throw PostgresError(kind: .transactionAborted, message: "COMMIT of a claim batch rolled back")
        }
        guard written == n else { throw StoreError.corrupt("a claim batch wrote \(written ?? 0) of \(n) claims") }
        return value
    }

    /// A claim batch's one write: the campaign's counter (conditional on its limit) and claim cursor, the claims
    /// (`UPDATE … WHERE claim_id IS NULL` of the codes named), and the idempotency records of the keys whose claims
    /// were written; it returns the number of claims, and fails (a cast at run time) when any part wrote other than
    /// expected. The codes' update is bounded by `span` as well as joined on the codes: with the bounds in its index
    /// condition, no plan can read the campaign's other free codes, which a plan on lagging statistics did (it took
    /// a new campaign for almost empty and hashed all its free codes, 23 ms per batch of 30 against 50,000 free
    /// codes; `ClaimQueryPlanTests` checks the bounds).
    static func claimWrite(
        tenant: UUID, campaignId: String, writes: ClaimWrites, span: ClaimedSpan, at: Date
    ) -> PostgresQuery {
        let n = Int64(writes.claims.count)
        let keyList = writes.idempotency.map(\.key)
        return """
            WITH counted AS (
                UPDATE campaigns SET redeemed = redeemed + \(n), claim_cursor = COALESCE(\(span.cursor), claim_cursor)
                WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId)
                      AND (total_limit IS NULL OR redeemed + \(n) <= total_limit)
                RETURNING redeemed),
            claimed AS (
                UPDATE apple_codes AS a
                SET claim_id = x.id, customer_id = x.customer, claimed_at = \(at), idempotency_key = x.key
                FROM unnest(\(writes.claims.map(\.claim.claimId))::uuid[],
                            \(writes.claims.map(\.claim.code))::text[],
                            \(writes.claims.map(\.claim.customerId))::text[],
                            \(writes.claims.map(\.idempotencyKey))::text[]) AS x(id, code, customer, key)
                     CROSS JOIN counted
                WHERE a.tenant_id = \(tenant) AND a.campaign_id = \(campaignId)
                      AND a.code >= \(span.first) AND a.code <= \(span.last) AND a.code = x.code
                      AND a.claim_id IS NULL
                RETURNING a.idempotency_key),
            remembered AS (
                INSERT INTO idempotency_records (tenant_id, idempotency_key, method, request_hash, response)
                SELECT \(tenant), x.key, 'codes.claim', decode(x.hash, 'hex'), x.response::jsonb
                FROM unnest(\(keyList)::text[], \(writes.idempotency.map(\.record.requestHash))::text[],
                            \(writes.idempotency.map(\.record.responseJSON))::text[]) AS x(key, hash, response)
                WHERE x.key IN (SELECT idempotency_key FROM claimed)
                RETURNING 1),
            written AS (
                SELECT (SELECT count(*) FROM counted) AS counted, (SELECT count(*) FROM claimed) AS claimed,
                       (SELECT count(*) FROM remembered) AS remembered)
            SELECT CASE WHEN counted = 1 AND claimed = \(n) AND remembered = \(Int64(keyList.count))
                        THEN claimed
                        ELSE ('claim batch refused: counter ' || counted || ', codes ' || claimed)::bigint END
            FROM written
            """
    }

    /// A customer's claim in a campaign, or nil.
    public func claim(tenant: UUID, campaignId: String, customerId: String) async throws(StoreError) -> StoredClaim? {
        try await storeCall {
            try await pool.query(
                """
                SELECT claim_id, code FROM apple_codes
                WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId) AND customer_id = \(customerId)
                """, prepared: true
            ).first.map { row in
                let (claimId, code) = try row.decode(UUID.self, String.self)
                return StoredClaim(claimId: claimId, code: code, customerId: customerId)
            }
        }
    }
}
