import Foundation
import OfferDomain
import Postgres

/// Group commit of notifications (`appstore.notification` under load, see `AppleDataService`): many notifications'
/// batches stored in ONE transaction, with one statement per step for the whole group instead of one per record,
/// and one `COMMIT` (one WAL flush, one pass through PostgreSQL's NOTIFY queue lock) for all of them.
///
/// Each notification's outcome is the one it would get alone, in group order:
///
/// - every chain of the group is locked first (sorted, as single calls lock theirs, so writers never deadlock);
/// - a notificationUUID stored already, or earlier in the group, is a duplicate and changes nothing (it answers with
///   the customer the notification reached);
/// - records only move forward by their own `signedDate`: of several records with one key in the group the latest
///   is written (the state one after another would reach);
/// - a notification whose customers do not follow from its own data (no `appAccountToken`) is applied on its own,
///   statement by statement, after the others (`apply`);
/// - when the database refuses the group (one notification's data failing a constraint aborts the transaction),
///   each notification is stored again in a transaction of its own, so only the bad one fails.
extension AppleDataRepository {
    /// Stores notifications' batches (each with its `notification`) as one group; one result per batch, in order.
    public func ingestNotifications(tenant: UUID, _ items: [AppleIngestBatch]) async
        -> [Result<AppleIngestOutcome, StoreError>]
    {
        guard items.count > 1, items.allSatisfy({ $0.notification != nil }) else { return await each(tenant, items) }
        do {
            let outcomes = try await storeCall {
                try await pool.withTransaction { tx in try await Self.ingestGroup(tx, tenant: tenant, items) }
            }
            return outcomes.map { .success($0) }
        } catch {
            if case .unavailable = error { return items.map { _ in .failure(error) } }
            return await each(tenant, items)
        }
    }

    /// Each batch in a transaction of its own.
    private func each(_ tenant: UUID, _ items: [AppleIngestBatch]) async -> [Result<AppleIngestOutcome, StoreError>] {
        var results: [Result<AppleIngestOutcome, StoreError>] = []
        for item in items {
            do {
                results.append(.success(try await ingest(tenant: tenant, item)))
            } catch {
                results.append(.failure(error))
            }
        }
        return results
    }

    static func ingestGroup(_ tx: PostgresTransaction, tenant: UUID, _ items: [AppleIngestBatch]) async throws
        -> [AppleIngestOutcome]
    {
        let notifications = items.compactMap(\.notification)
        guard notifications.count == items.count else { throw StoreError.corrupt("a group item has no notification") }
        let chains = Set(items.flatMap(\.chains)).sorted()
        let uuids = notifications.map(\.notificationUUID)
        // One round trip: the chains' locks (in order), the notifications' rows, and what is stored under their ids.
        // Duplicates are answered from what is stored: the commit waits for the standby even if nothing is new.
        let opened = try await tx.pipeline(
            [
                lockAllQuery(tenant: tenant, chains: chains), insertAllQuery(tenant: tenant, items),
                """
                SELECT u.id, (SELECT n.customer_id FROM apple_notifications n
                              WHERE n.tenant_id = \(tenant) AND n.notification_uuid = u.id)
                FROM unnest(\(uuids)::uuid[]) AS u(id)
                """,
                .waitForStandbyAtCommit,
            ], prepared: true
        ).map { try $0.get() }
        guard opened.count == 4 else { throw StoreError.corrupt("pipeline returned \(opened.count) results") }
        let inserted = Set(try opened[1].map { try $0.decode(UUID.self, at: 0) })
        var stored: [UUID: String] = [:]
        for row in opened[2] {
            let (id, customer) = try row.decode(UUID.self, String?.self)
            if let customer { stored[id] = customer }
        }
        var firstOf: [UUID: Int] = [:]
        var fresh: [Int] = []
        for (index, uuid) in uuids.enumerated() where firstOf[uuid] == nil {
            firstOf[uuid] = index
            if inserted.contains(uuid) { fresh.append(index) }
        }
        var outcomes = [AppleIngestOutcome?](repeating: nil, count: items.count)
        let tokened = fresh.compactMap { index in tokenCustomers(items[index]).map { (index, $0) } }
        for (index, outcome) in try await applyTokened(tx, tenant: tenant, items, tokened) {
            outcomes[index] = outcome
        }
        for index in fresh where outcomes[index] == nil {
            outcomes[index] = try await apply(tx, tenant: tenant, items[index])
        }
        return uuids.enumerated().map { index, uuid in
            if let outcome = outcomes[index] { return outcome }
            // A duplicate: of one stored before (the customer it reached), or of an earlier one of the group.
            let first = firstOf[uuid] ?? index
            let customer =
                first != index && outcomes[first]?.duplicateNotification == false
                ? outcomes[first]?.customers.first : stored[uuid]
            return AppleIngestOutcome(
                duplicateNotification: true, applied: 0, duplicates: 0, customers: customer.map { [$0] } ?? [])
        }
    }

