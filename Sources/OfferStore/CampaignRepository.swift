import Foundation
import OfferDomain
import Postgres

/// A campaign as stored: its definition plus the counters kept in its row.
public struct CampaignRecord: Sendable, Hashable {
    /// The definition (limits, dates, eligibility, deactivation).
    public var campaign: Campaign
    /// Successful, not rolled back redemptions.
    public var redeemed: Int
    /// Redemptions given back with `codes.rollback`.
    public var rolledBack: Int
    /// One-time codes generated so far.
    public var codesGenerated: Int
    public var createdAt: Date

    public init(campaign: Campaign, redeemed: Int, rolledBack: Int, codesGenerated: Int, createdAt: Date) {
        self.campaign = campaign
        self.redeemed = redeemed
        self.rolledBack = rolledBack
        self.codesGenerated = codesGenerated
        self.createdAt = createdAt
    }
}

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

/// One code of a campaign, for `campaigns.codes`.
public struct CodeListing: Sendable, Hashable {
    public var code: String
    public var oneTime: Bool
    public var createdAt: Date
    /// When the live redemption of a one-time code happened (nil: not redeemed, or a custom code).
    public var redeemedAt: Date?
}

/// Counters for `campaigns.stats`.
public struct CampaignStats: Sendable, Hashable {
    public var record: CampaignRecord
    /// Distinct codes with a live redemption.
    public var codesRedeemed: Int
}

