import Foundation
import OfferDomain
import Postgres

/// What a (normalised) code stands for.
public struct CodeLookup: Sendable, Hashable {
    public var code: String
    public var oneTime: Bool
    public var record: CampaignRecord
}

/// A stored outcome of an idempotent call.
public struct IdempotencyRecord: Sendable, Hashable {
    /// Lowercase hex SHA-256 of the call's method and normalised params.
    public var requestHash: String
    /// The JSON result first returned (without `replayed`).
    public var responseJSON: String

    public init(requestHash: String, responseJSON: String) {
        self.requestHash = requestHash
        self.responseJSON = responseJSON
    }
}

/// What a redemption batch sees inside its transaction, after it locked the campaign row.
public struct RedemptionSnapshot: Sendable {
    /// The campaign row (counters as of the lock).
    public var record: CampaignRecord
    /// The database's `now()` (transaction start).
    public var databaseNow: Date
    /// Live redemptions of this campaign by each customer of the batch (absent = 0).
    public var perCustomer: [String: Int]
    /// One-time codes of the batch that already have a live redemption.
    public var usedCodes: Set<String>
    /// Stored outcomes for the batch's idempotency keys.
    public var idempotency: [String: IdempotencyRecord]
}

/// One redemption row to insert.
public struct NewRedemption: Sendable, Hashable {
    public var redemptionId: UUID
    public var code: String
    public var oneTime: Bool
    public var customerId: String
    public var idempotencyKey: String?

    public init(redemptionId: UUID, code: String, oneTime: Bool, customerId: String, idempotencyKey: String?) {
        self.redemptionId = redemptionId
        self.code = code
        self.oneTime = oneTime
        self.customerId = customerId
        self.idempotencyKey = idempotencyKey
    }
}

/// The writes a redemption batch decided on.
public struct RedemptionWrites: Sendable {
    public var redemptions: [NewRedemption]
    /// Outcomes to remember, by idempotency key.
    public var idempotency: [(key: String, record: IdempotencyRecord)]

    public init(redemptions: [NewRedemption], idempotency: [(key: String, record: IdempotencyRecord)]) {
        self.redemptions = redemptions
        self.idempotency = idempotency
    }
}

/// The redemption store: code lookups, usage, idempotency records, redemption batches and rollbacks.
extension CampaignRepository {
    /// The campaign a normalised code belongs to, or nil.
    public func lookup(tenant: UUID, code: String) async throws(StoreError) -> CodeLookup? {
        try await storeCall {
            try await pool.query(
                """
                SELECT oc.one_time, \(query: .unsafeRaw(Self.columns))
                FROM offer_codes oc JOIN campaigns c ON c.tenant_id = oc.tenant_id AND c.campaign_id = oc.campaign_id
                WHERE oc.tenant_id = \(tenant) AND oc.code = \(code)
                """, prepared: true
            ).first.map { row in
                CodeLookup(
                    code: code, oneTime: try row.decode(Bool.self, at: 0), record: try Self.decodeRecord(row, at: 1))
            }
        }
    }

    /// Live redemptions of a campaign by one customer, and whether a one-time code has a live redemption.
    public func usage(tenant: UUID, campaignId: String, customerId: String, oneTimeCode: String?)
        async throws(StoreError) -> (customerRedeemed: Int, codeUsed: Bool)
    {
        try await storeCall {
            let row = try await pool.query(
                """
                SELECT (SELECT count(*) FROM redemptions WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId)
                        AND customer_id = \(customerId) AND rolled_back_at IS NULL),
                       EXISTS (SELECT 1 FROM redemptions WHERE tenant_id = \(tenant) AND code = \(oneTimeCode)
                               AND one_time AND rolled_back_at IS NULL)
                """, prepared: true
            ).first
            guard let row else { throw StoreError.corrupt("usage query returned no row") }
            let (count, used) = try row.decode(Int64.self, Bool.self)
            return (Int(count), used)
        }
    }

