import Foundation
import JSONRPC
import Metrics
import OfferCrypto
import OfferDomain
import OfferStore
import Synchronization

/// Offers for a customer: eligibility, the best offer with its copy (remembered while exactly right), and
/// signatures for StoreKit, each recorded in the ledger before it is returned.
struct OfferService: Sendable {
    let customers: CustomerService
    let caches: GatewayCaches
    let ledger: LedgerWriter
    /// The ledger's reads (a redemption's signature, for replays).
    let signatures: SignatureLedger
    /// Redemptions that make a customer eligible (`redemptionId`).
    let campaigns: CampaignRepository
    /// The funnel's `offered` counts (in memory, flushed by `GatewayService`).
    let offered: OfferedCounter
    let clock: @Sendable () -> Date
    let nonce: @Sendable () -> UUID
    /// `offergate_signatures_total{format}`: counted once the ledger row is committed.
    let signed: Counter
    /// Where stdio's decisions over inputs in memory are made (`bestNow`); its thread starts with the first.
    let decisionThread = WorkThread(name: "offer-decisions")

    struct EligibilityRequest: Decodable, Sendable {
        let customerId: String
        let productId: String
        let at: Date?
        let billingPlan: String?
    }

    struct BestRequest: Decodable, Sendable {
        let customerId: String
        let productId: String?
        let groupId: String?
        let at: Date?
        let locale: String?
        let billingPlan: String?
    }

    struct SignRequest: Decodable, Sendable {
        let customerId: String
        let productId: String
        let offerId: String
        let format: String
        let appAccountToken: String?
        let transactionId: String?
        let billingPlan: String?
        /// A live redemption of a campaign granting the offer: eligibility whatever the offer's audience.
        let redemptionId: String?
    }

    struct IntroRequest: Decodable, Sendable {
        let customerId: String
        let productId: String
        let transactionId: String
    }

    /// Every offer of a product with the customer's verdict.
    struct EligibilityAnswer: Sendable {
        let productId: String
        let verdicts: [EligibilityVerdict]
    }

    /// A promotional offer signed for StoreKit, in the format asked for.
    enum SignedOffer: Sendable, Hashable {
        case v1(
            keyId: String, nonce: String, timestamp: Int64, signature: String, offerId: String, productId: String,
            appAccountToken: String)
        case jws(String, keyId: String, nonce: String, offerId: String, productId: String)

        /// How long a signature stays usable at Apple (a V1 timestamp is valid 24 h; the same for a JWS here), so
        /// how long a replay of a redemption answers the signature it made.
        static let validity: TimeInterval = 24 * 3600

        /// The signature as stored in its ledger row (the object `offers.sign` answers).
        var storedJSON: String {
            let object: JSONValue =
                switch self {
                case .v1(let keyId, let nonce, let timestamp, let signature, let offerId, let productId, let token):
                    [
                        "format": "v1", "keyId": .string(keyId), "nonce": .string(nonce),
                        "timestamp": .number(JSONNumber(timestamp)), "signature": .string(signature),
                        "offerId": .string(offerId), "productId": .string(productId),
                        "appAccountToken": .string(token),
                    ]
                case .jws(let jws, let keyId, let nonce, let offerId, let productId):
                    [
                        "format": "jws", "compactJWS": .string(jws), "keyId": .string(keyId), "nonce": .string(nonce),
                        "offerId": .string(offerId), "productId": .string(productId),
                    ]
                }
            return String(decoding: JSONSerializer.serialize(object), as: UTF8.self)
        }

        /// A stored signature; nil when the text is not one.
        init?(storedJSON: String) {
            guard let o = (try? JSONParsing.parse(storedJSON))?.objectValue,
                let keyId = o["keyId"]?.stringValue, let nonce = o["nonce"]?.stringValue,
                let offerId = o["offerId"]?.stringValue, let productId = o["productId"]?.stringValue
            else { return nil }
            switch o["format"]?.stringValue {
            case "v1":
                guard let timestamp = o["timestamp"]?.int64Value, let signature = o["signature"]?.stringValue,
                    let token = o["appAccountToken"]?.stringValue
                else { return nil }
                self = .v1(
                    keyId: keyId, nonce: nonce, timestamp: timestamp, signature: signature, offerId: offerId,
                    productId: productId, appAccountToken: token)
            case "jws":
                guard let jws = o["compactJWS"]?.stringValue else { return nil }
                self = .jws(jws, keyId: keyId, nonce: nonce, offerId: offerId, productId: productId)
            default:
                return nil
            }
        }
    }

