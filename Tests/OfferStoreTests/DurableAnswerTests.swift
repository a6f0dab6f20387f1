import Foundation
import OfferDomain
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// Answers given from what a transaction read, a duplicate delivery or a replay, wait for the synchronous standby as
/// a write does: a row can be visible on the primary before the standby has it (its commit's wait was cancelled, or
/// the primary restarted after a crash), and "already stored" said from it would be lost in a failover.
///
/// On a cluster of its own that names a synchronous standby that never comes: an observer cancels every backend
/// that waits for the standby (wait event `SyncRep`; `statement_timeout` does not end that wait), which the
/// connection reports as `commitNotReplicated` (the store's `.unavailable`: the caller retries). An answer that did
/// not wait comes back at once with "already stored", and nothing is cancelled.
@Suite("Answers from what was read wait for the standby", .serialized)
struct DurableAnswerTests {
    /// This suite's own cluster: it requires a standby for a while, which would hold every other test's commits.
    static let server = TestServer.restartable("store-durable-answers")

    /// Runs `work` while its waits for the standby are cancelled (`SynchronousStandby.cancellingWaits`); returns
    /// whether it failed as a commit whose wait for the standby was cancelled (false too if it still ran after 30 s).
    static func waitedForTheStandby(
        _ observer: PostgresPool, _ work: @escaping @Sendable () async throws -> Void
    ) async -> Bool {
        guard case .failure(let error) = await SynchronousStandby.cancellingWaits(observer: observer, work),
            case .unavailable(let failure) = error as? StoreError
        else { return false }
        return "\(failure)".contains("synchronous replication")
    }

    /// A batch of campaign `hot` by customer `cust` under idempotency key `k1`: a redemption the first time, a
    /// replay (nothing written) after.
    static func redeemOrReplay(_ db: OfferDatabase, tenant: UUID) async throws(StoreError) {
        try await db.campaigns.commitRedemptionBatch(
            tenant: tenant, campaignId: "hot", customers: ["cust"], oneTimeCodes: [], keys: ["k1"]
        ) { snapshot in
            guard snapshot.idempotency["k1"] == nil else {
                return (RedemptionWrites(redemptions: [], idempotency: []), ())
            }
            let record = IdempotencyRecord(requestHash: "00", responseJSON: #"{"redemptionId":"r"}"#)
            let redemption = NewRedemption(
                redemptionId: UUID(), code: "HOTCODE", oneTime: false, customerId: "cust", idempotencyKey: "k1")
            return (RedemptionWrites(redemptions: [redemption], idempotency: [("k1", record)]), ())
        }
    }

    @Test func duplicatesAndReplaysAreAnsweredOnlyOnceTheStandbyHasThem() async throws {
        let admin = try await PostgresConnection.connect(configuration: try await Self.server.configuration())
        defer { Task { await admin.close() } }
        // A run killed while the standby was required left it so: every commit there, CREATE DATABASE included,
        // would wait.
        try await SynchronousStandby.require("", admin: admin)
        try await TestDatabase.with(on: Self.server) { configuration in
            let db = OfferDatabase(pool: PostgresPool(configuration: configuration, maxConnections: 2))
            let observer = PostgresPool(configuration: configuration, maxConnections: 1)
            try await db.migrate()
            // What is stored before a standby is required: one notification, one funnel event, one redemption
            // with its idempotency key.
            let tenant = try await RepositoryTests.tenantWithCodeOffer(db, slug: "durable")
            _ = try await db.campaigns.create(
                tenant: tenant, try Campaign(id: "hot", offerId: "code1", kind: .custom, code: "HOTCODE"),
                productId: "monthly")
            let first = AppleNotificationGroupTests.notification(
                UUID(), chain: "c1", transaction: "t1", token: nil, signed: 0)
            let second = AppleNotificationGroupTests.notification(
                UUID(), chain: "c2", transaction: "t2", token: nil, signed: 0)
            for batch in [first, second] {
                #expect(try await db.appleData.ingest(tenant: tenant, batch).duplicateNotification == false)
            }
            let event = FunnelEvent(
                eventId: "e1", customerId: "cust", offerId: "code1", kind: .impression, at: Date())
            #expect(try await db.funnel.record(tenant: tenant, [event]) == 1)
            try await Self.redeemOrReplay(db, tenant: tenant)
            // Without a required standby, every duplicate is answered at once (the control).
            #expect(try await db.appleData.ingest(tenant: tenant, first).duplicateNotification)
            #expect(try await db.funnel.record(tenant: tenant, [event]) == 0)

            // The probe that tells when commits wait: each INSERT writes WAL (a `CREATE TABLE IF NOT EXISTS` writes
            // none once the table exists, so a first one that beat the reload left every later probe waiting for
            // nothing).
            _ = try await storeCall { try await db.pool.query("CREATE TABLE warm (n int)") }
            try await SynchronousStandby.require("nosuch_standby", admin: admin)
            do {
                // The reload reaches the checkpointer (which decides whether commits wait) a moment later: wait
                // until a write's commit waits.
                let inEffect = await eventually(timeout: .seconds(30)) {
                    await Self.waitedForTheStandby(observer) {
                        _ = try await storeCall { try await db.pool.query("INSERT INTO warm VALUES (1)") }
                    }
                }
                #expect(inEffect, "a standby was required, yet commits did not wait for it")
                // A read promises nothing: it is answered without waiting.
                #expect(try await db.tenants.find(slug: "durable")?.id == tenant)
                // A notification delivered again, alone and in a group of two.
                #expect(
                    await Self.waitedForTheStandby(observer) {
                        _ = try await db.appleData.ingest(tenant: tenant, first)
                    })
                #expect(
                    await Self.waitedForTheStandby(observer) {
                        let results = await db.appleData.ingestNotifications(tenant: tenant, [first, second])
                        guard results.count == 2 else { throw StoreError.corrupt("\(results.count) results") }
                        for result in results { _ = try result.get() }
                    })
                // A funnel event sent again.
                #expect(
                    await Self.waitedForTheStandby(observer) { _ = try await db.funnel.record(tenant: tenant, [event]) }
                )
                // A redemption replayed under its idempotency key (the batch locks its campaign row, which
                // already gives it a transaction id).
                #expect(await Self.waitedForTheStandby(observer) { try await Self.redeemOrReplay(db, tenant: tenant) })
            } catch {
                try await SynchronousStandby.require("", admin: admin)
                await db.pool.close()
                await observer.close()
                throw error
            }
            try await SynchronousStandby.require("", admin: admin)
            // Nothing sticks: without the standby requirement the duplicates are answered again.
            #expect(
                await eventually(timeout: .seconds(20)) {
                    (try? await db.appleData.ingest(tenant: tenant, first).duplicateNotification) == true
                })
            await db.pool.close()
            await observer.close()
        }
    }
}
