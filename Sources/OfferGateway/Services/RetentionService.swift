import Foundation
import JSONRPC
import OfferDomain
import OfferStore
import Synchronization

/// Retention Messaging (API.md §12): what a tenant answers when Apple asks, at a subscriber's cancel page, which
/// message to show; and the answers themselves, each inside the tenant's time budget.
///
/// An answer is, in this order: the best eligible promotional offer of the product (as `offers.best` ranks them)
/// that has an approved message, signed as a V2 JWS whose `transactionId` is the request's `originalTransactionId`
/// (as `offers.sign` signs, ledger row included); else the first configured alternate product of the same group;
/// else the default message. Past the budget, or on any failure after the request was verified (the database down
/// included), the default message. Every answer is recorded once decided, the answer never waiting for it (the record
/// rides in the ledger's group commit with the signatures committing next).
///
/// HTTP stays out: the route maps `answer`'s errors (`AppleSignedDataError` → 400, -32004 → 404, -32050 → 503).
struct RetentionService: Sendable {
    let retention: RetentionRepository
    /// The customer behind each subscription chain asked about, concurrent lookups coalesced: 50 cancel pages at once
    /// cost a few round trips, not 50 (nil: the chain is linked to nobody).
    let links: BatchedReads<String?>
    let caches: GatewayCaches
    let apple: AppleDataService
    let offers: OfferService
    /// The answers' log, written after each answer: the ledger's group commit (`offers.ledger`), so a record rides
    /// with the signatures committing next.
    var answers: LedgerWriter { offers.ledger }
    let metrics: GatewayMetrics
    let clock: @Sendable () -> Date
    let logger: Logger

    /// Coalesced lookups of the customers linked to subscription chains.
    static func links(_ retention: RetentionRepository) -> BatchedReads<String?> {
        BatchedReads(
            maxInFlight: 1, missing: nil,
            asyncRead: { tenant, originals in
                try await retention.customers(originalTransactionIds: originals, tenant: tenant).mapValues { $0 }
            })
    }

    static let defaultBudgetMs = 500
    static let budgetRange = 1...10_000
    /// Most offers, and most alternate products, one configuration holds.
    static let maxMessages = 1_000

    struct OfferMessage: Decodable, Sendable {
        let offerId: String
        let messageId: String
    }

    struct ProductMessage: Decodable, Sendable {
        let productId: String
        let messageId: String
    }

    struct ConfigureRequest: Decodable, Sendable {
        let defaultMessageId: String
        let offers: [OfferMessage]
        let alternateProducts: [ProductMessage]?
        let budgetMs: Int?
    }

    /// The body Apple POSTs.
    struct Request: Decodable, Sendable {
        let signedPayload: String
    }

    /// One of Apple's three answers (APPLE_OFFERS.md §8).
    enum Answer: Sendable, Equatable {
        case promotionalOffer(messageId: String, signatureV2: String)
        case alternateProduct(messageId: String, productId: String)
        case message(messageId: String)

        var kind: RetentionAnswerRecord.Kind {
            switch self {
            case .promotionalOffer: .promotionalOffer
            case .alternateProduct: .alternateProduct
            case .message: .message
            }
        }
    }

    /// An answer with what the log and the metrics keep of it.
    struct Outcome: Sendable {
        let answer: Answer
        /// Why the answer is not a promotional offer (`no_customer`, `no_offer`, `budget_exceeded`, ...); nil for one.
        let fallbackReason: String?
        /// From `receivedAt` to the answer.
        let latency: Duration
        /// Whether it came inside the budget.
        let withinBudget: Bool
    }

    // MARK: Configuration (admin)