    /// The gateway's introductory-offer verdict, signed.
    struct IntroEligibility: Sendable {
        let allow: Bool
        let compactJWS: String
        let productId: String
    }

    func eligibility(_ request: EligibilityRequest, tenant: TenantRecord) async throws -> EligibilityAnswer {
        let customerId = try Validate.customerId(request.customerId)
        let asked = try request.billingPlan.map { try Validate.billingPlan($0) }
        let at = request.at ?? clock()
        let (catalog, history) = try await customers.history(tenant: tenant.id, customerId: customerId, at: at)
        let product = try Self.product(request.productId, in: catalog)
        let plan = asked ?? history.group(product.groupId).billingPlan
        let verdicts = try Self.domain {
            try Eligibility.evaluate(
                productId: product.id, catalog: catalog, history: history, at: at, billingPlan: plan)
        }
        return EligibilityAnswer(productId: product.id, verdicts: verdicts)
    }

    /// The best offer now (or at `at`), remembered per customer, scope and locale while its inputs and the
    /// decision horizon hold (see `DecisionMemo`). An answer with a winner counts as `offered` in the funnel, in
    /// the hour of its decision time (in memory: no write here).
    func best(_ request: BestRequest, tenant: TenantRecord) async throws -> BestOfferAnswer {
        let at = request.at ?? clock()
        if let answer = remembered(request, tenant: tenant.id, at: at, countMiss: true) { return answer }
        let query = try BestQuery(request, tenant: tenant, at: at)
        let inputs = try await caches.inputs(tenant: tenant.id, customerId: query.customerId)
        return counted(try decide(query, try query.scope(in: inputs.0.catalog), inputs), query)
    }

    /// `best`'s answer without a task, or nil (ask `best`). With both inputs in memory: the remembered answer, or nil
    /// when it must be decided (on a task, off the transport's thread). With the catalog in memory but not the
    /// customer (their first question): later, decided on the thread that finished the batched read of their
    /// records, so a first answer costs no task and no thread hop of its own. Bad params throw as in `best`. The
    /// transports call it on their own thread (`Gateway.answerNow`).
    ///
    /// With `onDecisionThread` (stdio: one reader thread serves the whole connection), a decision over inputs in
    /// memory is made on `decisionThread`, later: the reader goes on reading, parsing and answering remembered
    /// questions while another core decides, and no task (two thread hand-offs each) is made per decision. When
    /// that thread already has work waiting, the caller decides at once itself: a run of first questions is then
    /// decided on two threads, not queued behind one.
    func bestNow(_ request: BestRequest, tenant: TenantRecord, onDecisionThread: Bool = false) throws
        -> NowOrLater<BestOfferAnswer>?
    {
        let at = request.at ?? clock()
        if let answer = remembered(request, tenant: tenant.id, at: at, countMiss: false) { return .now(answer) }
        let query = try BestQuery(request, tenant: tenant, at: at)
        guard let catalog = caches.catalogs.cachedSnapshot(tenant.id) else { return nil }
        let scope = try query.scope(in: catalog.catalog)
        if let transactions = caches.customers.cachedSnapshot(tenant.id, query.customerId) {
            // Not remembered (looked up above): decided on the decision thread, or on a task (`best`, which counts
            // the miss).
            guard onDecisionThread else { return nil }
            caches.recordInputsHit()
            guard decisionThread.backlog < Self.decisionThreadBacklog else {
                caches.decisions.recordMiss()
                return .now(counted(try decide(query, scope, (catalog, transactions)), query))
            }
            // `answer` counts the miss (or the hit, when a concurrent request's answer was remembered meanwhile).
            return .later { [decisionThread] reply in
                decisionThread.submit { reply(Result { try answer(query, scope, (catalog, transactions)) }) }
            }
        }
        caches.catalogs.recordHit()
        return .later { reply in
            caches.customers.snapshot(tenant.id, query.customerId) { loaded in
                reply(Result { try answer(query, scope, (catalog, try loaded.get())) })
            }
        }
    }

    /// Decisions waiting for (or running on) the decision thread beyond which `bestNow`'s caller decides itself.
    static var decisionThreadBacklog: Int { 2 }