    /// Commits one batch of redemptions of a campaign in ONE transaction and returns `decide`'s result after
    /// `COMMIT` succeeded.
    ///
    /// Two pipelined round trips. First: `BEGIN`, lock the campaign row (`FOR UPDATE`, which serialises the
    /// batches of all processes), then read the batch customers' live redemption counts, the batch's one-time codes
    /// already in use and the stored outcomes of its idempotency keys. `decide` chooses. Second: one statement
    /// that raises the counter with a conditional `UPDATE … WHERE redeemed + n <= total_limit`, inserts the
    /// redemptions from `unnest` arrays only if that update happened, and inserts the idempotency records of the
    /// rows inserted; then `COMMIT`. So the counter and the rows move together even if `decide` were wrong (then
    /// nothing is written and this throws `.corrupt`), and a failing statement skips the `COMMIT`.
    ///
    /// `decide` must be pure: it runs again when the transaction is retried (deadlock, serialization failure, or
    /// an idempotency key taken concurrently by another campaign's batch).
    public func commitRedemptionBatch<T: Sendable>(
        tenant: UUID, campaignId: String, customers: [String], oneTimeCodes: [String], keys: [String],
        decide: @escaping @Sendable (RedemptionSnapshot) throws -> (RedemptionWrites, T)
    ) async throws(StoreError) -> T {
        // The transaction's BEGIN is pipelined with its reads, so it cannot use withTransaction; it shares its retry
        // loop, also retrying a unique violation (an idempotency key taken meanwhile by another campaign's batch).
        try await storeCall {
            try await PostgresPool.retrying(maxAttempts: 4, when: Self.retriesBatch) {
                try await pool.withConnection { connection in
                    try await Self.batchTransaction(
                        connection, tenant: tenant, campaignId: campaignId, customers: customers,
                        oneTimeCodes: oneTimeCodes, keys: keys, decide: decide)
                }
            }
        }
    }

    /// The same without a task (`batchWithoutTask`): the transaction runs on a leased connection's own queue and
    /// `reply` is called there, once, right after it; the campaign's next batch starts from it.
    public func commitRedemptionBatch<T: Sendable>(
        tenant: UUID, campaignId: String, customers: [String], oneTimeCodes: [String], keys: [String],
        decide: @escaping @Sendable (RedemptionSnapshot) throws -> (RedemptionWrites, T),
        reply: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        batchWithoutTask(
            { connection in
                try Self.batchTransaction(
                    connection, tenant: tenant, campaignId: campaignId, customers: customers,
                    oneTimeCodes: oneTimeCodes, keys: keys, decide: decide)
            },
            retried: {
                try await self.commitRedemptionBatch(
                    tenant: tenant, campaignId: campaignId, customers: customers, oneTimeCodes: oneTimeCodes,
                    keys: keys, decide: decide)
            }, reply: reply)
    }

    /// The batch's reads besides the campaign row: live redemption counts of its customers, its one-time codes
    /// already in use, and the stored outcomes of its idempotency keys.
    ///
    /// One index lookup per customer, code and key, written as correlated subqueries on purpose: with
    /// `= ANY(array)` on a growing table whose statistics lag (autovacuum has not analysed it yet), PostgreSQL 15's
    /// generic plan read every redemption of the campaign (or every idempotency record of the tenant) and filtered
    /// them, for each batch: 3-10 ms per batch at 20,000 rows, and growing (auto_explain showed it). These forms
    /// cannot be planned that way; `RedemptionQueryPlanTests` checks their plans on a table without statistics.
    static func batchLookups(
        tenant: UUID, campaignId: String, customers: [String], oneTimeCodes: [String], keys: [String]
    ) -> [PostgresQuery] {
        [
            """
            SELECT c.customer_id,
                   (SELECT count(*) FROM redemptions r
                    WHERE r.tenant_id = \(tenant) AND r.campaign_id = \(campaignId)
                          AND r.customer_id = c.customer_id AND r.rolled_back_at IS NULL)
            FROM unnest(\(customers)::text[]) AS c(customer_id)
            """,
            """
            SELECT c.code FROM unnest(\(oneTimeCodes)::text[]) AS c(code)
            WHERE (SELECT true FROM redemptions r
                   WHERE r.tenant_id = \(tenant) AND r.code = c.code AND r.one_time AND r.rolled_back_at IS NULL
                   LIMIT 1)
            """,
            idempotencyLookup(tenant: tenant, keys: keys),
        ]
    }