    /// Validates against the tenant's catalog, then replaces the tenant's configuration; nothing is stored when any
    /// entry is refused (-32602 naming it).
    func configure(_ request: ConfigureRequest, tenant: TenantRecord) async throws -> RetentionSettings {
        let defaultMessage = try Self.messageId(request.defaultMessageId, param: "params.defaultMessageId")
        let budget = request.budgetMs ?? Self.defaultBudgetMs
        guard Self.budgetRange.contains(budget) else {
            throw GatewayError.invalidParams(
                param: "params.budgetMs",
                message: "budgetMs must be \(Self.budgetRange.lowerBound)-\(Self.budgetRange.upperBound)")
        }
        let alternates = request.alternateProducts ?? []
        for (list, param) in [(request.offers.count, "offers"), (alternates.count, "alternateProducts")]
        where list > Self.maxMessages {
            throw GatewayError.invalidParams(
                param: "params.\(param)", message: "at most \(Self.maxMessages) entries", reason: "too_many")
        }
        let catalog = try await caches.catalogs.catalog(tenant.id)
        var offers: [RetentionSettings.Message] = []
        for (i, entry) in request.offers.enumerated() {
            let param = "params.offers[\(i)]"
            let offerId = try Validate.identifier(entry.offerId, param: param + ".offerId")
            let named = catalog.offers(withId: offerId)
            guard let offer = named.first else {
                throw GatewayError.invalidParams(
                    param: param + ".offerId", message: "no offer '\(Validate.printable(offerId))' in the catalog",
                    reason: "unknown_offer")
            }
            // Apple's message names a promotional offer by its id alone, so the id must name one offer.
            guard named.count == 1 else {
                throw GatewayError.invalidParams(
                    param: param + ".offerId",
                    message: "offer '\(Validate.printable(offerId))' exists for several products: a retention "
                        + "message cannot tell them apart", reason: "ambiguous_offer")
            }
            guard offer.type == .promotional else {
                throw GatewayError.invalidParams(
                    param: param + ".offerId",
                    message: "only promotional offers can be signed for a retention message; '\(offer.id)' is "
                        + offer.type.rawValue, reason: "not_promotional")
            }
            guard !offers.contains(where: { $0.targetId == offerId }) else {
                throw GatewayError.invalidParams(
                    param: param + ".offerId", message: "offer '\(offer.id)' is listed twice", reason: "duplicate")
            }
            offers.append(.init(targetId: offerId, messageId: try Self.messageId(entry.messageId, param: param)))
        }
        var products: [RetentionSettings.Message] = []
        for (i, entry) in alternates.enumerated() {
            let param = "params.alternateProducts[\(i)]"
            let productId = try Validate.identifier(entry.productId, param: param + ".productId")
            guard catalog.product(productId) != nil else {
                throw GatewayError.invalidParams(
                    param: param + ".productId",
                    message: "no product '\(Validate.printable(productId))' in the catalog", reason: "unknown_product")
            }
            guard !products.contains(where: { $0.targetId == productId }) else {
                throw GatewayError.invalidParams(
                    param: param + ".productId", message: "product '\(productId)' is listed twice",
                    reason: "duplicate")
            }
            products.append(.init(targetId: productId, messageId: try Self.messageId(entry.messageId, param: param)))
        }
        let settings = RetentionSettings(
            defaultMessageId: defaultMessage, offers: offers, alternateProducts: products, budgetMs: budget)
        try await retention.configure(tenant: tenant.id, settings)
        // Other processes hear of it through the change feed; this one must not wait for that.
        caches.retention.invalidate(tenant.id)
        logger.info("retention messaging configured", ["tenant": tenant.slug])
        return try await get(tenant: tenant)
    }

    /// The tenant's configuration (-32004 when it has none).
    func get(tenant: TenantRecord) async throws -> RetentionSettings {
        guard let settings = try await retention.settings(tenant: tenant.id) else { throw Self.notConfigured(tenant) }
        return settings
    }

    private static func messageId(_ raw: String, param: String) throws -> String {
        try Validate.identifier(raw, param: param.hasSuffix("Id") ? param : param + ".messageId", maxBytes: 100)
    }