    /// One `offers.best` question, its params checked.
    private struct BestQuery: Sendable {
        let tenant: UUID
        let customerId: String
        let productId: String?
        let groupId: String?
        let locale: Locale
        let billingPlan: BillingPlan?
        let at: Date
        /// The question as asked, under which its answer is remembered.
        let memoKey: DecisionMemo.Key

        init(_ request: BestRequest, tenant: TenantRecord, at: Date) throws {
            self.tenant = tenant.id
            customerId = try Validate.customerId(request.customerId)
            productId = request.productId
            groupId = request.groupId
            locale = try Validate.locale(request.locale)
            billingPlan = try request.billingPlan.map { try Validate.billingPlan($0) }
            self.at = at
            memoKey = request.memoKey(tenant: tenant.id)
        }

        /// The product or group asked about, in this catalog (an unknown one, or neither or both given, throws).
        func scope(in catalog: Catalog) throws -> BestOffer.Scope {
            try OfferService.scope(productId: productId, groupId: groupId, in: catalog)
        }
    }

    /// The answer remembered for this question as asked, if its inputs are still current and it still holds at
    /// `at`; counted in the funnel (and its inputs as cache hits: they are what the caches hold). No param is
    /// checked: a remembered answer's params passed every check (`DecisionMemo.Key`).
    private func remembered(_ request: BestRequest, tenant: UUID, at: Date, countMiss: Bool) -> BestOfferAnswer? {
        guard let answer = caches.decisions.answer(request.memoKey(tenant: tenant), at: at, countMiss: countMiss)
        else { return nil }
        caches.recordInputsHit()
        return counted(answer, tenant: tenant, at: at)
    }

    /// The remembered answer (one made meanwhile by a concurrent request), else a new decision over these inputs
    /// (remembered), counted in the funnel.
    private func answer(
        _ query: BestQuery, _ scope: BestOffer.Scope, _ inputs: (CatalogSnapshot, TransactionsSnapshot)
    ) throws -> BestOfferAnswer {
        counted(try caches.decisions.answer(query.memoKey, at: query.at) ?? decide(query, scope, inputs), query)
    }

    /// Decides and remembers.
    private func decide(
        _ query: BestQuery, _ scope: BestOffer.Scope, _ inputs: (CatalogSnapshot, TransactionsSnapshot)
    ) throws -> BestOfferAnswer {
        let (catalogSnapshot, transactions) = inputs
        let catalog = catalogSnapshot.catalog
        let derived = CustomerService.history(
            catalog: catalogSnapshot, transactions: transactions, at: query.at, remembered: caches.decisions.isEnabled)
        let history = derived.history
        // The key holds the plan asked for: a plan from Apple's data is a function of the transactions snapshot
        // (its latest renewal info, whatever `at`), which a remembered answer is tied to by identity.
        let plan = query.billingPlan ?? Self.groupId(of: scope, in: catalog).flatMap { history.group($0).billingPlan }
        let result = try Self.domain {
            try BestOffer.choose(
                scope: scope, ranked: catalogSnapshot.ranked, history: history, at: query.at, billingPlan: plan)
        }
        let answer = caches.decisions.shared(
            BestOfferAnswer(
                result,
                displayText: result.winner.map {
                    caches.displayTexts.text(offer: $0.offer, product: $0.product, locale: query.locale)
                }))
        caches.decisions.remember(
            query.memoKey, answer, catalog: catalogSnapshot, transactions: transactions, madeAt: query.at,
            until: derived.until)
        return answer
    }

    /// An answer with a winner counts as `offered` in the funnel.
    private func counted(_ answer: BestOfferAnswer, _ query: BestQuery) -> BestOfferAnswer {
        counted(answer, tenant: query.tenant, at: query.at)
    }

    private func counted(_ answer: BestOfferAnswer, tenant: UUID, at: Date) -> BestOfferAnswer {
        if let offerId = answer.winnerOfferId {
            offered.count(tenant: tenant, offerId: offerId, at: at)
        }
        return answer
    }