    /// The stored outcomes of idempotency keys: key, hex request hash, response JSON (one index lookup per key).
    static func idempotencyLookup(tenant: UUID, keys: [String]) -> PostgresQuery {
        """
        SELECT r.idempotency_key, encode(r.request_hash, 'hex'), r.response::text
        FROM unnest(\(keys)::text[]) AS k(key)
        CROSS JOIN LATERAL (SELECT idempotency_key, request_hash, response FROM idempotency_records
                            WHERE tenant_id = \(tenant) AND idempotency_key = k.key LIMIT 1) AS r
        """
    }

    /// Runs on the connection's own queue (`isolated`, synchronous), `decide` included: between the reads and the
    /// writes, while the campaign row is locked, nothing waits for another thread.
    static func batchTransaction<T: Sendable>(
        _ connection: isolated PostgresConnection, tenant: UUID, campaignId: String, customers: [String],
        oneTimeCodes: [String], keys: [String], decide: @Sendable (RedemptionSnapshot) throws -> (RedemptionWrites, T)
    ) throws -> T {
        // On any failure the pool rolls the open transaction back when the connection is returned.
        let reads = try connection.pipelineNow(
            [
                "BEGIN ISOLATION LEVEL READ COMMITTED",
                """
                SELECT \(query: .unsafeRaw(columns)), now() FROM campaigns c
                WHERE c.tenant_id = \(tenant) AND c.campaign_id = \(campaignId) FOR UPDATE
                """,
            ]
                + batchLookups(
                    tenant: tenant, campaignId: campaignId, customers: customers, oneTimeCodes: oneTimeCodes,
                    keys: keys),
            prepared: true)
        guard reads.count == 5 else { throw StoreError.corrupt("pipeline returned \(reads.count) results") }
        _ = try reads[0].get()
        guard let campaignRow = try reads[1].get().first else {
            throw StoreError.notFound("campaign '\(campaignId)'")
        }
        let record = try decodeRecord(campaignRow, at: 0)
        let databaseNow = try campaignRow.decode(Date.self, at: Self.columnCount)
        var perCustomer: [String: Int] = [:]
        for row in try reads[2].get() {
            let (customer, count) = try row.decode(String.self, Int64.self)
            if count > 0 { perCustomer[customer] = Int(count) }
        }
        var used = Set<String>()
        for row in try reads[3].get() { used.insert(try row.decode(String.self, at: 0)) }
        var records: [String: IdempotencyRecord] = [:]
        for row in try reads[4].get() {
            let (key, hash, response) = try row.decode(String.self, String.self, String.self)
            records[key] = IdempotencyRecord(requestHash: hash, responseJSON: response)
        }
        let snapshot = RedemptionSnapshot(
            record: record, databaseNow: databaseNow, perCustomer: perCustomer, usedCodes: used, idempotency: records)
        let (writes, value) = try decide(snapshot)
        let n = Int64(writes.redemptions.count)
        guard n > 0 else {
            try connection.queryNow("COMMIT")
            return value
        }
        let ids = writes.redemptions.map(\.redemptionId)
        let codes = writes.redemptions.map(\.code)
        let oneTime = writes.redemptions.map(\.oneTime)
        let customerIds = writes.redemptions.map(\.customerId)
        let redemptionKeys: [String?] = writes.redemptions.map(\.idempotencyKey)
        let keys = writes.idempotency.map(\.key)
        let hashes = writes.idempotency.map(\.record.requestHash)
        let responses = writes.idempotency.map(\.record.responseJSON)
        let results = try connection.pipelineNow(
            [
                """
                WITH counted AS (
                    UPDATE campaigns SET redeemed = redeemed + \(n)
                    WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId)
                          AND (total_limit IS NULL OR redeemed + \(n) <= total_limit)
                    RETURNING redeemed),
                inserted AS (
                    INSERT INTO redemptions (tenant_id, redemption_id, campaign_id, code, one_time, customer_id,
                                             idempotency_key)
                    SELECT \(tenant), r.id, \(campaignId), r.code, r.one_time, r.customer, r.key
                    FROM unnest(\(ids)::uuid[], \(codes)::text[], \(oneTime)::bool[], \(customerIds)::text[],
                                \(redemptionKeys)::text[]) AS r(id, code, one_time, customer, key)
                         CROSS JOIN counted
                    RETURNING idempotency_key),
                remembered AS (
                    INSERT INTO idempotency_records (tenant_id, idempotency_key, method, request_hash, response)
                    SELECT \(tenant), x.key, 'codes.redeem', decode(x.hash, 'hex'), x.response::jsonb
                    FROM unnest(\(keys)::text[], \(hashes)::text[], \(responses)::text[]) AS x(key, hash, response)
                    WHERE x.key IN (SELECT idempotency_key FROM inserted)
                    RETURNING 1)
                SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM remembered)
                """,
                "COMMIT",
            ], prepared: true)
        guard results.count == 2 else { throw StoreError.corrupt("pipeline returned \(results.count) results") }
        let written = try results[0].get().first.map { try $0.decode(Int64.self, Int64.self) }
        let commit = try results[1].get()
        guard commit.commandTag == "COMMIT" else {
            throw PostgresError(kind: .transactionAborted, message: "COMMIT of a redemption batch rolled back")
        }
        // Only if `decide` admitted more than the locked counter allowed: nothing was written (the insert depends
        // on the counter update), and no request of the batch may be told it succeeded.
        guard let written, written.0 == n, written.1 == Int64(keys.count) else {
            throw StoreError.corrupt("the campaign counter refused a batch of \(n) that decide() admitted")
        }
        return value
    }

