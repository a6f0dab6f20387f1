import Foundation
import OfferDomain
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// Migration 0015: a claim batch's free-code lookup starts after the codes claimed before. Claimed codes keep their
/// entries in the partial index `apple_codes_free` until a vacuum, and a walk from the campaign's first code read
/// all of them on every batch.
@Suite("Claim cursor")
struct ClaimCursorTests {
    static func appleCampaign(_ db: OfferDatabase) async throws -> UUID {
        let tenant = try await RepositoryTests.tenantWithCodeOffer(db, slug: "cursor")
        _ = try await db.campaigns.create(
            tenant: tenant,
            try Campaign(id: "asc", offerId: "code1", kind: .appleOneTime, appleReferenceName: "Cursor"),
            productId: "monthly")
        return tenant
    }

    /// Claims up to `count` free codes in one batch, as the gateway's `decide` does: from the start of the free
    /// codes it was given, one per customer. Returns the codes claimed.
    static func claim(_ db: OfferDatabase, tenant: UUID, count: Int, customerPrefix: String) async throws
        -> [String]
    {
        try await db.campaigns.commitClaimBatch(
            tenant: tenant, campaignId: "asc", customers: [], keys: [], wanted: count, at: Date()
        ) { snapshot in
            let claims = snapshot.freeCodes.enumerated().map { index, code in
                (
                    claim: StoredClaim(claimId: UUID(), code: code, customerId: "\(customerPrefix)\(index)"),
                    idempotencyKey: String?.none
                )
            }
            return (ClaimWrites(claims: claims, idempotency: []), claims.map(\.claim.code))
        }
    }

    static func cursor(_ db: OfferDatabase, tenant: UUID) async throws -> String? {
        try await db.pool.query(
            "SELECT claim_cursor FROM campaigns WHERE tenant_id = \(tenant) AND campaign_id = 'asc'"
        ).first.flatMap { try $0.decode(String?.self, at: 0) }
    }

