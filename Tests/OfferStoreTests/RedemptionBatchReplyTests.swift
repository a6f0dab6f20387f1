import Foundation
import OfferDomain
import OfferTestSupport
import Postgres
import Synchronization
import Testing

@testable import OfferStore

/// `commitRedemptionBatch(…reply:)`, the form without a task that the gateway's redemption batches use: it commits
/// like the `async` form, replies once, and a first attempt that loses an idempotency key to another campaign's
/// concurrent batch is retried (by the `async` form's retries) and decided again on what that batch stored.
@Suite("Redemption batch without a task")
struct RedemptionBatchReplyTests {
    /// The snapshots `decide` was called with, in order.
    final class Decisions: Sendable {
        let seen = Mutex<[RedemptionSnapshot]>([])
    }

    static func commit(
        _ s: RedemptionReferenceTests.Seeded, campaign: String, customer: String, key: String,
        decisions: Decisions
    ) async -> Result<Int, any Error> {
        await withCheckedContinuation { continuation in
            s.db.campaigns.commitRedemptionBatch(
                tenant: s.tenant, campaignId: campaign, customers: [customer], oneTimeCodes: [], keys: [key]
            ) { snapshot in
                decisions.seen.withLock { $0.append(snapshot) }
                // As the gateway decides: a key already stored is a replay, nothing is written.
                guard snapshot.idempotency[key] == nil else {
                    return (RedemptionWrites(redemptions: [], idempotency: []), 0)
                }
                let row = NewRedemption(
                    redemptionId: UUID(), code: "HOTCODE", oneTime: false, customerId: customer,
                    idempotencyKey: key)
                let record = IdempotencyRecord(requestHash: String(repeating: "b", count: 64), responseJSON: "{}")
                return (RedemptionWrites(redemptions: [row], idempotency: [(key, record)]), 1)
            } reply: {
                continuation.resume(returning: $0.mapError { $0 })
            }
        }
    }

    @Test("commits and replies once, like the async form")
    func commitsAndReplies() async throws {
        try await RedemptionReferenceTests.withSeeded { s async throws in
            let decisions = Decisions()
            let written = await Self.commit(s, campaign: "hot", customer: "c5", key: "k-reply", decisions: decisions)
            #expect(try written.get() == 1)
            #expect(decisions.seen.withLock { $0.count } == 1)
            #expect(try await s.redemptions() == 3)
            #expect(try await s.db.campaigns.find(tenant: s.tenant, campaignId: "hot")?.redeemed == 2)
            // The key is remembered with the redemption: the same call again replays and writes nothing.
            let again = await Self.commit(s, campaign: "hot", customer: "c5", key: "k-reply", decisions: decisions)
            #expect(try again.get() == 0)
            #expect(try await s.redemptions() == 3)
        }
    }

    @Test("a key taken meanwhile by another campaign's batch: retried, and decided again on the stored outcome")
    func keyTakenMeanwhileIsRetried() async throws {
        try await RedemptionReferenceTests.withSeeded { s async throws in
            let t = s.tenantLiteral
            let decisions = Decisions()
            try await s.db.pool.withConnection { other in
                // Another batch (of another campaign) holds the key, not yet committed.
                try await other.query("BEGIN")
                try await other.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO idempotency_records (tenant_id, idempotency_key, method, request_hash, response)
                            VALUES ('\(t)', 'k-race', 'codes.redeem', decode(repeat('a', 64), 'hex'), '{}')
                            """))
                let batch = Task {
                    await Self.commit(s, campaign: "hot", customer: "c6", key: "k-race", decisions: decisions)
                }
                // The batch saw no record, decided to write, and waits on the other's uncommitted key.
                #expect(try await s.probe.waitsForALock("WITH counted AS"))
                try await other.query("COMMIT")
                #expect(try await batch.value.get() == 0)
            }
            let seen = decisions.seen.withLock { $0 }
            #expect(seen.count == 2)
            #expect(seen.first?.idempotency["k-race"] == nil)
            #expect(seen.last?.idempotency["k-race"]?.requestHash == String(repeating: "a", count: 64))
            // The failed attempt wrote nothing: neither the redemption nor the counter.
            #expect(try await s.redemptions() == 2)
            #expect(try await s.db.campaigns.find(tenant: s.tenant, campaignId: "hot")?.redeemed == 1)
        }
    }
}
