import Foundation
import OfferDomain
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// Group commit of notifications (`AppleDataRepository.ingestNotifications`) against a real PostgreSQL: a group
/// stores what the same notifications stored one after another would, each with its own outcome.
@Suite("Apple notifications in group commits")
struct AppleNotificationGroupTests {
    static let t0 = Date(timeIntervalSince1970: 1_780_000_000)

    /// A notification with one transaction of `chain` and (optionally) its renewal info.
    static func notification(
        _ uuid: UUID, chain: String, transaction: String, token: String?, signed: Double, autoRenew: Int = 1,
        winBack: [String]? = nil, renewal: Bool = true
    ) -> AppleIngestBatch {
        let signedDate = t0.addingTimeInterval(signed * 86_400)
        let facts = AppleTransactionFacts(
            transactionId: transaction, originalTransactionId: chain, environment: .production, productId: "monthly",
            purchaseDate: signedDate, expiresDate: signedDate.addingTimeInterval(30 * 86_400), signedDate: signedDate)
        let stored = StoredAppleTransaction(
            facts: facts, appAccountToken: token, subscriptionGroupId: "g1", originalPurchaseDate: t0,
            offerDiscountType: nil, offerPeriod: nil, inAppOwnershipType: "PURCHASED", revocationReason: nil,
            revocationType: nil, transactionType: "Auto-Renewable Subscription", verifiedByApple: true,
            jws: "jws-of-\(transaction)")
        let renewals =
            renewal
            ? [
                StoredAppleRenewal(
                    facts: AppleRenewalFacts(
                        originalTransactionId: chain, environment: .production, productId: "monthly",
                        autoRenewProductId: "monthly", autoRenewStatus: autoRenew, eligibleWinBackOfferIds: winBack,
                        signedDate: signedDate),
                    appAccountToken: nil, expirationIntent: nil, renewalDate: nil, verifiedByApple: true,
                    jws: "renewal-jws-\(transaction)")
            ] : []
        return AppleIngestBatch(
            notification: StoredAppleNotification(
                notificationUUID: uuid, notificationType: "DID_RENEW", subtype: nil, environment: .production,
                signedDate: signedDate, jws: "notification-jws-\(uuid)"),
            transactions: [stored], renewals: renewals)
    }

    static func withTenants(
        _ count: Int, _ body: (OfferDatabase, PostgresConfiguration, [UUID]) async throws -> Void
    ) async throws {
        try await RepositoryTests.withStore { db in
            var tenants: [UUID] = []
            for i in 0..<count {
                tenants.append(
                    try await db.tenants.create(
                        slug: "t\(i)", bundleId: "com.t\(i)", name: nil,
                        apiKey: RepositoryTests.key(String(repeating: "k", count: 11) + "\(i)")
                    ).id)
            }
            try await body(db, db.pool.configuration, tenants)
        }
    }

    /// What a tenant stored, in a form two tenants can be compared by.
    static func state(_ db: OfferDatabase, _ tenant: UUID) async throws -> [String] {
        var lines: [String] = []
        for sql: PostgresQuery in [
            """
            SELECT transaction_id || '|' || original_transaction_id || '|' || coalesce(customer_id, '-') || '|'
                   || signed_date::text || '|' || jws
            FROM apple_transactions WHERE tenant_id = \(tenant) ORDER BY transaction_id
            """,
            """
            SELECT original_transaction_id || '|' || coalesce(customer_id, '-') || '|' || auto_renew_status::text
                   || '|' || coalesce(eligible_win_back_offer_ids::text, '-') || '|' || signed_date::text || '|' || jws
            FROM apple_renewal_infos WHERE tenant_id = \(tenant) ORDER BY original_transaction_id
            """,
            """
            SELECT notification_uuid::text || '|' || coalesce(customer_id, '-') || '|' || jws
            FROM apple_notifications WHERE tenant_id = \(tenant) ORDER BY notification_uuid
            """,
            """
            SELECT original_transaction_id || '|' || customer_id FROM customer_links WHERE tenant_id = \(tenant)
            ORDER BY original_transaction_id
            """,
        ] {
            lines += try await db.pool.query(sql).map { try $0.decode(String.self, at: 0) }
            lines.append("--")
        }
        return lines
    }