    /// Shared buffers (hit and read) that `EXPLAIN (ANALYZE, BUFFERS)` reports for `sql`'s top node.
    static func buffers(_ sql: String, on db: OfferDatabase) async throws -> Int {
        let lines = try await db.pool.query(PostgresQuery(unsafeSQL: "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql))
            .map { try $0.decode(String.self, at: 0) }
        let line = try #require(lines.first { $0.contains("Buffers: shared") }, "\(lines)")
        return ["hit=", "read="].reduce(0) { total, label in
            guard let range = line.range(of: label) else { return total }
            return total + (Int(line[range.upperBound...].prefix { $0.isNumber }) ?? 0)
        }
    }

    @Test("after 20,000 claims the lookup reads a few index pages, where a walk from the first code reads hundreds")
    func lookupSkipsClaimedCodes() async throws {
        try await RepositoryTests.withStore { db in
            let tenant = try await Self.appleCampaign(db)
            // No vacuum may clear the claimed codes' index entries while the test looks at them.
            try await db.pool.query("ALTER TABLE apple_codes SET (autovacuum_enabled = false)")
            let codes = (0..<25_000).map { String(format: "CODE%06d", $0) }
            let imported = try await db.campaigns.importAppleCodes(tenant: tenant, campaignId: "asc", codes: codes)
            #expect(imported.imported == 25_000)
            #expect(try await Self.cursor(db, tenant: tenant) == nil)
            var claimed: [String] = []
            for batch in 0..<40 {
                claimed += try await Self.claim(db, tenant: tenant, count: 500, customerPrefix: "b\(batch)-")
            }
            // Claims take codes in code order and the cursor follows them.
            #expect(claimed == Array(codes.prefix(20_000)))
            #expect(try await Self.cursor(db, tenant: tenant) == codes[19_999])

            let t = "'\(tenant.uuidString.lowercased())'"
            let lookup = CampaignRepository.claimLookups(
                tenant: tenant, campaignId: "asc", customers: [], keys: [], wanted: 64)[1].sql
            // The lookup with its parameters as literals ($1, $2 the tenant and campaign; $3, $4 again; $5 the limit).
            var literal = lookup
            for (index, value) in [t, "'asc'", t, "'asc'", "64"].enumerated().reversed() {
                literal = literal.replacingOccurrences(of: "$\(index + 1)", with: value)
            }
            #expect(!literal.contains("$"), "\(literal)")
            let next = try await db.pool.query(PostgresQuery(unsafeSQL: literal)).map { try $0.decode(String.self) }
            #expect(next == Array(codes[20_000..<20_064]))
            let withCursor = try await Self.buffers(literal, on: db)
            // The same walk from the campaign's first free code: what every batch read before migration 0015.
            let fromStart = try await Self.buffers(
                """
                SELECT code FROM apple_codes WHERE tenant_id = \(t) AND campaign_id = 'asc' AND claim_id IS NULL
                ORDER BY code LIMIT 64
                """, on: db)
            #expect(withCursor <= 12, "buffers with the cursor: \(withCursor)")
            #expect(fromStart >= 50, "buffers from the first code: \(fromStart) (the dead entries are the premise)")
        }
    }

    @Test("an import of codes that sort before the cursor clears it, and they are handed out")
    func importBeforeTheCursor() async throws {
        try await RepositoryTests.withStore { db in
            let tenant = try await Self.appleCampaign(db)
            _ = try await db.campaigns.importAppleCodes(
                tenant: tenant, campaignId: "asc", codes: ["MMM1", "MMM2", "MMM3"])
            #expect(try await Self.claim(db, tenant: tenant, count: 2, customerPrefix: "a") == ["MMM1", "MMM2"])
            #expect(try await Self.cursor(db, tenant: tenant) == "MMM2")
            // Codes after the cursor leave it where it is; a repeated code adds nothing and moves nothing.
            _ = try await db.campaigns.importAppleCodes(tenant: tenant, campaignId: "asc", codes: ["ZZZ1", "MMM1"])
            #expect(try await Self.cursor(db, tenant: tenant) == "MMM2")
            // A code before it clears it.
            let added = try await db.campaigns.importAppleCodes(
                tenant: tenant, campaignId: "asc", codes: ["AAA1", "ZZZ2"])
            #expect(added.imported == 2 && added.duplicates == 0)
            #expect(try await Self.cursor(db, tenant: tenant) == nil)
            #expect(
                try await Self.claim(db, tenant: tenant, count: 3, customerPrefix: "b") == ["AAA1", "MMM3", "ZZZ1"])
            #expect(try await Self.cursor(db, tenant: tenant) == "ZZZ1")
            #expect(try await Self.claim(db, tenant: tenant, count: 3, customerPrefix: "c") == ["ZZZ2"])
            #expect(try await Self.claim(db, tenant: tenant, count: 3, customerPrefix: "d") == [])
            let stored = try await db.campaigns.find(tenant: tenant, campaignId: "asc")
            #expect(stored?.redeemed == 6 && stored?.codesGenerated == 6)
        }
    }

    @Test("a code freed or renamed by hand, outside the gateway, clears the cursor and is handed out again")
    func freedByHand() async throws {
        try await RepositoryTests.withStore { db in
            let tenant = try await Self.appleCampaign(db)
            _ = try await db.campaigns.importAppleCodes(
                tenant: tenant, campaignId: "asc", codes: ["MMM1", "MMM2", "MMM3", "MMM4"])
            #expect(
                try await Self.claim(db, tenant: tenant, count: 3, customerPrefix: "a") == ["MMM1", "MMM2", "MMM3"])
            #expect(try await Self.cursor(db, tenant: tenant) == "MMM3")
            // An operator's fix in psql: a claim taken back. The claim columns are cleared together (the table's
            // check), and the campaign's counter is the operator's to mend.
            try await db.pool.query(
                """
                UPDATE apple_codes SET claim_id = NULL, customer_id = NULL, claimed_at = NULL
                WHERE tenant_id = \(tenant) AND code = 'MMM2'
                """)
            #expect(try await Self.cursor(db, tenant: tenant) == nil)
            #expect(try await Self.claim(db, tenant: tenant, count: 3, customerPrefix: "b") == ["MMM2", "MMM4"])
            #expect(try await Self.cursor(db, tenant: tenant) == "MMM4")
            // A free code renamed to sort first.
            _ = try await db.campaigns.importAppleCodes(tenant: tenant, campaignId: "asc", codes: ["ZZZ1"])
            #expect(try await Self.cursor(db, tenant: tenant) == "MMM4")
            try await db.pool.query(
                "UPDATE apple_codes SET code = 'AAA1' WHERE tenant_id = \(tenant) AND code = 'ZZZ1'")
            #expect(try await Self.cursor(db, tenant: tenant) == nil)
            #expect(try await Self.claim(db, tenant: tenant, count: 3, customerPrefix: "c") == ["AAA1"])
        }
    }

    @Test("a batch's span: its first and last code in the free codes' order, and the cursor at the end of the run")
    func claimedSpan() {
        let free = ["A", "B", "C", "D"]
        func span(_ claimed: [String]) -> ClaimedSpan? { ClaimedSpan(free: free, claimed: claimed) }
        #expect(span(["A", "B", "C", "D"]) == ClaimedSpan(first: "A", last: "D", cursor: "D"))
        #expect(span(["B", "A"]) == ClaimedSpan(first: "A", last: "B", cursor: "B"))
        // Not a run from the start (decide never does this): the cursor stops where the run does.
        #expect(span(["A", "C"]) == ClaimedSpan(first: "A", last: "C", cursor: "A"))
        #expect(span(["C", "B"]) == ClaimedSpan(first: "B", last: "C", cursor: nil))
        // Positions, not string order: the database's collation decides the order `free` comes in.
        #expect(ClaimedSpan(free: ["b", "A"], claimed: ["A", "b"]) == ClaimedSpan(first: "b", last: "A", cursor: "A"))
        #expect(span([]) == nil)
        #expect(span(["A", "E"]) == nil)
    }
}