    /// A promotional offer signed for a customer who may have it (or who holds a live redemption granting it),
    /// answered once its ledger row is committed.
    func sign(_ request: SignRequest, tenant: TenantRecord) async throws -> SignedOffer {
        let query = try SignQuery(request, at: clock())
        let (catalog, history) = try await customers.history(
            tenant: tenant.id, customerId: query.customerId, at: query.at)
        let (product, offer) = try Self.promotional(query, in: catalog, history: history)
        if let redemptionId = query.redemptionId {
            try await requireLiveRedemption(
                redemptionId, tenant: tenant, customerId: query.customerId, offerId: offer.id)
            try Self.require(Eligibility.evaluateGranted(offer: offer, at: query.at), offer)
        } else {
            try Self.require(
                Eligibility.evaluate(offer: offer, history: history.group(product.groupId), at: query.at), offer)
        }
        let made = try signature(
            query, product: product, offer: offer, tenant: tenant, signer: try await activeSigner(tenant))
        try await ledger.record(tenant: tenant.id, made.row)
        signed.increment([query.format.rawValue])
        return made.offer
    }

    /// `offers.sign` without a task, when the tenant's catalog and signer are in memory and no redemption is named
    /// (its check reads the database): the customer's records from memory (or the batched read that loads them),
    /// the eligibility and the signature on the thread that has them, the answer from the thread that commits the
    /// ledger row. The same checks and answers as `sign`; nil when it cannot (then `sign` answers).
    func signNow(_ request: SignRequest, tenant: TenantRecord) throws -> NowOrLater<SignedOffer>? {
        let query = try SignQuery(request, at: clock())
        guard query.redemptionId == nil, let catalog = caches.catalogs.cachedSnapshot(tenant.id),
            let signer = caches.signers.cachedSigner(tenant.id)
        else { return nil }
        let make: @Sendable (TransactionsSnapshot) throws -> Signature = { transactions in
            let history = CustomerService.history(
                catalog: catalog, transactions: transactions, at: query.at, remembered: caches.decisions.isEnabled
            ).history
            let (product, offer) = try Self.promotional(query, in: catalog.catalog, history: history)
            try Self.require(
                Eligibility.evaluate(offer: offer, history: history.group(product.groupId), at: query.at), offer)
            return try signature(query, product: product, offer: offer, tenant: tenant, signer: signer)
        }
        let (ledger, signed) = (ledger, signed)
        let recorded: @Sendable (Signature, @escaping @Sendable (Result<SignedOffer, any Error>) -> Void) -> Void = {
            made, reply in
            ledger.submit(.signature(LedgerRow(tenant: tenant.id, signature: made.row))) { result in
                if case .success = result { signed.increment([query.format.rawValue]) }
                reply(result.map { made.offer })
            }
        }
        if let transactions = caches.customers.cachedSnapshot(tenant.id, query.customerId) {
            caches.recordInputsHit()
            let made = try make(transactions)
            return .later { reply in recorded(made, reply) }
        }
        caches.catalogs.recordHit()
        return .later { reply in
            caches.customers.snapshot(tenant.id, query.customerId) { loaded in
                do { recorded(try make(try loaded.get()), reply) } catch { reply(.failure(error)) }
            }
        }
    }

    /// One `offers.sign` request, its params checked.
    private struct SignQuery: Sendable {
        let customerId: String
        let productId: String
        let offerId: String
        let format: IssuedSignature.Format
        let appAccountToken: String?
        let transactionId: String?
        let billingPlan: BillingPlan?
        let redemptionId: UUID?
        let at: Date

        init(_ request: SignRequest, at: Date) throws {
            customerId = try Validate.customerId(request.customerId)
            productId = request.productId
            offerId = request.offerId
            format = try OfferService.format(request.format, param: "params.format")
            appAccountToken = try request.appAccountToken.map { try Validate.uuid($0, param: "params.appAccountToken") }
            transactionId = try request.transactionId.map {
                try Validate.identifier($0, param: "params.transactionId", maxBytes: 100)
            }
            billingPlan = try request.billingPlan.map { try Validate.billingPlan($0) }
            redemptionId = try request.redemptionId.map { try OfferService.redemptionId($0) }
            self.at = at
        }
    }

    /// A signature made and its ledger row (not yet recorded).
    private struct Signature: Sendable {
        let offer: SignedOffer
        let row: IssuedSignature
    }

    /// The product and the promotional offer asked for, when the offer may be signed for this customer's billing
    /// plan (eligibility aside).
    private static func promotional(_ query: SignQuery, in catalog: Catalog, history: CustomerHistory) throws
        -> (Product, Offer)
    {
        let product = try Self.product(query.productId, in: catalog)
        let plan = query.billingPlan ?? history.group(product.groupId).billingPlan
        // The product names the offer together with its id (one id may sit on several products).
        let offer = try CatalogService.offer(query.offerId, product: product.id, in: catalog)
        guard offer.type == .promotional else {
            throw GatewayError.notEligible(
                "only promotional offers are signed; '\(offer.id)' is \(offer.type.rawValue)",
                reasons: ["not_promotional"])
        }
        guard offer.applies(to: plan) else {
            throw GatewayError.notEligible(
                "offer '\(offer.id)' is for the \(offer.billingPlan?.rawValue ?? "") billing plan, not \(plan?.rawValue ?? "")",
                reasons: ["billing_plan_mismatch"])
        }
        return (product, offer)
    }