    /// The group's chain locks, taken in the order given (sorted by the caller).
    static func lockAllQuery(tenant: UUID, chains: [String]) -> PostgresQuery {
        let keys = chains.map { lockKey(tenant: tenant, chain: $0) }
        return """
            SELECT pg_advisory_xact_lock(hashtextextended(k.key, 0))
            FROM unnest(\(keys)::text[]) WITH ORDINALITY AS k(key, n) ORDER BY k.n
            """
    }

    /// The group's notification rows (as `insertQuery` stores one); the ids inserted come back.
    static func insertAllQuery(tenant: UUID, _ items: [AppleIngestBatch]) -> PostgresQuery {
        let n = items.compactMap(\.notification)
        let transactionIds: [String?] = items.map { $0.transactions.first?.facts.transactionId }
        let originals: [String?] = items.map {
            $0.transactions.first?.facts.originalTransactionId ?? $0.renewals.first?.facts.originalTransactionId
        }
        // The customer a notification reaches, when its own data says (`tokenCustomers`): stored with the row, as
        // the single path's later UPDATE would. The others get theirs from `apply`.
        let customers: [String?] = items.map {
            tokenCustomers($0) == nil ? nil : Set($0.transactions.compactMap(\.appAccountToken)).min()
        }
        return """
            INSERT INTO apple_notifications
                (tenant_id, notification_uuid, notification_type, subtype, environment, transaction_id,
                 original_transaction_id, customer_id, signed_date, jws)
            SELECT \(tenant), u.id, u.type, u.subtype, u.environment, u.transaction_id, u.original, u.customer,
                   u.signed, u.jws
            FROM unnest(\(n.map(\.notificationUUID))::uuid[], \(n.map(\.notificationType))::text[],
                        \(n.map(\.subtype))::text[], \(n.map(\.environment.rawValue))::text[],
                        \(transactionIds)::text[], \(originals)::text[], \(customers)::text[],
                        \(n.map(\.signedDate))::timestamptz[], \(n.map(\.jws))::text[])
                 AS u(id, type, subtype, environment, transaction_id, original, customer, signed, jws)
            ORDER BY u.id
            ON CONFLICT (tenant_id, notification_uuid) DO NOTHING
            RETURNING notification_uuid
            """
    }

