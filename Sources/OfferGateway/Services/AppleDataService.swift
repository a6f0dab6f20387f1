import Foundation
import JSONRPC
import Metrics
import OfferCrypto
import OfferDomain
import OfferStore

/// Apple's signed data in (API.md §8): notifications, transactions and renewal infos are verified against the
/// tenant's current settings, reduced to what decisions use, and stored atomically per call with their raw JWS; the
/// customers they belong to are dropped from every cache (here at once, elsewhere through the change feed).
struct AppleDataService: Sendable {
    let repository: AppleDataRepository
    let caches: GatewayCaches
    let verifier: AppleSignedDataVerifier
    /// `offergate_apple_data_ingested_total{type,result}`.
    let ingested: Counter
    /// Group commit of notifications, per tenant: the notifications that arrive while a tenant's batches commit are
    /// stored together in one transaction (`AppleDataRepository.ingestNotifications`), each with its own outcome.
    private let notifications: GroupCommits<UUID, AppleIngestBatch, AppleIngestOutcome>

    /// Most notifications in one group transaction.
    static let maxNotificationGroup = 128
    /// A tenant's notification groups committing at once (so the next group's statements overlap a commit's WAL
    /// flush).
    static let notificationGroupsInFlight = 2
    /// A second group starts while one commits once as many wait as that one carries, not twice as many: a group's
    /// cost is mostly per notification (its JWS stored), so two of one size cost PostgreSQL about what one twice as
    /// large would, and two backends then share the cores with the verifications (docs/perf/b11-ingestion.md,
    /// session 36).
    static let notificationBurstRatio = 1

    init(repository: AppleDataRepository, caches: GatewayCaches, verifier: AppleSignedDataVerifier, ingested: Counter) {
        self.repository = repository
        self.caches = caches
        self.verifier = verifier
        self.ingested = ingested
        notifications = GroupCommits(
            maxBatchSize: Self.maxNotificationGroup, maxInFlight: Self.notificationGroupsInFlight, linger: nil,
            burstRatio: Self.notificationBurstRatio
        ) { tenant, batches in
            await repository.ingestNotifications(tenant: tenant, batches).map { $0.mapError { $0 as any Error } }
        }
    }

    /// The verifier when the options give none: Apple Root CA - G3 only (built in; parsing it cannot fail, and the
    /// OfferCrypto tests check it parses).
    static let builtInVerifier: AppleSignedDataVerifier = {
        do { return try AppleSignedDataVerifier() } catch { preconditionFailure("built-in Apple root: \(error)") }
    }()

    /// Most JWS of one kind in one `appstore.transactions` call.
    static let maxBatch = 1_000

    struct NotificationRequest: Decodable, Sendable {
        let signedPayload: String
    }

    struct TransactionsRequest: Decodable, Sendable {
        let signedTransactions: [String]
        let signedRenewalInfo: [String]?
        let customerId: String?
    }

    struct LinkRequest: Decodable, Sendable {
        let customerId: String
        let originalTransactionId: String
    }

    struct NotificationResult: Sendable {
        let notificationUUID: UUID
        let notificationType: String
        let subtype: String?
        let environment: DataEnvironment
        let customerId: String?
        let applied: Bool
        let duplicate: Bool
    }

    struct TransactionsResult: Sendable {
        let applied: Int
        let duplicates: Int
        let customers: [String]
    }

    struct LinkResult: Sendable {
        let linked: Bool
        let applied: Int
    }

    func notification(_ request: NotificationRequest, tenant: TenantRecord) async throws -> NotificationResult {
        do {
            let result = try await verifiedNotification(request, tenant: tenant)
            let outcome = result.duplicate ? "duplicate" : result.applied ? "applied" : "unlinked"
            ingested.increment(["notification", outcome])
            return result
        } catch {
            ingested.increment(["notification", Self.failure(error)])
            throw error
        }
    }

    /// `rejected_<reason>` for what the verifier or the payload checks refused, `failed` otherwise.
    static func failure(_ error: any Error) -> String {
        let rendered = renderedError(error).rpc
        return rendered.code == -32060 ? "rejected_\(rendered.reason ?? "unknown")" : "failed"
    }