    private static func require(_ verdict: EligibilityVerdict, _ offer: Offer) throws {
        guard verdict.eligible else {
            throw GatewayError.notEligible(
                "the customer is not eligible for offer '\(offer.id)'", reasons: verdict.reasons.map(\.rawValue))
        }
    }

    /// A redemption's signature (`codes.redeem` with `sign`): the one made for it in `format` while it is valid
    /// (an idempotent replay answers the same), else a new one through `sign` with the redemption as eligibility.
    func sign(
        redemption receipt: RedemptionReceipt, format: IssuedSignature.Format, customerId: String, token: String?,
        transactionId: String?, tenant: TenantRecord
    ) async throws -> SignedOffer {
        if receipt.replayed, let id = UUID(uuidString: receipt.redemptionId),
            let stored = try await signatures.signedOffer(
                tenant: tenant.id, redemptionId: id, format: format, since: clock() - SignedOffer.validity),
            let signed = SignedOffer(storedJSON: stored)
        {
            return signed
        }
        return try await sign(
            SignRequest(
                customerId: customerId, productId: receipt.productId, offerId: receipt.offerId,
                format: format.rawValue, appAccountToken: token, transactionId: transactionId, billingPlan: nil,
                redemptionId: receipt.redemptionId),
            tenant: tenant)
    }

    /// Fails unless a signature can be made now in `format` (an active key; for a JWS, one with an issuer id): so
    /// `codes.redeem` with `sign` refuses before it redeems.
    func requireSigner(_ format: IssuedSignature.Format, tenant: TenantRecord) async throws {
        let signer = try await activeSigner(tenant)
        if format == .jws && signer.issuerId == nil { throw Self.missingIssuer(signer.keyId) }
    }

    /// `v1` or `jws`.
    static func format(_ text: String, param: String) throws -> IssuedSignature.Format {
        guard text == "v1" || text == "jws", let format = IssuedSignature.Format(rawValue: text) else {
            throw GatewayError.invalidParams(
                param: param, message: "\(param.split(separator: ".").last ?? "") must be v1 or jws")
        }
        return format
    }

    private static func redemptionId(_ text: String) throws -> UUID {
        guard let id = UUID(uuidString: try Validate.uuid(text, param: "params.redemptionId")) else {
            throw GatewayError.invalidParams(param: "params.redemptionId", message: "redemptionId must be a UUID")
        }
        return id
    }

    /// A live redemption by this customer of a campaign granting this offer, else -32004 (unknown) or -32020.
    private func requireLiveRedemption(_ id: UUID, tenant: TenantRecord, customerId: String, offerId: String)
        async throws
    {
        guard let redemption = try await campaigns.redemption(tenant: tenant.id, id: id) else {
            throw GatewayError.notFound(
                "no redemption '\(id.uuidString.lowercased())'", reason: "unknown_redemption")
        }
        guard redemption.live else {
            throw GatewayError.notEligible("the redemption was rolled back", reasons: ["redemption_rolled_back"])
        }
        guard redemption.customerId == customerId, redemption.offerId == offerId else {
            throw GatewayError.notEligible(
                "the redemption is not this customer's redemption of offer '\(offerId)'",
                reasons: ["redemption_not_for_offer"])
        }
    }