    /// The new notifications whose customers follow from their own data (`tokenCustomers`), in one pipelined round
    /// trip: their tokens' links, every record's upsert (the latest per key) and attribution; then, only when a link
    /// is new, the adoption of its chain's unlinked records.
    private static func applyTokened(
        _ tx: PostgresTransaction, tenant: UUID, _ items: [AppleIngestBatch],
        _ tokened: [(index: Int, customerOfChain: [String: String])]
    ) async throws -> [(Int, AppleIngestOutcome)] {
        guard !tokened.isEmpty else { return [] }
        var linkChains: [String] = []
        var linkCustomers: [String] = []
        var transactions: [String: (item: Int, record: StoredAppleTransaction)] = [:]
        var renewals: [RenewalKey: (item: Int, record: StoredAppleRenewal, customer: String?)] = [:]
        for (index, customerOfChain) in tokened {
            let batch = items[index]
            for t in batch.transactions {
                let chain = t.facts.originalTransactionId
                if let token = t.appAccountToken, !linkChains.contains(chain) {
                    linkChains.append(chain)
                    linkCustomers.append(token)
                }
                if let kept = transactions[t.facts.transactionId], kept.record.facts.signedDate >= t.facts.signedDate {
                    continue
                }
                transactions[t.facts.transactionId] = (index, t)
            }
            for r in batch.renewals {
                let key = RenewalKey(chain: r.facts.originalTransactionId, environment: r.facts.environment.rawValue)
                if let kept = renewals[key], kept.record.facts.signedDate >= r.facts.signedDate { continue }
                renewals[key] = (index, r, customerOfChain[r.facts.originalTransactionId])
            }
        }
        var queries: [PostgresQuery] = []
        if !linkChains.isEmpty {
            queries.append(linkAllQuery(tenant: tenant, chains: linkChains, customers: linkCustomers))
        }
        let writtenTransactions = transactions.values.sorted {
            $0.record.facts.transactionId < $1.record.facts.transactionId
        }
        if !writtenTransactions.isEmpty {
            queries.append(upsertAllQuery(tenant: tenant, writtenTransactions.map(\.record)))
        }
        let writtenRenewals = renewals.sorted {
            ($0.key.chain, $0.key.environment) < ($1.key.chain, $1.key.environment)
        }
        if !writtenRenewals.isEmpty {
            queries.append(
                upsertAllQuery(
                    tenant: tenant, writtenRenewals.map(\.value.record),
                    customers: writtenRenewals.map(\.value.customer)))
        }
        let transactionIds = writtenTransactions.map(\.record.facts.transactionId)
        if !transactionIds.isEmpty { queries += attributionQueries(tenant: tenant, transactionIds: transactionIds) }
        let results = try await tx.pipeline(queries, prepared: true).map { try $0.get() }
        var next = 0
        var linked: [(chain: String, customer: String)] = []
        if !linkChains.isEmpty {
            linked = try results[next].map { try $0.decode(String.self, String.self) }
            next += 1
        }
        var changedTransactions: Set<String> = []
        if !writtenTransactions.isEmpty {
            changedTransactions = Set(try results[next].map { try $0.decode(String.self, at: 0) })
            next += 1
        }
        var changedRenewals: Set<RenewalKey> = []
        if !writtenRenewals.isEmpty {
            for row in results[next] {
                let (chain, environment) = try row.decode(String.self, String.self)
                changedRenewals.insert(RenewalKey(chain: chain, environment: environment))
            }
        }
        // A new link gives the chain's records kept unlinked so far (none of this group's: they all have their
        // customer) to its customer, two statements for all; their purchases are attributed now.
        if !linked.isEmpty {
            let adoption = try await tx.pipeline(
                adoptQueries(tenant: tenant, chains: linked.map(\.chain), customers: linked.map(\.customer)),
                prepared: true
            ).map { try $0.get() }
            guard adoption.count == 2 else { throw StoreError.corrupt("adoption returned \(adoption.count) results") }
            let adopted = try adoption[0].map { try $0.decode(String.self, at: 0) }
            try await attribute(tx, tenant: tenant, transactionIds: adopted)
        }
        return tokened.map { index, _ in
            let batch = items[index]
            let applied =
                batch.transactions.filter {
                    transactions[$0.facts.transactionId]?.item == index
                        && changedTransactions.contains($0.facts.transactionId)
                }.count
                + batch.renewals.filter {
                    let key = RenewalKey(
                        chain: $0.facts.originalTransactionId, environment: $0.facts.environment.rawValue)
                    return renewals[key]?.item == index && changedRenewals.contains(key)
                }.count
            let records = batch.transactions.count + batch.renewals.count
            return (
                index,
                AppleIngestOutcome(
                    duplicateNotification: false, applied: applied, duplicates: records - applied,
                    customers: Set(batch.transactions.compactMap(\.appAccountToken)).sorted())
            )
        }
    }

    private struct RenewalKey: Hashable {
        let chain: String
        let environment: String
    }

    /// Links each chain (unique in `chains`) to its customer unless it is linked already; the new links come back.
    static func linkAllQuery(tenant: UUID, chains: [String], customers: [String]) -> PostgresQuery {
        """
        INSERT INTO customer_links (tenant_id, original_transaction_id, customer_id)
        SELECT \(tenant), l.chain, l.customer FROM unnest(\(chains)::text[], \(customers)::text[]) AS l(chain, customer)
        ON CONFLICT DO NOTHING
        RETURNING original_transaction_id, customer_id
        """
    }