    private func verifiedNotification(_ request: NotificationRequest, tenant: TenantRecord) async throws
        -> NotificationResult
    {
        let expectation = try await expectation(tenant)
        let verified = try verifier.verifyNotification(request.signedPayload, expecting: expectation)
        let payload = try ApplePayload(verified.notification)
        let notification = StoredAppleNotification(
            notificationUUID: try payload.uuid("notificationUUID"),
            notificationType: try payload.text("notificationType", required: true) ?? "",
            subtype: try payload.text("subtype"), environment: try Self.environment(verified.notification),
            signedDate: verified.notification.signedDate, jws: request.signedPayload)
        var batch = AppleIngestBatch(notification: notification)
        if let transaction = verified.transaction {
            let jws = try payload.text("signedTransactionInfo", in: "data", maxBytes: .max) ?? ""
            batch.transactions = [try Self.transaction(transaction, jws: jws)]
        }
        if let renewal = verified.renewalInfo {
            let jws = try payload.text("signedRenewalInfo", in: "data", maxBytes: .max) ?? ""
            batch.renewals = [try Self.renewal(renewal, jws: jws)]
        }
        let outcome = try await notifications.submit(batch, key: tenant.id)
        // Other processes hear of it through the change feed; this one must not wait for that.
        for customer in outcome.customers { caches.invalidate(tenant: tenant.id, customerId: customer) }
        return NotificationResult(
            notificationUUID: notification.notificationUUID, notificationType: notification.notificationType,
            subtype: notification.subtype, environment: notification.environment,
            customerId: outcome.customers.first, applied: !outcome.customers.isEmpty && !outcome.duplicateNotification,
            duplicate: outcome.duplicateNotification)
    }

    /// Verifies every JWS first: one rejected JWS rejects the call, and nothing is stored.
    func transactions(_ request: TransactionsRequest, tenant: TenantRecord) async throws -> TransactionsResult {
        do {
            let result = try await verifiedTransactions(request, tenant: tenant)
            ingested.increment(["transaction", "applied"], by: Double(result.applied))
            ingested.increment(["transaction", "duplicate"], by: Double(result.duplicates))
            return result
        } catch {
            ingested.increment(["transaction", Self.failure(error)])
            throw error
        }
    }

    private func verifiedTransactions(_ request: TransactionsRequest, tenant: TenantRecord) async throws
        -> TransactionsResult
    {
        let renewals = request.signedRenewalInfo ?? []
        for (list, param) in [(request.signedTransactions, "signedTransactions"), (renewals, "signedRenewalInfo")]
        where list.count > Self.maxBatch {
            throw GatewayError.invalidParams(
                param: "params.\(param)", message: "at most \(Self.maxBatch) JWS per call", reason: "too_many")
        }
        guard !request.signedTransactions.isEmpty || !renewals.isEmpty else {
            throw GatewayError.invalidParams(
                param: "params.signedTransactions", message: "give at least one signed transaction",
                reason: "missing_param")
        }
        let customerId = try request.customerId.map { try Validate.customerId($0) }
        let expectation = try await expectation(tenant)
        var batch = AppleIngestBatch(customerId: customerId)
        for jws in request.signedTransactions {
            batch.transactions.append(
                try Self.transaction(try verifier.verify(jws, as: .transaction, expecting: expectation), jws: jws))
        }
        for jws in renewals {
            let verified = try verifier.verify(jws, as: .renewalInfo, expecting: expectation)
            batch.renewals.append(try Self.renewal(verified, jws: jws))
        }
        let outcome = try await ingest(batch, tenant: tenant)
        return TransactionsResult(
            applied: outcome.applied, duplicates: outcome.duplicates, customers: outcome.customers)
    }

    func link(_ request: LinkRequest, tenant: TenantRecord) async throws -> LinkResult {
        let customerId = try Validate.customerId(request.customerId)
        let original = try Validate.identifier(
            request.originalTransactionId, param: "params.originalTransactionId", maxBytes: 100)
        let applied = try await repository.link(
            tenant: tenant.id, originalTransactionId: original, customerId: customerId)
        caches.invalidate(tenant: tenant.id, customerId: customerId)
        return LinkResult(linked: true, applied: applied)
    }

    private func ingest(_ batch: AppleIngestBatch, tenant: TenantRecord) async throws -> AppleIngestOutcome {
        let outcome = try await repository.ingest(tenant: tenant.id, batch)
        // Other processes hear of it through the change feed; this one must not wait for that.
        for customer in outcome.customers { caches.invalidate(tenant: tenant.id, customerId: customer) }
        return outcome
    }

