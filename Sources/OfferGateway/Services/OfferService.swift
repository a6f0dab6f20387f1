import Foundation
import JSONRPC
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
    /// The funnel's `offered` counts (in memory, flushed by `GatewayService`).
    let offered: OfferedCounter
    let clock: @Sendable () -> Date
    let nonce: @Sendable () -> UUID

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
    enum SignedOffer: Sendable {
        case v1(V1Signature, keyId: String, offerId: String, productId: String, appAccountToken: String)
        case jws(String, keyId: String, nonce: UUID, offerId: String, productId: String)
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
        let answer = try await best(request, tenant: tenant, at: at)
        if let winner = answer.result.winner { offered.count(tenant: tenant.id, offerId: winner.offer.id, at: at) }
        return answer
    }

    private func best(_ request: BestRequest, tenant: TenantRecord, at: Date) async throws -> BestOfferAnswer {
        let customerId = try Validate.customerId(request.customerId)
        let locale = try Validate.locale(request.locale)
        let asked = try request.billingPlan.map { try Validate.billingPlan($0) }
        let (catalogSnapshot, transactions) = try await caches.inputs(tenant: tenant.id, customerId: customerId)
        let catalog = catalogSnapshot.catalog
        let scope = try Self.scope(productId: request.productId, groupId: request.groupId, in: catalog)
        let memoKey = DecisionMemo.Key(
            tenant: tenant.id, customerId: customerId, scope: scope, locale: locale.identifier, billingPlan: asked)
        if let known = caches.decisions.answer(memoKey, catalog: catalogSnapshot, transactions: transactions, at: at) {
            return known
        }
        let history = CustomerService.history(catalog: catalogSnapshot, transactions: transactions, at: at)
        // The key holds the plan asked for: a plan from Apple's data is a function of the transactions snapshot
        // (its latest renewal info, whatever `at`), which a remembered answer is tied to by identity.
        let plan = asked ?? Self.groupId(of: scope, in: catalog).flatMap { history.group($0).billingPlan }
        let result = try Self.domain {
            try BestOffer.choose(
                scope: scope, ranked: catalogSnapshot.ranked, history: history, at: at, billingPlan: plan)
        }
        let answer = BestOfferAnswer(
            result,
            displayText: result.winner.map {
                caches.displayTexts.text(offer: $0.offer, product: $0.product, locale: locale)
            })
        caches.decisions.remember(memoKey, answer, catalog: catalogSnapshot, transactions: transactions, madeAt: at)
        return answer
    }

    func sign(_ request: SignRequest, tenant: TenantRecord) async throws -> SignedOffer {
        let customerId = try Validate.customerId(request.customerId)
        guard request.format == "v1" || request.format == "jws" else {
            throw GatewayError.invalidParams(param: "params.format", message: "format must be v1 or jws")
        }
        let token = try request.appAccountToken.map { try Validate.uuid($0, param: "params.appAccountToken") }
        let transactionId = try request.transactionId.map {
            try Validate.identifier($0, param: "params.transactionId", maxBytes: 100)
        }
        let asked = try request.billingPlan.map { try Validate.billingPlan($0) }
        let at = clock()
        let (catalog, history) = try await customers.history(tenant: tenant.id, customerId: customerId, at: at)
        let product = try Self.product(request.productId, in: catalog)
        let plan = asked ?? history.group(product.groupId).billingPlan
        guard let offer = catalog.offer(request.offerId), offer.productId == product.id else {
            throw GatewayError.notFound(
                "no offer '\(Validate.printable(request.offerId))' for product '\(Validate.printable(product.id))'",
                reason: "unknown_offer")
        }
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
        let verdict = Eligibility.evaluate(offer: offer, history: history.group(product.groupId), at: at)
        guard verdict.eligible else {
            throw GatewayError.notEligible(
                "the customer is not eligible for offer '\(offer.id)'", reasons: verdict.reasons.map(\.rawValue))
        }
        let signer = try await activeSigner(tenant)
        let nonce = nonce()
        if request.format == "v1" {
            // The V1 payload carries the app account token the app will pass at purchase: the one given, else the
            // customer id when it is a UUID (the recommended customer id), else empty.
            let appAccountToken = (token ?? (CustomerID.isUUIDShaped(customerId) ? customerId : "")).lowercased()
            let signature = try signer.offerSigner(bundleId: tenant.bundleId).signV1(
                productId: product.id, offerId: offer.id, appAccountToken: appAccountToken, nonce: nonce,
                timestamp: Int64((at.timeIntervalSince1970 * 1000).rounded(.down)))
            try await record(
                tenant, .v1, signer: signer, nonce: nonce, customerId: customerId, productId: product.id,
                offerId: offer.id, appAccountToken: appAccountToken, transactionId: transactionId, at: at)
            return .v1(
                signature, keyId: signer.keyId, offerId: offer.id, productId: product.id,
                appAccountToken: appAccountToken)
        }
        guard signer.issuerId != nil else { throw Self.missingIssuer(signer.keyId) }
        let jws = try signer.offerSigner(bundleId: tenant.bundleId).promotionalOfferJWS(
            productId: product.id, offerId: offer.id, transactionId: transactionId, nonce: nonce, issuedAt: at)
        try await record(
            tenant, .jws, signer: signer, nonce: nonce, customerId: customerId, productId: product.id,
            offerId: offer.id, appAccountToken: token, transactionId: transactionId, at: at)
        return .jws(jws, keyId: signer.keyId, nonce: nonce, offerId: offer.id, productId: product.id)
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
/// it answers; `rendered` keeps the encoded form made by the first adapter that sent it, so a remembered answer
/// costs no encoding again.
final class BestOfferAnswer: Sendable {
    let result: BestOfferResult
    /// The winner's display copy (nil without a winner).
    let displayText: String?
    let rendered = Rendered()

    init(_ result: BestOfferResult, displayText: String?) {
        self.result = result
        self.displayText = displayText
    }
}

/// A value's encoded form, made once on first use.
final class Rendered: Sendable {
    private let value = Mutex<JSONValue?>(nil)

    func value(_ make: () -> JSONValue) -> JSONValue {
        if let known = value.withLock({ $0 }) { return known }
        let made = make()
        value.withLock { $0 = made }
        return made
    }
}