    private static func notConfigured(_ tenant: TenantRecord) -> GatewayError {
        .notFound(
            "tenant '\(tenant.slug)' has no Retention Messaging configuration (retention.configure)",
            reason: "retention_not_configured")
    }

    // MARK: Answers (Apple's realtime request)

    /// Answers Apple's request `body` (`{"signedPayload"}`) for the tenant `slug`, within the tenant's budget counted
    /// from `receivedAt`.
    ///
    /// Throws only before there is anything to answer: -32004 for an unknown tenant or one without a configuration,
    /// -32602 (`params.signedPayload`) for a body that is not `{"signedPayload": "<JWS>"}`, -32060 for a request Apple
    /// did not sign for this tenant, -32050 when neither the tenant nor its settings can be read (database down and
    /// nothing in memory). Everything after that ends in an answer.
    func answer(tenant slug: String, body: [UInt8], receivedAt: ContinuousClock.Instant = .now) async throws
        -> Outcome
    {
        let tenant = try await tenant(slug)
        let plan = try await settings(tenant)
        let settings = plan.settings
        let signedPayload = try Self.signedPayload(body)
        let request = try apple.retentionRequest(signedPayload, tenant: tenant)
        // The work stops a tenth of the budget early (50 ms of the default 500), so the default message still gets out
        // inside it when the process is busy: resuming the answer waits for a thread of the cooperative pool.
        let budget = Duration.milliseconds(settings.budgetMs)
        let deadline = receivedAt + budget - budget / 10
        // Queued too long already (the deadline counts from the request's arrival): nothing is started.
        let decided: Raced<Decision> =
            ContinuousClock.now >= deadline
            ? .timedOut
            : await Self.race(until: deadline) { [self] in
                try await decide(request, tenant: tenant, plan: plan)
            }
        let decision: Decision
        switch decided {
        case .finished(.success(let made)): decision = made
        case .finished(.failure(let error)):
            let rendered = renderedError(error)
            if let detail = rendered.failureDetail {
                logger.warning("retention answer fell back to the default message", ["error.detail": detail])
            }
            decision = Decision(settings.defaultMessageId, reason: rendered.rpc.reason ?? "internal_error")
        case .timedOut:
            decision = Decision(settings.defaultMessageId, reason: "budget_exceeded")
        }
        let latency = ContinuousClock.now - receivedAt
        let outcome = Outcome(
            answer: decision.answer, fallbackReason: decision.reason, latency: latency,
            withinBudget: latency <= budget)
        metrics.recordRetention(outcome)
        record(outcome, decision: decision, request: request, tenant: tenant)
        return outcome
    }

    /// The tenant; when the database cannot be reached, the one last found here.
    private func tenant(_ slug: String) async throws -> TenantRecord {
        do {
            let found = try await caches.tenants.find(slug: slug)
            caches.retention.remember(found)
            return found
        } catch let error as GatewayError {
            if case .notFound = error { throw error }
            guard let known = caches.retention.lastTenant(slug: slug) else { throw error }
            return known
        } catch {
            guard let known = caches.retention.lastTenant(slug: slug) else { throw error }
            return known
        }
    }

    /// The tenant's settings; when the database cannot be reached, the ones last loaded here.
    private func settings(_ tenant: TenantRecord) async throws -> RetentionPlan {
        let loaded: RetentionPlan?
        do {
            loaded = try await caches.retention.settings(tenant.id)
        } catch {
            guard case .some(let known) = caches.retention.lastLoaded(tenant.id) else { throw error }
            loaded = known
        }
        guard let loaded else { throw Self.notConfigured(tenant) }
        return loaded
    }

    private static func signedPayload(_ body: [UInt8]) throws -> String {
        guard let object = try? JSONParsing.parse(body), let text = object["signedPayload"]?.stringValue else {
            throw GatewayError.invalidParams(
                param: "params.signedPayload", message: "the body must be {\"signedPayload\": \"<JWS>\"}",
                reason: "malformed_body")
        }
        return text
    }