    /// The tenant's settings as stored now (the session's copy may predate a `tenants.update`).
    private func expectation(_ tenant: TenantRecord) async throws -> AppleSignedDataExpectation {
        Self.expectation(try await caches.catalogs.snapshot(tenant.id).tenant ?? tenant)
    }

    /// What Apple's data must say to be this tenant's, per its settings in `tenant`.
    static func expectation(_ tenant: TenantRecord) -> AppleSignedDataExpectation {
        AppleSignedDataExpectation(
            bundleId: tenant.bundleId, appAppleId: tenant.appAppleId, allowSandbox: tenant.allowSandbox,
            allowXcode: tenant.allowXcode)
    }

    /// What a Retention Messaging request says (APPLE_OFFERS.md §8), once verified.
    struct RetentionRequest: Sendable {
        let originalTransactionId: String
        let productId: String
        let requestIdentifier: UUID
        let userLocale: String?
        let environment: DataEnvironment
        let signedDate: Date
    }

    /// Verifies a Retention Messaging request's `signedPayload` for `tenant` (as current: the caller's copy is the
    /// tenant directory's, dropped on every `tenants.update`) and reads it. No database access, so a request can be
    /// verified while the database is down. Throws `AppleSignedDataError` (-32060) when rejected.
    func retentionRequest(_ signedPayload: String, tenant: TenantRecord) throws -> RetentionRequest {
        let verified = try verifier.verify(
            signedPayload, as: .retentionMessagingRequest, expecting: Self.expectation(tenant))
        let p = try ApplePayload(verified)
        return RetentionRequest(
            originalTransactionId: try p.identifier("originalTransactionId"),
            productId: try p.identifier("productId", maxBytes: 255), requestIdentifier: try p.uuid("requestIdentifier"),
            userLocale: try p.text("userLocale", maxBytes: 35), environment: try Self.environment(verified),
            signedDate: verified.signedDate)
    }

    static func environment(_ verified: VerifiedAppleSignedData) throws -> DataEnvironment {
        guard let environment = DataEnvironment(rawValue: verified.environment.rawValue) else {
            throw AppleSignedDataError(.malformedJWS, "unknown environment")
        }
        return environment
    }

    static func transaction(_ verified: VerifiedAppleSignedData, jws: String) throws -> StoredAppleTransaction {
        let p = try ApplePayload(verified)
        let facts = AppleTransactionFacts(
            transactionId: try p.identifier("transactionId"),
            originalTransactionId: try p.identifier("originalTransactionId"),
            environment: try environment(verified), productId: try p.identifier("productId", maxBytes: 255),
            purchaseDate: try p.date("purchaseDate", required: true) ?? Date(timeIntervalSince1970: 0),
            expiresDate: try p.date("expiresDate"), appleOfferType: try p.integer("offerType").map { Int($0) },
            offerId: try p.text("offerIdentifier"),
            offerPaymentMode: try p.text("offerDiscountType").flatMap(PaymentMode.init(appleDiscountType:)),
            familyShared: try p.text("inAppOwnershipType") == "FAMILY_SHARED",
            revocationDate: try p.date("revocationDate"), signedDate: verified.signedDate)
        return StoredAppleTransaction(
            facts: facts, appAccountToken: try p.token(),
            subscriptionGroupId: try p.text("subscriptionGroupIdentifier"),
            originalPurchaseDate: try p.date("originalPurchaseDate"),
            offerDiscountType: try p.text("offerDiscountType"),
            offerPeriod: try p.text("offerPeriod"), inAppOwnershipType: try p.text("inAppOwnershipType"),
            revocationReason: try p.integer("revocationReason").map { Int32(clamping: $0) },
            revocationType: try p.text("revocationType"), transactionType: try p.text("type"),
            verifiedByApple: verified.authenticity == .verifiedChain, jws: jws)
    }