    /// The upsert of several transactions (unique ids), each for the customer of its `appAccountToken`, as
    /// `upsertQuery` stores one; the ids of those that changed come back.
    static func upsertAllQuery(tenant: UUID, _ records: [StoredAppleTransaction]) -> PostgresQuery {
        let f = records.map(\.facts)
        let offerTypes: [Int32?] = f.map { $0.appleOfferType.map { Int32(clamping: $0) } }
        let authenticity = records.map { $0.verifiedByApple ? "verifiedChain" : "unverifiedDevelopmentData" }
        return """
            INSERT INTO apple_transactions AS old
                (tenant_id, transaction_id, original_transaction_id, environment, customer_id, app_account_token,
                 product_id, subscription_group_id, purchase_date, original_purchase_date, expires_date, offer_type,
                 offer_id, offer_discount_type, offer_period, in_app_ownership_type, revocation_date,
                 revocation_reason, revocation_type, transaction_type, signed_date, authenticity, jws)
            SELECT \(tenant), u.* FROM unnest(
                \(f.map(\.transactionId))::text[], \(f.map(\.originalTransactionId))::text[],
                \(f.map(\.environment.rawValue))::text[], \(records.map(\.appAccountToken))::text[],
                \(records.map(\.appAccountToken))::text[], \(f.map(\.productId))::text[],
                \(records.map(\.subscriptionGroupId))::text[], \(f.map(\.purchaseDate))::timestamptz[],
                \(records.map(\.originalPurchaseDate))::timestamptz[], \(f.map(\.expiresDate))::timestamptz[],
                \(offerTypes)::int4[], \(f.map(\.offerId))::text[], \(records.map(\.offerDiscountType))::text[],
                \(records.map(\.offerPeriod))::text[], \(records.map(\.inAppOwnershipType))::text[],
                \(f.map(\.revocationDate))::timestamptz[], \(records.map(\.revocationReason))::int4[],
                \(records.map(\.revocationType))::text[], \(records.map(\.transactionType))::text[],
                \(f.map(\.signedDate))::timestamptz[], \(authenticity)::text[], \(records.map(\.jws))::text[]) AS u
            \(query: .unsafeRaw(transactionConflict))
            """
    }

    /// The upsert of several renewal infos (unique chain and environment), as `upsertQuery` stores one; the keys of
    /// those that changed come back.
    static func upsertAllQuery(tenant: UUID, _ records: [StoredAppleRenewal], customers: [String?]) -> PostgresQuery {
        let f = records.map(\.facts)
        // Each row's list as an array literal, cast back per row (unnest would flatten a two-dimensional array).
        let winBack: [String?] = f.map {
            $0.eligibleWinBackOfferIds.map {
                String(decoding: String.postgresArrayLiteralBind($0).bytes ?? [], as: UTF8.self)
            }
        }
        let statuses: [Int32?] = f.map { $0.autoRenewStatus.map { Int32(clamping: $0) } }
        let authenticity = records.map { $0.verifiedByApple ? "verifiedChain" : "unverifiedDevelopmentData" }
        return """
            INSERT INTO apple_renewal_infos AS old
                (tenant_id, original_transaction_id, environment, customer_id, product_id, auto_renew_product_id,
                 auto_renew_status, is_in_billing_retry, grace_period_expires_date, expiration_intent, renewal_date,
                 eligible_win_back_offer_ids, billing_plan, signed_date, authenticity, jws)
            SELECT \(tenant), u.chain, u.environment, u.customer, u.product, u.auto_product, u.status, u.retry, u.grace,
                   u.intent, u.renewal, u.win_back::text[], u.plan, u.signed, u.authenticity, u.jws
            FROM unnest(
                \(f.map(\.originalTransactionId))::text[], \(f.map(\.environment.rawValue))::text[],
                \(customers)::text[], \(f.map(\.productId))::text[], \(f.map(\.autoRenewProductId))::text[],
                \(statuses)::int4[], \(f.map(\.inBillingRetry))::bool[], \(f.map(\.gracePeriodExpiresDate))::timestamptz[],
                \(records.map(\.expirationIntent))::int4[], \(records.map(\.renewalDate))::timestamptz[],
                \(winBack)::text[], \(f.map { $0.billingPlan?.rawValue })::text[], \(f.map(\.signedDate))::timestamptz[],
                \(authenticity)::text[], \(records.map(\.jws))::text[])
                AS u(chain, environment, customer, product, auto_product, status, retry, grace, intent, renewal, win_back,
                     plan, signed, authenticity, jws)
            \(query: .unsafeRaw(renewalConflict))
            """
    }
}