    /// What was decided, with what the record keeps.
    struct Decision: Sendable {
        var answer: Answer
        var reason: String?
        var customerId: String?
        var offerId: String?
        var productId: String?
        var nonce: UUID?

        init(_ defaultMessageId: String, reason: String, customerId: String? = nil) {
            self.answer = .message(messageId: defaultMessageId)
            self.reason = reason
            self.customerId = customerId
        }

        init(answer: Answer, reason: String?, customerId: String?, offerId: String?, productId: String?, nonce: UUID?) {
            self.answer = answer
            self.reason = reason
            self.customerId = customerId
            self.offerId = offerId
            self.productId = productId
            self.nonce = nonce
        }
    }

    private func decide(
        _ request: AppleDataService.RetentionRequest, tenant: TenantRecord, plan: RetentionPlan
    ) async throws -> Decision {
        let (settings, messages) = (plan.settings, plan.offerMessages)
        let catalog = try await caches.catalogs.catalog(tenant.id)
        let customerId = try await links.value(tenant: tenant.id, id: request.originalTransactionId)
        var reason = customerId == nil ? "no_customer" : "no_offer"
        if let customerId, catalog.product(request.productId) != nil {
            let best = try await offers.best(
                OfferService.BestRequest(
                    customerId: customerId, productId: request.productId, groupId: nil, at: nil, locale: nil,
                    billingPlan: nil), tenant: tenant)
            // `considered` is in rank order: the first eligible promotional offer with a message is the best one.
            if let pick = best.result.considered.first(where: {
                $0.rank != nil && $0.offer.type == .promotional && messages[$0.offer.id] != nil
            }), let messageId = messages[pick.offer.id] {
                // Past the deadline the default message is out already: nothing is signed for an answer not given.
                try Task.checkCancellation()
                let signed = try await offers.sign(
                    OfferService.SignRequest(
                        customerId: customerId, productId: pick.product.id, offerId: pick.offer.id, format: "jws",
                        appAccountToken: nil, transactionId: request.originalTransactionId, billingPlan: nil,
                        redemptionId: nil),
                    tenant: tenant)
                guard case .jws(let jws, _, let nonce, let offerId, let productId) = signed else {
                    throw GatewayError.internal("offers.sign returned another format than asked for")
                }
                return Decision(
                    answer: .promotionalOffer(messageId: messageId, signatureV2: jws), reason: nil,
                    customerId: customerId, offerId: offerId, productId: productId, nonce: UUID(uuidString: nonce))
            }
        } else if customerId != nil {
            reason = "unknown_product"
        }
        if let groupId = catalog.groupId(ofProduct: request.productId),
            let alternate = settings.alternateProducts.first(where: {
                $0.targetId != request.productId && catalog.groupId(ofProduct: $0.targetId) == groupId
            })
        {
            return Decision(
                answer: .alternateProduct(messageId: alternate.messageId, productId: alternate.targetId),
                reason: reason, customerId: customerId, offerId: nil, productId: alternate.targetId, nonce: nil)
        }
        return Decision(settings.defaultMessageId, reason: reason, customerId: customerId)
    }

    /// Logs the answer after it is given; a failure to record is logged, and never changes the answer.
    private func record(
        _ outcome: Outcome, decision: Decision, request: AppleDataService.RetentionRequest, tenant: TenantRecord
    ) {
        let micros = Int64(outcome.latency / .microseconds(1))
        let row = RetentionAnswerRow(
            tenant: tenant.id,
            answer: RetentionAnswerRecord(
                answeredAt: clock(), requestId: request.requestIdentifier,
                originalTransactionId: request.originalTransactionId, customerId: decision.customerId,
                environment: request.environment.rawValue, kind: outcome.answer.kind,
                messageId: decision.answer.messageId, offerId: decision.offerId, productId: decision.productId,
                nonce: decision.nonce, fallbackReason: decision.reason, latencyMicros: micros))
        let logger = logger
        answers.record(row) { _ in
            logger.warning(
                "a retention answer was given but not recorded",
                ["tenant": tenant.slug, "request.id": request.requestIdentifier.uuidString.lowercased()])
        }
    }