    /// Signs (CPU only) and builds the ledger row, naming the redemption and keeping the answer for its replays.
    private func signature(
        _ query: SignQuery, product: Product, offer: Offer, tenant: TenantRecord, signer: ActiveSigner
    ) throws -> Signature {
        let nonce = nonce()
        let signed: SignedOffer
        let appAccountToken: String?
        let (productId, offerId, at) = (product.id, offer.id, query.at)
        if query.format == .v1 {
            // The V1 payload carries the app account token the app will pass at purchase: the one given, else the
            // customer id when it is a UUID (the recommended customer id), else empty.
            let v1Token =
                (query.appAccountToken ?? (CustomerID.isUUIDShaped(query.customerId) ? query.customerId : ""))
                .lowercased()
            let signature = try signer.offerSigner(bundleId: tenant.bundleId).signV1(
                productId: productId, offerId: offerId, appAccountToken: v1Token, nonce: nonce,
                timestamp: Int64((at.timeIntervalSince1970 * 1000).rounded(.down)))
            signed = .v1(
                keyId: signer.keyId, nonce: signature.nonceString, timestamp: signature.timestamp,
                signature: signature.signature, offerId: offerId, productId: productId, appAccountToken: v1Token)
            appAccountToken = v1Token
        } else {
            guard signer.issuerId != nil else { throw Self.missingIssuer(signer.keyId) }
            let jws = try signer.offerSigner(bundleId: tenant.bundleId).promotionalOfferJWS(
                productId: productId, offerId: offerId, transactionId: query.transactionId, nonce: nonce, issuedAt: at)
            signed = .jws(
                jws, keyId: signer.keyId, nonce: nonce.lowercasedString, offerId: offerId, productId: productId)
            appAccountToken = query.appAccountToken
        }
        let row = IssuedSignature(
            nonce: nonce, format: query.format, keyId: signer.keyId, customerId: query.customerId,
            productId: productId, offerId: offerId, appAccountToken: appAccountToken,
            transactionId: query.transactionId, issuedAt: at, redemptionId: query.redemptionId,
            signedOffer: query.redemptionId == nil ? nil : signed.storedJSON)
        return Signature(offer: signed, row: row)
    }

    /// Allowed when the product has an introductory offer this customer is eligible for right now.
    func introEligibility(_ request: IntroRequest, tenant: TenantRecord) async throws -> IntroEligibility {
        let customerId = try Validate.customerId(request.customerId)
        let transactionId = try Validate.identifier(
            request.transactionId, param: "params.transactionId", maxBytes: 100)
        let at = clock()
        let (catalog, history) = try await customers.history(tenant: tenant.id, customerId: customerId, at: at)
        let product = try Self.product(request.productId, in: catalog)
        let groupHistory = history.group(product.groupId)
        let allow = catalog.offers(forProduct: product.id).contains { offer in
            offer.type == .introductory && Eligibility.evaluate(offer: offer, history: groupHistory, at: at).eligible
        }
        let signer = try await activeSigner(tenant)
        guard signer.issuerId != nil else { throw Self.missingIssuer(signer.keyId) }
        let nonce = nonce()
        let jws = try signer.offerSigner(bundleId: tenant.bundleId).introductoryOfferEligibilityJWS(
            productId: product.id, allowIntroductoryOffer: allow, transactionId: transactionId, nonce: nonce,
            issuedAt: at)
        try await record(
            tenant, .introEligibility, signer: signer, nonce: nonce, customerId: customerId, productId: product.id,
            offerId: nil, appAccountToken: nil, transactionId: transactionId, at: at)
        return IntroEligibility(allow: allow, compactJWS: jws, productId: product.id)
    }

    private func activeSigner(_ tenant: TenantRecord) async throws -> ActiveSigner {
        guard let signer = try await caches.signers.signer(tenant.id) else { throw GatewayError.noActiveSigningKey }
        return signer
    }

    /// Writes the ledger row; returns once it is committed, so no signature leaves the gateway unrecorded.
    private func record(
        _ tenant: TenantRecord, _ format: IssuedSignature.Format, signer: ActiveSigner, nonce: UUID,
        customerId: String, productId: String, offerId: String?, appAccountToken: String?, transactionId: String?,
        at: Date
    ) async throws {
        try await ledger.record(
            tenant: tenant.id,
            IssuedSignature(
                nonce: nonce, format: format, keyId: signer.keyId, customerId: customerId, productId: productId,
                offerId: offerId, appAccountToken: appAccountToken, transactionId: transactionId, issuedAt: at))
        signed.increment([format.rawValue])
    }

    /// One product, or one group, of the catalog: exactly one of the two must be given.
    private static func scope(productId: String?, groupId: String?, in catalog: Catalog) throws -> BestOffer.Scope {
        switch (productId, groupId) {
        case (let productId?, nil):
            return .product(try product(productId, in: catalog).id)
        case (nil, let groupId?):
            guard catalog.group(groupId) != nil else {
                throw GatewayError.notFound("no group '\(Validate.printable(groupId))'", reason: "unknown_group")
            }
            return .group(groupId)
        default:
            throw GatewayError.invalidParams(
                param: "params.productId", message: "give exactly one of productId or groupId",
                reason: "missing_param")
        }
    }