    static func renewal(_ verified: VerifiedAppleSignedData, jws: String) throws -> StoredAppleRenewal {
        let p = try ApplePayload(verified)
        let facts = AppleRenewalFacts(
            originalTransactionId: try p.identifier("originalTransactionId"), environment: try environment(verified),
            productId: try p.text("productId"), autoRenewProductId: try p.text("autoRenewProductId"),
            autoRenewStatus: try p.integer("autoRenewStatus").map { Int($0) },
            inBillingRetry: try p.bool("isInBillingRetryPeriod") ?? false,
            gracePeriodExpiresDate: try p.date("gracePeriodExpiresDate"),
            eligibleWinBackOfferIds: try p.strings("eligibleWinBackOfferIds"),
            billingPlan: try p.text("billingPlanType").flatMap(BillingPlan.init(apple:)),
            signedDate: verified.signedDate)
        return StoredAppleRenewal(
            facts: facts, appAccountToken: try p.token(),
            expirationIntent: try p.integer("expirationIntent").map { Int32(clamping: $0) },
            renewalDate: try p.date("renewalDate"), verifiedByApple: verified.authenticity == .verifiedChain,
            jws: jws)
    }
}

/// Typed reads of a verified payload's claims. A claim of the wrong type, too long, or with a NUL is
/// `malformed_jws` (-32060): Apple never sends one, and nothing reaches the database that it would refuse.
struct ApplePayload {
    let object: JSONValue

    init(_ verified: VerifiedAppleSignedData) throws {
        do {
            object = try JSONParsing.parse(verified.payload)
        } catch {
            throw AppleSignedDataError(.malformedJWS, "payload is not JSON")
        }
        guard object.objectValue != nil else { throw AppleSignedDataError(.malformedJWS, "payload is not an object") }
    }

    /// Whether `text` holds a NUL byte, with `memchr` over its UTF-8 (a nested JWS is ~19 KB: walking it through
    /// `String.UTF8View` one byte at a time was 2 % of a notification's gateway CPU).
    static func containsNUL(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in bytes.count > 0 && memchr(bytes.baseAddress!, 0, bytes.count) != nil }
    }

    private func bad(_ key: String, _ what: String) -> AppleSignedDataError {
        AppleSignedDataError(.malformedJWS, "claim \(key) is not \(what)")
    }

    private func value(_ key: String, in section: String? = nil) -> JSONValue? {
        let container = section.map { object[$0] } ?? object
        guard let value = container?[key], !value.isNull else { return nil }
        return value
    }

    func text(_ key: String, in section: String? = nil, required: Bool = false, maxBytes: Int = 255) throws
        -> String?
    {
        guard let value = value(key, in: section) else {
            if required { throw bad(key, "present") }
            return nil
        }
        guard let text = value.stringValue, text.utf8.count <= maxBytes, !Self.containsNUL(text) else {
            throw bad(key, "a string of at most \(maxBytes) bytes")
        }
        return text
    }

    func identifier(_ key: String, maxBytes: Int = 100) throws -> String {
        guard let text = try text(key, required: true, maxBytes: maxBytes), !text.isEmpty else {
            throw bad(key, "a non-empty string")
        }
        return text
    }

    func integer(_ key: String) throws -> Int64? {
        guard let value = value(key) else { return nil }
        guard let number = value.int64Value else { throw bad(key, "an integer") }
        return number
    }

    func bool(_ key: String) throws -> Bool? {
        guard let value = value(key) else { return nil }
        guard let flag = value.boolValue else { throw bad(key, "a boolean") }
        return flag
    }

    /// Milliseconds since 1970, as Apple sends dates; within years 1970-9999.
    func date(_ key: String, required: Bool = false) throws -> Date? {
        guard let ms = try integer(key) else {
            if required { throw bad(key, "present") }
            return nil
        }
        guard (0...253_402_300_799_000).contains(ms) else { throw bad(key, "a date") }
        return Date(timeIntervalSince1970: Double(ms) / 1000)
    }

    func strings(_ key: String) throws -> [String]? {
        guard let value = value(key) else { return nil }
        guard let list = value.arrayValue, list.count <= 100 else { throw bad(key, "a list of strings") }
        return try list.map { item in
            guard let text = item.stringValue, !text.isEmpty, text.utf8.count <= 255, !Self.containsNUL(text) else {
                throw bad(key, "a list of strings")
            }
            return text
        }
    }

    func uuid(_ key: String) throws -> UUID {
        guard let text = try text(key, required: true), let uuid = UUID(uuidString: text) else {
            throw bad(key, "a UUID")
        }
        return uuid
    }

    /// `appAccountToken`, lowercased; an empty string (Apple sends one for purchases without a token) is none.
    func token() throws -> String? {
        guard let text = try text("appAccountToken"), !text.isEmpty else { return nil }
        guard CustomerID.isUUIDShaped(text) else { throw bad("appAccountToken", "a UUID") }
        return text.lowercased()
    }
}