    @Test(
        "One group: concurrent notifications of one customer (out of order), duplicates within it and of stored ones; the same state and answers as one by one"
    )
    func groupMatchesOneByOne() async throws {
        try await Self.withTenants(2) { db, _, tenants in
            let (grouped, sequential) = (tenants[0], tenants[1])
            let token = "0b11c0de-0000-4000-8000-000000000001"
            let (a, b, c, d, e) = (UUID(), UUID(), UUID(), UUID(), UUID())
            let stored = Self.notification(a, chain: "C1", transaction: "T1", token: token, signed: 1)
            let group = [
                Self.notification(b, chain: "C1", transaction: "T3", token: token, signed: 3),
                Self.notification(
                    c, chain: "C1", transaction: "T4", token: token, signed: 4, autoRenew: 0, winBack: ["wb.1"]),
                // A retry of b inside the group, a retry of the stored a, and an older renewal after newer ones.
                Self.notification(b, chain: "C1", transaction: "T3", token: token, signed: 3),
                stored,
                Self.notification(d, chain: "C1", transaction: "T2", token: token, signed: 2),
                // Another customer's chain, and the same transaction again in a later notification (newer data).
                Self.notification(
                    e, chain: "C2", transaction: "T9", token: token.replacingOccurrences(of: "1", with: "2"), signed: 1),
                Self.notification(
                    UUID(), chain: "C2", transaction: "T9", token: token.replacingOccurrences(of: "1", with: "2"),
                    signed: 5),
            ]
            let repository = db.appleData
            for tenant in [grouped, sequential] { _ = try await repository.ingest(tenant: tenant, stored) }
            let answers = try await repository.ingestNotifications(tenant: grouped, group).map { try $0.get() }
            var oneByOne: [AppleIngestOutcome] = []
            for item in group { oneByOne.append(try await repository.ingest(tenant: sequential, item)) }
            #expect(answers.map(\.duplicateNotification) == [false, false, true, true, false, false, false])
            #expect(answers.map(\.duplicateNotification) == oneByOne.map(\.duplicateNotification))
            #expect(answers.map(\.customers) == oneByOne.map(\.customers))
            #expect(answers[2].customers == [token], "a retry names the customer the notification reached")
            let groupedState = try await Self.state(db, grouped)
            #expect(groupedState == (try await Self.state(db, sequential)))
            // The newest renewal info of C1 (c's) stands; the older one that came after it changed nothing.
            #expect(groupedState.contains { $0.hasPrefix("C1|\(token)|0|{wb.1}|") })
            #expect(try await repository.counts(tenant: grouped).notifications == 6)
        }
    }

