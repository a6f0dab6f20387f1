import Foundation
import OfferDomain
import Postgres

/// A campaign as stored: its definition plus the counters kept in its row.
public struct CampaignRecord: Sendable, Hashable {
    /// The definition (limits, dates, eligibility, deactivation).
    public var campaign: Campaign
    /// The product of the campaign's offer: with `campaign.offerId` it names the offer (offers are named by product
    /// and id, migration 0006), fixed when the campaign is created.
    public var productId: String
    /// Successful, not rolled back redemptions.
    public var redeemed: Int
    /// Redemptions given back with `codes.rollback`.
    public var rolledBack: Int
    /// One-time codes generated so far.
    public var codesGenerated: Int
    public var createdAt: Date

    public init(
        campaign: Campaign, productId: String, redeemed: Int, rolledBack: Int, codesGenerated: Int, createdAt: Date
    ) {
        self.campaign = campaign
        self.productId = productId
        self.redeemed = redeemed
        self.rolledBack = rolledBack
        self.codesGenerated = codesGenerated
        self.createdAt = createdAt
    }
}

/// Offer-code campaigns, their codes and redemptions. Every statement filters by tenant.
///
/// In three rooms: the definition and its codes (this file: create, find, deactivate, generate codes), the
/// redemption store (`RedemptionStore.swift`: lookups, usage, idempotency, batches, rollback), and the records
/// operators read (`CampaignRecords.swift`: list, stats, code listing).
///
/// Redemptions are written in batches (`commitRedemptionBatch`): the campaign row is locked once per batch, so the
/// row is the arbiter between gateway processes, and its `CHECK (redeemed <= total_limit)` is the last line of
/// defence.
public struct CampaignRepository: Sendable {
    let pool: PostgresPool

    static let columns = """
        c.campaign_id, c.offer_id, c.kind, c.custom_code, c.total_limit, c.per_customer_limit, c.starts_at,
        c.expires_at, c.eligibility, c.deactivated_at, c.redeemed, c.rolled_back, c.codes_generated, c.created_at,
        c.apple_reference_name, c.product_id
        """
    /// How many columns `columns` has (what a query selects after them starts at this index).
    static let columnCount = 16

    // MARK: Batches

    /// What a campaign batch's transaction is retried on: a unique violation (an idempotency key taken meanwhile by
    /// another campaign's batch) or a serialization failure.
    static func retriesBatch(_ error: PostgresError) -> Bool {
        error.isUniqueViolation || error.isSerializationFailure
    }

    /// Runs one campaign batch's `transaction` without a task: on a leased connection's own queue, `reply` called
    /// there, once, right after it. A group commit whose next batch starts from `reply` thus chains a campaign's
    /// batches on the connections' threads, with no hop through the cooperative pool between one `COMMIT` and the
    /// next `BEGIN` (each hop is a thread wake-up on the campaign's serial chain; decision 011, second addendum).
    /// A first attempt that fails in a way worth retrying (`retriesBatch`) is handed to `retried`, the batch's
    /// `async` form with its retries and backoff, on a task.
    func batchWithoutTask<T: Sendable>(
        _ transaction: @escaping @Sendable (isolated PostgresConnection) throws -> T,
        retried: @escaping @Sendable () async throws -> T,
        reply: @escaping @Sendable (Result<T, StoreError>) -> Void
    ) {
        pool.leasing({ connection -> Result<T, any Error> in Result { try transaction(connection) } }) { leased in
            // No connection (`leased` failed), or the transaction's own outcome.
            switch leased.mapError({ $0 as any Error }).flatMap({ $0 }) {
            case .success(let value):
                reply(.success(value))
            case .failure(let error as PostgresError) where Self.retriesBatch(error):
                Task {
                    do {
                        reply(.success(try await retried()))
                    } catch {
                        reply(.failure(StoreError.wrap(error)))
                    }
                }
            case .failure(let error):
                reply(.failure(StoreError.wrap(error)))
            }
        }
    }

    // MARK: Definition

    /// Creates a campaign (and, for a custom campaign, its code) for the offer `c.offerId` of product `productId`.
    /// Throws `.notFound` for an unknown offer, `.conflict` when the campaign id or the custom code is taken in this
    /// tenant.
    public func create(tenant: UUID, _ c: Campaign, productId: String) async throws(StoreError) -> CampaignRecord {
        let eligibility = c.eligibility.sorted().map(\.rawValue)
        do {
            return try await pool.withTransaction { tx in
                let rows = try await tx.query(
                    """
                    INSERT INTO campaigns AS c (tenant_id, campaign_id, offer_id, product_id, kind, custom_code,
                        total_limit, per_customer_limit, starts_at, expires_at, eligibility, apple_reference_name)
                    VALUES (\(tenant), \(c.id), \(c.offerId), \(productId), \(c.kind.rawValue), \(c.code),
                        \(c.limits.totalLimit.map { Int64($0) }), \(Int32(clamping: c.limits.perCustomerLimit)),
                        \(c.startsAt), \(c.expiresAt), \(eligibility), \(c.appleReferenceName))
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
            throw .notFound("offer '\(c.offerId)' of product '\(productId)'")
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
                    throw StoreError.conflict(
                        kind == CampaignKind.custom.rawValue
                            ? "campaign '\(campaignId)' is a custom campaign: it has one code"
                            : "campaign '\(campaignId)' holds Apple's codes: import them (campaigns.importCodes)")
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
        let referenceName = try row.decode(String?.self, at: base + 14)
        let productId = try row.decode(String.self, at: base + 15)
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
                deactivatedAt: deactivatedAt, appleReferenceName: referenceName)
            return CampaignRecord(
                campaign: campaign, productId: productId, redeemed: Int(redeemed), rolledBack: Int(rolledBack),
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