/// Offer-code campaigns, their codes and redemptions. Every statement filters by tenant.
///
/// Redemptions are written in batches (`commitRedemptionBatch`): the campaign row is locked once per batch, so the
/// row is the arbiter between gateway processes, and its `CHECK (redeemed <= total_limit)` is the last line of
/// defence.
public struct CampaignRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) {
        self.pool = pool
    }

    static let columns = """
        c.campaign_id, c.offer_id, c.kind, c.custom_code, c.total_limit, c.per_customer_limit, c.starts_at,
        c.expires_at, c.eligibility, c.deactivated_at, c.redeemed, c.rolled_back, c.codes_generated, c.created_at
        """

    // MARK: Campaigns

    /// Creates a campaign (and, for a custom campaign, its code). Throws `.notFound` for an unknown offer,
    /// `.conflict` when the campaign id or the custom code is taken in this tenant.
    public func create(tenant: UUID, _ c: Campaign) async throws(StoreError) -> CampaignRecord {
        let eligibility = c.eligibility.sorted().map(\.rawValue)
        do {
            return try await pool.withTransaction { tx in
                let rows = try await tx.query(
                    """
                    INSERT INTO campaigns AS c (tenant_id, campaign_id, offer_id, kind, custom_code, total_limit,
                        per_customer_limit, starts_at, expires_at, eligibility)
                    VALUES (\(tenant), \(c.id), \(c.offerId), \(c.kind.rawValue), \(c.code),
                        \(c.limits.totalLimit.map { Int64($0) }), \(Int32(clamping: c.limits.perCustomerLimit)),
                        \(c.startsAt), \(c.expiresAt), \(eligibility))
                    RETURNING \(query: .unsafeRaw(Self.columns))
                    """)
                guard let row = rows.first else { throw StoreError.corrupt("INSERT returned no campaign") }
                if let code = c.code {
                    try await tx.query(
                        """
                        INSERT INTO offer_codes (tenant_id, code, campaign_id, one_time)
                        VALUES (\(tenant), \(code), \(c.id), false)
                        """)
                }
                try await Audit.record(
                    tx, tenant: tenant, actor: "admin", action: "campaign.create", detail: ["campaignId": c.id])
                return try Self.decodeRecord(row, at: 0)
            }
        } catch let error as PostgresError where error.isUniqueViolation {
            if error.constraint == "offer_codes_pkey" { throw .conflict("the code is taken by another campaign") }
            throw .conflict("campaign '\(c.id)' exists already")
        } catch let error as PostgresError where error.sqlState == "23503" {
            throw .notFound("offer '\(c.offerId)'")
        } catch {
            throw StoreError.wrap(error)
        }
    }

    /// One campaign, or nil.
    public func find(tenant: UUID, campaignId: String) async throws(StoreError) -> CampaignRecord? {
        try await storeCall {
            try await pool.query(
                """
                SELECT \(query: .unsafeRaw(Self.columns)) FROM campaigns c
                WHERE c.tenant_id = \(tenant) AND c.campaign_id = \(campaignId)
                """, prepared: true
            ).first.map { try Self.decodeRecord($0, at: 0) }
        }
    }

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

    /// Deactivates a campaign at `at` (idempotent: the first deactivation time stays). Returns the record.
    public func deactivate(tenant: UUID, campaignId: String, at: Date) async throws(StoreError) -> CampaignRecord {
        // A StoreError thrown inside the transaction rolls it back and reaches the caller unchanged.
        try await storeCall {
            try await pool.withTransaction { tx in
                let rows = try await tx.query(
                    """
                    UPDATE campaigns AS c SET deactivated_at = COALESCE(c.deactivated_at, \(at))
                    WHERE c.tenant_id = \(tenant) AND c.campaign_id = \(campaignId)
                    RETURNING \(query: .unsafeRaw(Self.columns))
                    """)
                guard let row = rows.first else { throw StoreError.notFound("campaign '\(campaignId)'") }
                try await Audit.record(
                    tx, tenant: tenant, actor: "admin", action: "campaign.deactivate",
                    detail: ["campaignId": campaignId])
                return try Self.decodeRecord(row, at: 0)
            }
        }
    }

    /// Counters plus the number of distinct redeemed codes.
    public func stats(tenant: UUID, campaignId: String) async throws(StoreError) -> CampaignStats {
        guard let record = try await find(tenant: tenant, campaignId: campaignId) else {
            throw .notFound("campaign '\(campaignId)'")
        }
        if record.campaign.kind == .custom {
            return CampaignStats(record: record, codesRedeemed: record.redeemed > 0 ? 1 : 0)
        }
        let count: Int64 = try await storeCall {
            try await pool.query(
                """
                SELECT count(*) FROM redemptions
                WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId) AND one_time AND rolled_back_at IS NULL
                """
            ).scalar(Int64.self) ?? 0
        }
        return CampaignStats(record: record, codesRedeemed: Int(count))
    }

    /// A page of a campaign's codes in code order, after `after` (keyset paging).
    public func codes(tenant: UUID, campaignId: String, after: String?, limit: Int) async throws(StoreError)
        -> [CodeListing]
    {
        try await storeCall {
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

    /// Generates and stores `count` new one-time codes for a oneTime campaign, in one transaction.
    ///
    /// `makeCodes(n)` returns `n` fresh normalised codes (it may repeat itself or existing codes: rows that collide
    /// with a code of the tenant are skipped by `ON CONFLICT DO NOTHING` and made again). Codes go in with
    /// `INSERT … SELECT FROM unnest($codes)`, `statementRows` per statement, `statementsPerRound` statements
    /// pipelined per round trip; `progress(made)` is called after each round. Throws `.notFound` for an unknown
    /// campaign and `.conflict` for a custom one, or when `maxRounds` rounds could not make enough new codes
    /// (the pattern's space is nearly used up); then nothing is stored (the codes of earlier rounds are rolled
    /// back with the rest).
    public func generateCodes(
        tenant: UUID, campaignId: String, count: Int, statementRows: Int = 10_000, statementsPerRound: Int = 8,
        maxRounds: Int = 1_000, makeCodes: @escaping @Sendable (Int) -> [String],
        progress: @escaping @Sendable (Int) -> Void
    ) async throws(StoreError) -> Int {
        try await storeCall {
            try await pool.withTransaction { tx -> Int in
                let kind = try await tx.query(
                    """
                    SELECT kind FROM campaigns WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId) FOR SHARE
                    """, prepared: true
                ).scalar(String.self)
                guard let kind else { throw StoreError.notFound("campaign '\(campaignId)'") }
                guard kind == CampaignKind.oneTime.rawValue else {
                    throw StoreError.conflict("campaign '\(campaignId)' is a custom campaign: it has one code")
                }
                var made = 0
                var rounds = 0
                while made < count {
                    rounds += 1
                    if rounds > maxRounds {
                        throw StoreError.conflict("the pattern has too few unused codes left")
                    }
                    var queries: [PostgresQuery] = []
                    var planned = 0
                    while planned < count - made, queries.count < statementsPerRound {
                        let n = min(statementRows, count - made - planned)
                        let codes = makeCodes(n)
                        queries.append(
                            """
                            INSERT INTO offer_codes (tenant_id, code, campaign_id, one_time)
                            SELECT \(tenant), x, \(campaignId), true FROM unnest(\(codes)::text[]) AS x
                            ON CONFLICT DO NOTHING
                            """)
                        planned += n
                    }
                    for result in try await tx.pipeline(queries, prepared: true) {
                        made += try result.get().affectedRows ?? 0
                    }
                    progress(made)
                }
                try await tx.query(
                    """
                    UPDATE campaigns SET codes_generated = codes_generated + \(Int64(made))
                    WHERE tenant_id = \(tenant) AND campaign_id = \(campaignId)
                    """, prepared: true)
                return made
            }
        }
    }

    // MARK: Codes and redemptions

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

    /// The stored outcome for an idempotency key, or nil.
    public func idempotencyRecord(tenant: UUID, key: String) async throws(StoreError) -> IdempotencyRecord? {
        try await storeCall {
            try await pool.query(
                """
                SELECT encode(request_hash, 'hex'), response::text FROM idempotency_records
                WHERE tenant_id = \(tenant) AND idempotency_key = \(key)
                """, prepared: true
            ).first.map { row in
                let (hash, response) = try row.decode(String.self, String.self)
                return IdempotencyRecord(requestHash: hash, responseJSON: response)
            }
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
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await pool.withConnection { connection in
                    try await Self.batchTransaction(
                        connection, tenant: tenant, campaignId: campaignId, customers: customers,
                        oneTimeCodes: oneTimeCodes, keys: keys, decide: decide)
                }
            } catch let error as PostgresError
                where (error.isUniqueViolation || error.isSerializationFailure) && attempt < 4
            {
                continue
            } catch {
                throw StoreError.wrap(error)
            }
        }
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
            """
            SELECT r.idempotency_key, encode(r.request_hash, 'hex'), r.response::text
            FROM unnest(\(keys)::text[]) AS k(key)
            CROSS JOIN LATERAL (SELECT idempotency_key, request_hash, response FROM idempotency_records
                                WHERE tenant_id = \(tenant) AND idempotency_key = k.key LIMIT 1) AS r
            """,
        ]
    }

    static func batchTransaction<T: Sendable>(
        _ connection: PostgresConnection, tenant: UUID, campaignId: String, customers: [String],
        oneTimeCodes: [String], keys: [String], decide: @Sendable (RedemptionSnapshot) throws -> (RedemptionWrites, T)
    ) async throws -> T {
        // On any failure the pool rolls the open transaction back when the connection is returned.
        let reads = try await connection.pipeline(
            [
                "BEGIN ISOLATION LEVEL READ COMMITTED",
                """
                SELECT \(query: .unsafeRaw(columns)), now() FROM campaigns c
                WHERE c.tenant_id = \(tenant) AND c.campaign_id = \(campaignId) FOR UPDATE
                """,
            ] + batchLookups(tenant: tenant, campaignId: campaignId, customers: customers, oneTimeCodes: oneTimeCodes,
                             keys: keys),
            prepared: true)
        guard reads.count == 5 else { throw StoreError.corrupt("pipeline returned \(reads.count) results") }
        _ = try reads[0].get()
        guard let campaignRow = try reads[1].get().first else {
            throw StoreError.notFound("campaign '\(campaignId)'")
        }
        let record = try decodeRecord(campaignRow, at: 0)
        let databaseNow = try campaignRow.decode(Date.self, at: 14)
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
            try await connection.query("COMMIT")
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
        let results = try await connection.pipeline(
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

    // MARK: Decoding

    static func decodeRecord(_ row: PostgresRow, at base: Int) throws -> CampaignRecord {
        let id = try row.decode(String.self, at: base)
        let offerId = try row.decode(String.self, at: base + 1)
        let kindText = try row.decode(String.self, at: base + 2)
        let code = try row.decode(String?.self, at: base + 3)
        let total = try row.decode(Int64?.self, at: base + 4)
        let perCustomer = try row.decode(Int32.self, at: base + 5)
        let startsAt = try row.decode(Date?.self, at: base + 6)
        let expiresAt = try row.decode(Date?.self, at: base + 7)
        let eligibilityText = try row.decode([String].self, at: base + 8)
        let deactivatedAt = try row.decode(Date?.self, at: base + 9)
        let redeemed = try row.decode(Int64.self, at: base + 10)
        let rolledBack = try row.decode(Int64.self, at: base + 11)
        let generated = try row.decode(Int64.self, at: base + 12)
        let created = try row.decode(Date.self, at: base + 13)
        guard let kind = CampaignKind(rawValue: kindText) else { throw StoreError.corrupt("campaign kind") }
        var eligibility = Set<CampaignAudience>()
        for name in eligibilityText {
            guard let audience = CampaignAudience(rawValue: name) else { throw StoreError.corrupt("eligibility") }
            eligibility.insert(audience)
        }
        do {
            let campaign = try Campaign(
                id: id, offerId: offerId, kind: kind, code: code, totalLimit: total.map { Int($0) },
                perCustomerLimit: Int(perCustomer), startsAt: startsAt, expiresAt: expiresAt, eligibility: eligibility,
                deactivatedAt: deactivatedAt)
            return CampaignRecord(
                campaign: campaign, redeemed: Int(redeemed), rolledBack: Int(rolledBack),
                codesGenerated: Int(generated), createdAt: created)
        } catch {
            throw StoreError.corrupt("campaign '\(id)': \(error.message)")
        }
    }
}

extension OfferDatabase {
    /// Offer-code campaigns, codes and redemptions.
    public var campaigns: CampaignRepository { CampaignRepository(pool: pool) }
}