    /// The group a best-offer scope lies in.
    private static func groupId(of scope: BestOffer.Scope, in catalog: Catalog) -> String? {
        switch scope {
        case .product(let id): catalog.groupId(ofProduct: id)
        case .group(let id): id
        }
    }

    static func product(_ id: String, in catalog: Catalog) throws -> Product {
        guard let product = catalog.product(id) else {
            throw GatewayError.notFound("no product '\(Validate.printable(id))'", reason: "unknown_product")
        }
        return product
    }

    private static func missingIssuer(_ keyId: String) -> GatewayError {
        .signingKeyUnusable(
            "signing key '\(keyId)' has no issuerId, which a JWS needs: import the key again with issuerId",
            reason: "issuer_id_missing")
    }

    /// Runs a domain call whose failures are the client's (an unknown product or group: the product by default).
    private static func domain<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as OfferDomainError {
            throw GatewayError(error, paramPrefix: "params", defaultField: "productId")
        }
    }
}

/// An `offers.best` decision with its copy. A reference, remembered by `DecisionMemo` and shared by every request
/// it answers; it keeps the encoded form made by the first adapter that sent it (`rendered`), so a remembered answer
/// costs no encoding again.
final class BestOfferAnswer: Sendable {
    let result: BestOfferResult
    /// The winner's display copy (nil without a winner).
    let displayText: String?
    /// The winner's offer id, counted in the funnel on every answer: read here, not by copying the winner out of
    /// the result each time (a dozen retains).
    let winnerOfferId: String?
    /// The encoded form, once made. In the answer's own object: a remembered answer reads it on every request.
    private let encoded = Mutex<JSONValue?>(nil)

    init(_ result: BestOfferResult, displayText: String?) {
        self.result = result
        self.displayText = displayText
        self.winnerOfferId = result.winner?.offer.id
    }

    /// The encoded form: made by `make` on first use, the same value after.
    func rendered(_ make: () -> JSONValue) -> JSONValue {
        if let known = encoded.withLock({ $0 }) { return known }
        let made = make()
        encoded.withLock { $0 = made }
        return made
    }
}

extension OfferService.BestRequest: PlainStringParams {
    /// Without `at` too: a request with `at` is read by `Decodable`.
    init?(plainParams params: JSONValue?) {
        var customerId: String?
        var productId: String?
        var groupId: String?
        var locale: String?
        var billingPlan: String?
        let plain = Self.readStrings(params) { name, text in
            switch name {
            case "customerId": customerId = text
            case "productId": productId = text
            case "groupId": groupId = text
            case "locale": locale = text
            case "billingPlan": billingPlan = text
            case "at": return false
            default: return true
            }
            return text != nil
        }
        guard plain, let customerId else { return nil }
        self.init(
            customerId: customerId, productId: productId, groupId: groupId, at: nil, locale: locale,
            billingPlan: billingPlan)
    }

    /// The question as asked, under which its answer is remembered (`DecisionMemo.Key`).
    func memoKey(tenant: UUID) -> DecisionMemo.Key {
        DecisionMemo.Key(
            tenant: tenant, customerId: customerId, productId: productId, groupId: groupId, locale: locale,
            billingPlan: billingPlan)
    }
}

extension OfferService.SignRequest: PlainStringParams {
    init?(plainParams params: JSONValue?) {
        var customerId: String?
        var productId: String?
        var offerId: String?
        var format: String?
        var appAccountToken: String?
        var transactionId: String?
        var billingPlan: String?
        var redemptionId: String?
        let plain = Self.readStrings(params) { name, text in
            switch name {
            case "customerId": customerId = text
            case "productId": productId = text
            case "offerId": offerId = text
            case "format": format = text
            case "appAccountToken": appAccountToken = text
            case "transactionId": transactionId = text
            case "billingPlan": billingPlan = text
            case "redemptionId": redemptionId = text
            default: return true
            }
            return text != nil
        }
        guard plain, let customerId, let productId, let offerId, let format else { return nil }
        self.init(
            customerId: customerId, productId: productId, offerId: offerId, format: format,
            appAccountToken: appAccountToken, transactionId: transactionId, billingPlan: billingPlan,
            redemptionId: redemptionId)
    }
}