    @Test(
        "A group's new links adopt each chain's data kept unlinked before, as one by one would; other chains keep theirs"
    )
    func groupLinksAdoptUnlinkedData() async throws {
        try await Self.withTenants(2) { db, _, tenants in
            let (grouped, sequential) = (tenants[0], tenants[1])
            // Three chains' first notifications without a token: kept unlinked, renewal infos with them.
            let early = ["A", "B", "C"].map { chain in
                Self.notification(UUID(), chain: chain, transaction: "\(chain)1", token: nil, signed: 1)
            }
            // Renewals of A and B carry their customers' tokens (and no renewal info of their own, so the earlier
            // ones reach the customer by adoption alone); C's data stays unlinked.
            let group = ["A", "B"].enumerated().map { i, chain in
                Self.notification(
                    UUID(), chain: chain, transaction: "\(chain)2", token: "0b11c0de-0000-4000-8000-00000000000\(i)",
                    signed: 2, renewal: false)
            }
            let repository = db.appleData
            for tenant in [grouped, sequential] {
                for item in early { _ = try await repository.ingest(tenant: tenant, item) }
            }
            let answers = try await repository.ingestNotifications(tenant: grouped, group).map { try $0.get() }
            var oneByOne: [AppleIngestOutcome] = []
            for item in group { oneByOne.append(try await repository.ingest(tenant: sequential, item)) }
            #expect(answers.map(\.customers) == oneByOne.map(\.customers))
            let groupedState = try await Self.state(db, grouped)
            #expect(groupedState == (try await Self.state(db, sequential)))
            for (i, chain) in ["A", "B"].enumerated() {
                let customer = "0b11c0de-0000-4000-8000-00000000000\(i)"
                #expect(
                    groupedState.contains { $0.hasPrefix("\(chain)1|\(chain)|\(customer)|") },
                    "the unlinked transaction of \(chain) is its customer's now: \(groupedState)")
                #expect(
                    groupedState.contains { $0.hasPrefix("\(chain)|\(customer)|") },
                    "so is \(chain)'s renewal info: \(groupedState)")
            }
            #expect(groupedState.contains { $0.hasPrefix("C1|C|-|") }, "C has no link: its data stays unlinked")
            #expect(groupedState.contains { $0.hasPrefix("C|-|") })
        }
    }

    @Test("A notification the database refuses fails alone; the others of its group are stored")
    func badOneAmongGoodOnes() async throws {
        try await Self.withTenants(1) { db, _, tenants in
            let good = (0..<4).map { i in
                Self.notification(
                    UUID(), chain: "G\(i)", transaction: "GT\(i)", token: "0b11c0de-0000-4000-8000-00000000000\(i)",
                    signed: 1)
            }
            // A customer id longer than customer_links allows (the service never sends one; the CHECK refuses it).
            let bad = Self.notification(
                UUID(), chain: "B1", transaction: "BT1", token: String(repeating: "x", count: 300), signed: 1)
            let results = await db.appleData.ingestNotifications(
                tenant: tenants[0], [good[0], good[1], bad, good[2], good[3]])
            #expect(results.count == 5)
            for (index, result) in results.enumerated() where index != 2 {
                #expect((try? result.get())?.customers.count == 1, "item \(index) stands alone")
            }
            guard case .failure(.database) = results[2] else {
                Issue.record("the bad notification must fail with the database's refusal: \(results[2])")
                return
            }
            let counts = try await db.appleData.counts(tenant: tenants[0])
            #expect(counts.notifications == 4)
            #expect(counts.transactions == 4)
            #expect(counts.links == 4)
        }
    }

    @Test("The same notifications grouped by two gateways at once: each stored once, answered new exactly once")
    func sameNotificationsFromTwoGateways() async throws {
        try await Self.withTenants(1) { db, configuration, tenants in
            let other = OfferDatabase(pool: PostgresPool(configuration: configuration, maxConnections: 4))
            defer { Task { await other.pool.close() } }
            // Twelve customers' renewals, two notifications per chain; the second gateway gets them in reverse.
            let items = (0..<24).map { i in
                Self.notification(
                    UUID(), chain: "C\(i % 12)", transaction: "T\(i)",
                    token: String(format: "0b11c0de-0000-4000-8000-%012ld", i % 12), signed: Double(i))
            }
            async let first = db.appleData.ingestNotifications(tenant: tenants[0], items)
            async let second = other.appleData.ingestNotifications(tenant: tenants[0], items.reversed())
            let one = try await first.map { try $0.get() }
            let two = try await Array(second.map { try $0.get() }.reversed())
            for (x, y) in zip(one, two) {
                #expect(x.duplicateNotification != y.duplicateNotification, "exactly one of the two stored it")
                #expect(x.customers == y.customers)
            }
            let counts = try await db.appleData.counts(tenant: tenants[0])
            #expect(counts.notifications == 24)
            #expect(counts.transactions == 24)
            #expect(counts.renewals == 12)
            // Each chain's renewal info is its newest notification's, whoever stored it.
            let kept = try await db.pool.query(
                """
                SELECT original_transaction_id, jws FROM apple_renewal_infos WHERE tenant_id = \(tenants[0])
                ORDER BY original_transaction_id
                """
            ).map { try $0.decode(String.self, String.self) }
            for (chain, jws) in kept {
                let i = Int(chain.dropFirst()) ?? -1
                #expect(jws == "renewal-jws-T\(i + 12)", "chain \(chain) keeps its newest renewal info")
            }
        }
    }
}