    // MARK: The budget

    enum Raced<T: Sendable>: Sendable {
        case finished(Result<T, any Error>)
        case timedOut
    }

    /// Runs `work` until `deadline`. Past it the work is cancelled and left to end on its own (a statement in flight
    /// is cancelled in PostgreSQL, a ledger commit finishes), and `.timedOut` is returned at once: a task group would
    /// wait for its child, and so for the very thing that is late. One task per race (the work's); the deadline is an
    /// entry in `timer`'s heap, cancelled when the work wins, instead of a second task sleeping until it.
    static func race<T: Sendable>(
        until deadline: ContinuousClock.Instant, timer: DeadlineTimer = .shared,
        _ work: @escaping @Sendable () async throws -> T
    ) async -> Raced<T> {
        await withCheckedContinuation { continuation in
            let race = Race(continuation)
            race.watch(timer.schedule(at: deadline) { race.resume(.timedOut) })
            race.run(
                Task {
                    let result: Result<T, any Error>
                    do { result = .success(try await work()) } catch { result = .failure(error) }
                    race.resume(.finished(result))
                })
        }
    }

    /// The shared state of one race: whoever comes first resumes the caller and stops the other (the work is
    /// cancelled, the deadline's entry dropped); the other finds nothing to resume.
    private final class Race<T: Sendable>: Sendable {
        private struct State {
            var waiting: CheckedContinuation<Raced<T>, Never>?
            var worker: Task<Void, Never>?
            var deadline: DeadlineTimer.Entry?
            var timedOut = false
        }

        private let state: Mutex<State>

        init(_ continuation: CheckedContinuation<Raced<T>, Never>) {
            state = Mutex(State(waiting: continuation))
        }

        /// Resumes the caller with `value` unless it was resumed already.
        func resume(_ value: Raced<T>) {
            let (waiting, worker, deadline) = state.withLock { s in
                guard let waiting = s.waiting.take() else {
                    return (CheckedContinuation<Raced<T>, Never>?.none, Task<Void, Never>?.none, s.deadline.take())
                }
                if case .timedOut = value {
                    s.timedOut = true
                    return (waiting, s.worker.take(), nil)
                }
                return (waiting, nil, s.deadline.take())
            }
            waiting?.resume(returning: value)
            worker?.cancel()
            deadline?.cancel()
        }

        /// The deadline's entry, dropped once the work finished.
        func watch(_ entry: DeadlineTimer.Entry) {
            let finished = state.withLock { s in
                guard s.waiting != nil || s.timedOut else { return true }
                s.deadline = entry
                return false
            }
            if finished { entry.cancel() }
        }

        /// The work's task, cancelled at the deadline.
        func run(_ worker: Task<Void, Never>) {
            let late = state.withLock { s in
                guard !s.timedOut else { return true }
                s.worker = worker
                return false
            }
            if late { worker.cancel() }
        }
    }
}

/// A recorded answer and its tenant.
struct RetentionAnswerRow: Sendable {
    let tenant: UUID
    let answer: RetentionAnswerRecord
}

extension RetentionService.Answer {
    var messageId: String {
        switch self {
        case .promotionalOffer(let id, _), .alternateProduct(let id, _), .message(let id): id
        }
    }
}

extension GatewayMetrics {
    /// One retention answer in `/metrics`.
    func recordRetention(_ outcome: RetentionService.Outcome) {
        let kind = outcome.answer.kind.rawValue
        retentionAnswers.increment([kind, outcome.fallbackReason ?? "none"])
        retentionDuration.observe(outcome.latency / .seconds(1), [kind])
        if !outcome.withinBudget { retentionOutsideBudget.increment() }
    }
}