    /// Rolls a redemption back (idempotent): marks it, gives the capacity back. Returns whether it was already
    /// rolled back. Throws `.notFound` for an unknown redemption of this tenant.
    public func rollback(tenant: UUID, redemptionId: UUID, reason: String?) async throws(StoreError) -> Bool {
        try await storeCall {
            try await pool.withTransaction { tx -> Bool in
                let campaign = try await tx.query(
                    """
                    SELECT campaign_id FROM redemptions WHERE tenant_id = \(tenant) AND redemption_id = \(redemptionId)
                    """, prepared: true
                ).scalar(String.self)
                guard let campaign else {
                    throw StoreError.notFound("redemption '\(redemptionId.uuidString.lowercased())'")
                }
                // Lock order: campaign row first, like redemption batches.
                try await tx.query(
                    "SELECT 1 FROM campaigns WHERE tenant_id = \(tenant) AND campaign_id = \(campaign) FOR UPDATE",
                    prepared: true)
                let updated = try await tx.query(
                    """
                    UPDATE redemptions SET rolled_back_at = now(), rollback_reason = \(reason)
                    WHERE tenant_id = \(tenant) AND redemption_id = \(redemptionId) AND rolled_back_at IS NULL
                    """, prepared: true)
                guard (updated.affectedRows ?? 0) == 1 else { return true }
                try await tx.query(
                    """
                    UPDATE campaigns SET redeemed = redeemed - 1, rolled_back = rolled_back + 1
                    WHERE tenant_id = \(tenant) AND campaign_id = \(campaign)
                    """, prepared: true)
                return false
            }
        }
    }
}

/// A redemption as `offers.sign` checks it: whose it is, which offer its campaign grants, whether it is live.
public struct RedemptionRecord: Sendable, Hashable {
    public var redemptionId: UUID
    public var campaignId: String
    public var offerId: String
    public var customerId: String
    /// Not rolled back.
    public var live: Bool
}

extension CampaignRepository {
    /// One redemption of the tenant with its campaign's offer, or nil.
    public func redemption(tenant: UUID, id: UUID) async throws(StoreError) -> RedemptionRecord? {
        try await storeCall {
            try await pool.query(
                """
                SELECT r.campaign_id, c.offer_id, r.customer_id, r.rolled_back_at IS NULL
                FROM redemptions r JOIN campaigns c ON c.tenant_id = r.tenant_id AND c.campaign_id = r.campaign_id
                WHERE r.tenant_id = \(tenant) AND r.redemption_id = \(id)
                """, prepared: true
            ).first.map { row in
                let (campaignId, offerId, customerId, live) = try row.decode(
                    String.self, String.self, String.self, Bool.self)
                return RedemptionRecord(
                    redemptionId: id, campaignId: campaignId, offerId: offerId, customerId: customerId, live: live)
            }
        }
    }
}
