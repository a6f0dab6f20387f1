import Foundation
import JSONRPC
import OfferCrypto
import OfferDomain
import OfferStore

/// `offers.*`: eligibility, the best offer with its copy, and signatures for StoreKit.
enum OfferMethods {
    struct EligibilityParams: Decodable {
        let customerId: String
        let productId: String
        let at: Date?
    }
    struct BestParams: Decodable {
        let customerId: String
        let productId: String?
        let groupId: String?
        let at: Date?
        let locale: String?
    }
    struct SignParams: Decodable {
        let customerId: String
        let productId: String
        let offerId: String
        let format: String
        let appAccountToken: String?
        let transactionId: String?
    }
    struct IntroParams: Decodable {
        let customerId: String
        let productId: String
        let transactionId: String
    }

    static let all: [MethodSpec] = [
        MethodSpec(name: "offers.eligibility", access: .tenant) { ctx in
            let params = try ctx.params(EligibilityParams.self)
            let tenant = try await ctx.tenant()
            let customerId = try Validate.customerId(params.customerId)
            let at = params.at ?? ctx.gateway.now()
            let (catalog, history) = try await CustomerMethods.loadHistory(
                ctx, tenant: tenant, customerId: customerId, at: at)
            let product = try product(params.productId, in: catalog)
            let verdicts = try domain { try Eligibility.evaluate(productId: product.id, catalog: catalog, history: history, at: at) }
            return [
                "productId": .string(product.id),
                "offers": .array(
                    verdicts.map { verdict in
                        [
                            "offerId": .string(verdict.offerId), "type": .string(verdict.type.rawValue),
                            "eligible": .bool(verdict.eligible),
                            "reasons": .array(verdict.reasons.map { .string($0.rawValue) }),
                        ]
                    }),
            ]
        },
        MethodSpec(name: "offers.best", access: .tenant) { ctx in
            let params = try ctx.params(BestParams.self)
            let tenant = try await ctx.tenant()
            let customerId = try Validate.customerId(params.customerId)
            let locale = try Validate.locale(params.locale)
            let gateway = ctx.gateway
            let at = params.at ?? gateway.now()
            let (catalogSnapshot, transactions) = try await CustomerMethods.loadInputs(
                ctx, tenant: tenant, customerId: customerId)
            let catalog = catalogSnapshot.catalog
            let scope: BestOffer.Scope
            switch (params.productId, params.groupId) {
            case (let productId?, nil):
                scope = .product(try product(productId, in: catalog).id)
            case (nil, let groupId?):
                guard catalog.group(groupId) != nil else {
                    throw GatewayError.notFound("no group '\(TenantDirectory.printable(groupId))'", reason: "unknown_group")
                }
                scope = .group(groupId)
            default:
                throw GatewayError.invalidParams(
                    param: "params.productId", message: "give exactly one of productId or groupId",
                    reason: "missing_param")
            }
            let memoKey = DecisionMemo.Key(
                tenant: tenant.id, customerId: customerId, scope: scope, locale: locale.identifier)
            if let known = gateway.decisions.answer(
                memoKey, catalog: catalogSnapshot, transactions: transactions, at: at)
            {
                return known
            }
            let history = CustomerHistory.derive(transactions: transactions.transactions, catalog: catalog, at: at)
            let result = try domain {
                try BestOffer.choose(scope: scope, ranked: catalogSnapshot.ranked, history: history, at: at)
            }
            var offer: JSONValue = .null
            if let winner = result.winner {
                var object: JSONObject = [
                    "offerId": .string(winner.offer.id), "type": .string(winner.offer.type.rawValue),
                    "productId": .string(winner.product.id), "paymentMode": .string(winner.offer.paymentMode.rawValue),
                    "period": .string(winner.offer.period.iso8601), "periodCount": .int(winner.offer.periodCount),
                    "displayText": .string(
                        gateway.displayTexts.text(offer: winner.offer, product: winner.product, locale: locale)),
                ]
                if let price = winner.offer.price {
                    object["price"] = .string(price.decimalString)
                    object["currency"] = .string(price.currency)
                }
                offer = .object(object)
            }
            let answer: JSONValue = [
                "offer": offer,
                "considered": .array(
                    result.considered.map { candidate in
                        [
                            "offerId": .string(candidate.offer.id), "type": .string(candidate.offer.type.rawValue),
                            "productId": .string(candidate.product.id), "eligible": .bool(candidate.verdict.eligible),
                            "reasons": .array(candidate.verdict.reasons.map { .string($0.rawValue) }),
                            "rank": candidate.rank.map { .int($0) } ?? .null,
                        ]
                    }),
            ]
            // Serialized once: remembered in a fraction of the memory, and sent as is every time it is asked again.
            let response = JSONValue.encoded(EncodedJSON(answer))
            gateway.decisions.remember(
                memoKey, response, catalog: catalogSnapshot, transactions: transactions, madeAt: at)
            return response
        },
        MethodSpec(name: "offers.sign", access: .tenant) { ctx in
            let params = try ctx.params(SignParams.self)
            let tenant = try await ctx.tenant()
            let customerId = try Validate.customerId(params.customerId)
            guard params.format == "v1" || params.format == "jws" else {
                throw GatewayError.invalidParams(param: "params.format", message: "format must be v1 or jws")
            }
            let token = try params.appAccountToken.map { try Validate.uuid($0, param: "params.appAccountToken") }
            let transactionId = try params.transactionId.map {
                try Validate.identifier($0, param: "params.transactionId", maxBytes: 100)
            }
            let gateway = ctx.gateway
            let at = gateway.now()
            let (catalog, history) = try await CustomerMethods.loadHistory(
                ctx, tenant: tenant, customerId: customerId, at: at)
            let product = try product(params.productId, in: catalog)
            guard let offer = catalog.offer(params.offerId), offer.productId == product.id else {
                throw GatewayError.notFound(
                    "no offer '\(TenantDirectory.printable(params.offerId))' for product '\(TenantDirectory.printable(product.id))'",
                    reason: "unknown_offer")
            }
            guard offer.type == .promotional else {
                throw GatewayError.notEligible(
                    "only promotional offers are signed; '\(offer.id)' is \(offer.type.rawValue)",
                    reasons: ["not_promotional"])
            }
            let verdict = Eligibility.evaluate(offer: offer, history: history.group(product.groupId), at: at)
            guard verdict.eligible else {
                throw GatewayError.notEligible(
                    "the customer is not eligible for offer '\(offer.id)'", reasons: verdict.reasons.map(\.rawValue))
            }
            guard let signer = try await gateway.signers.signer(tenant.id) else { throw GatewayError.noActiveSigningKey }
            let nonce = gateway.options.nonce()
            // The V1 payload carries the app account token the app will pass at purchase: the one given, else the
            // customer id when it is a UUID (the recommended customer id), else empty.
            let appAccountToken = token ?? (CustomerID.isUUIDShaped(customerId) ? customerId : "")
            let offerSigner = OfferSigner(
                key: signer.key, keyId: signer.keyId, issuerId: signer.issuerId ?? "", bundleId: tenant.bundleId)
            let result: JSONValue
            let format: IssuedSignature.Format
            if params.format == "v1" {
                let timestamp = Int64((at.timeIntervalSince1970 * 1000).rounded(.down))
                let signature = try offerSigner.signV1(
                    productId: product.id, offerId: offer.id, appAccountToken: appAccountToken, nonce: nonce,
                    timestamp: timestamp)
                format = .v1
                result = [
                    "format": "v1", "keyId": .string(signer.keyId), "nonce": .string(signature.nonceString),
                    "timestamp": .number(JSONNumber(signature.timestamp)), "signature": .string(signature.signature),
                    "offerId": .string(offer.id), "productId": .string(product.id),
                    "appAccountToken": .string(appAccountToken.lowercased()),
                ]
            } else {
                guard signer.issuerId != nil else { throw missingIssuer(signer.keyId) }
                let jws = try offerSigner.promotionalOfferJWS(
                    productId: product.id, offerId: offer.id, transactionId: transactionId, nonce: nonce, issuedAt: at)
                format = .jws
                result = [
                    "format": "jws", "compactJWS": .string(jws), "offerId": .string(offer.id),
                    "productId": .string(product.id), "keyId": .string(signer.keyId), "nonce": .string(nonce.lowercasedString),
                ]
            }
            try await gateway.ledger.record(
                tenant: tenant.id,
                IssuedSignature(
                    nonce: nonce, format: format, keyId: signer.keyId, customerId: customerId, productId: product.id,
                    offerId: offer.id, appAccountToken: format == .v1 ? appAccountToken.lowercased() : token,
                    transactionId: transactionId, issuedAt: at))
            return result
        },
        MethodSpec(name: "offers.introEligibility", access: .tenant) { ctx in
            let params = try ctx.params(IntroParams.self)
            let tenant = try await ctx.tenant()
            let customerId = try Validate.customerId(params.customerId)
            let transactionId = try Validate.identifier(params.transactionId, param: "params.transactionId", maxBytes: 100)
            let gateway = ctx.gateway
            let at = gateway.now()
            let (catalog, history) = try await CustomerMethods.loadHistory(
                ctx, tenant: tenant, customerId: customerId, at: at)
            let product = try product(params.productId, in: catalog)
            // Allowed when the product has an introductory offer this customer is eligible for right now.
            let groupHistory = history.group(product.groupId)
            let allow = catalog.offers(forProduct: product.id).contains { offer in
                offer.type == .introductory && Eligibility.evaluate(offer: offer, history: groupHistory, at: at).eligible
            }
            guard let signer = try await gateway.signers.signer(tenant.id) else { throw GatewayError.noActiveSigningKey }
            guard let issuerId = signer.issuerId else { throw missingIssuer(signer.keyId) }
            let nonce = gateway.options.nonce()
            let jws = try OfferSigner(key: signer.key, keyId: signer.keyId, issuerId: issuerId, bundleId: tenant.bundleId)
                .introductoryOfferEligibilityJWS(
                    productId: product.id, allowIntroductoryOffer: allow, transactionId: transactionId, nonce: nonce,
                    issuedAt: at)
            try await gateway.ledger.record(
                tenant: tenant.id,
                IssuedSignature(
                    nonce: nonce, format: .introEligibility, keyId: signer.keyId, customerId: customerId,
                    productId: product.id, offerId: nil, appAccountToken: nil, transactionId: transactionId,
                    issuedAt: at))
            return ["allowIntroductoryOffer": .bool(allow), "compactJWS": .string(jws), "productId": .string(product.id)]
        },
    ]

    static func product(_ id: String, in catalog: Catalog) throws -> Product {
        guard let product = catalog.product(id) else {
            throw GatewayError.notFound("no product '\(TenantDirectory.printable(id))'", reason: "unknown_product")
        }
        return product
    }

    static func missingIssuer(_ keyId: String) -> GatewayError {
        .signingKeyUnusable(
            "signing key '\(keyId)' has no issuerId, which a JWS needs: import the key again with issuerId",
            reason: "issuer_id_missing")
    }

    /// Runs a domain call whose failures are the client's (unknown product or group).
    static func domain<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as OfferDomainError {
            throw GatewayError.invalidParams(
                param: "params." + (error.field ?? "productId"), message: error.message, reason: error.code.rawValue)
        }
    }
}
