import Foundation
import JSONRPC
import OfferCrypto
import OfferGateway
import OfferTestSupport
import Testing

/// The test certificate authority of OfferCryptoTests (Fixtures/AppleSignedData/test_ca_referee.py, whose cases
/// Apple's own library referees): a root, an intermediate with the WWDR OID and a leaf with the receipt OID, valid
/// 2022-2034. The gateway tests sign their own transactions, renewal infos and notifications with its leaf.
struct AppleTestCA: Decodable, Sendable {
    let rootDER: String
    let leafKeyPKCS8: String
    let x5c: [String]

    /// The app every test tenant of these tests is (bundle id and app Apple id).
    static let appAppleId: Int64 = 1_234_567_890

    var root: [UInt8] { Array(Data(base64Encoded: rootDER) ?? Data()) }

    /// A verifier pinning this CA's root as well as Apple's (real fixtures verify too).
    func verifier() throws -> AppleSignedDataVerifier {
        try AppleSignedDataVerifier(additionalRoots: [root], clock: { TestGateway.now })
    }

    /// `payload` as compact JSON, signed ES256 under the test leaf with the good chain.
    func sign(_ payload: JSONValue) throws -> String {
        let key = try SigningKey(pkcs8PEM: leafKeyPKCS8)
        let header = JSONSerializer.serialize(["alg": "ES256", "x5c": .array(x5c.map { .string($0) })])
        let input = Base64URL.encode(header) + "." + Base64URL.encode(JSONSerializer.serialize(payload))
        return input + "." + Base64URL.encode(try key.signatureRaw(for: Array(input.utf8)))
    }

    static func shared() async throws -> AppleTestCA { try await Store.shared.get() }

    private actor Store {
        static let shared = Store()
        private var task: Task<AppleTestCA, any Error>?

        func get() async throws -> AppleTestCA {
            if let task { return try await task.value }
            let made = Task { try await AppleTestCA.make() }
            task = made
            return try await made.value
        }
    }

    private static func make() async throws -> AppleTestCA {
        let configured = ProcessInfo.processInfo.environment["OFFERGATE_PYTHON"] ?? ""
        let venv = PackagePaths.root.appendingPathComponent(".build/pyenv/bin/python3").path
        let python = configured.isEmpty ? venv : configured
        try #require(
            FileManager.default.isExecutableFile(atPath: python),
            "no Python with Apple's library at \(python): run ops/pyenv or set OFFERGATE_PYTHON")
        let script = PackagePaths.root.appendingPathComponent(
            "Tests/OfferCryptoTests/Fixtures/AppleSignedData/test_ca_referee.py")
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("og-ca-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: output) }
        // The script also runs Apple's library on its cases (about two seconds): once per test process.
        let child = try ChildProcess.spawn(
            python, [script.path], environment: ChildProcess.environment(), stdout: output.path)
        let finished = await eventually(timeout: .seconds(120)) { child.exitStatus() != nil }
        try #require(finished && child.exitStatus() == 0, "test_ca_referee.py failed")
        return try JSONDecoder().decode(AppleTestCA.self, from: Data(contentsOf: output))
    }
}

/// Milliseconds since 1970, as Apple writes dates.
func appleMs(_ date: Date) -> JSONValue { .int(Int(date.timeIntervalSince1970 * 1000)) }

/// Payloads shaped like Apple's (APPLE_OFFERS §5), for the test tenant's app.
struct ApplePayloads {
    let bundleId: String
    var appAppleId: Int64 = AppleTestCA.appAppleId

    func transaction(
        id: String, original: String? = nil, product: String = "monthly", purchase: Date, expires: Date?,
        environment: String = "Production", token: String? = nil, offerType: Int? = nil, offerId: String? = nil,
        discount: String? = nil, ownership: String = "PURCHASED", revocation: Date? = nil, signed: Date
    ) -> JSONValue {
        var object: JSONObject = [
            "transactionId": .string(id), "originalTransactionId": .string(original ?? id),
            "bundleId": .string(bundleId), "productId": .string(product), "subscriptionGroupIdentifier": "21000001",
            "purchaseDate": appleMs(purchase), "originalPurchaseDate": appleMs(purchase), "quantity": 1,
            "type": "Auto-Renewable Subscription", "inAppOwnershipType": .string(ownership),
            "signedDate": appleMs(signed), "environment": .string(environment), "transactionReason": "PURCHASE",
            "storefront": "USA", "storefrontId": "143441", "price": 4990, "currency": "USD",
        ]
        if let expires { object["expiresDate"] = appleMs(expires) }
        if let token { object["appAccountToken"] = .string(token) }
        if let offerType { object["offerType"] = .int(offerType) }
        if let offerId { object["offerIdentifier"] = .string(offerId) }
        if let discount { object["offerDiscountType"] = .string(discount) }
        if let revocation {
            object["revocationDate"] = appleMs(revocation)
            object["revocationReason"] = 0
        }
        return .object(object)
    }

    func renewal(
        original: String, product: String = "monthly", autoRenewStatus: Int = 1, retry: Bool = false,
        grace: Date? = nil, winBack: [String]? = nil, environment: String = "Production", signed: Date
    ) -> JSONValue {
        var object: JSONObject = [
            "originalTransactionId": .string(original), "autoRenewProductId": .string(product),
            "productId": .string(product), "autoRenewStatus": .int(autoRenewStatus),
            "isInBillingRetryPeriod": .bool(retry), "signedDate": appleMs(signed),
            "environment": .string(environment), "recentSubscriptionStartDate": appleMs(signed),
        ]
        if let grace { object["gracePeriodExpiresDate"] = appleMs(grace) }
        if let winBack { object["eligibleWinBackOfferIds"] = .array(winBack.map { .string($0) }) }
        return .object(object)
    }

    func notification(
        uuid: UUID = UUID(), type: String = "DID_RENEW", subtype: String? = nil, environment: String = "Production",
        transaction: String? = nil, renewal: String? = nil, signed: Date
    ) -> JSONValue {
        var data: JSONObject = [
            "bundleId": .string(bundleId), "bundleVersion": "42", "environment": .string(environment),
            "appAppleId": .int(Int(appAppleId)), "status": 1,
        ]
        if let transaction { data["signedTransactionInfo"] = .string(transaction) }
        if let renewal { data["signedRenewalInfo"] = .string(renewal) }
        var object: JSONObject = [
            "notificationType": .string(type), "notificationUUID": .string(uuid.uuidString.lowercased()),
            "version": "2.0", "signedDate": appleMs(signed), "data": .object(data),
        ]
        if let subtype { object["subtype"] = .string(subtype) }
        return .object(object)
    }
}

/// A gateway whose verifier trusts the test CA, with one tenant set up for Apple data: the standard catalog, the
/// test app's bundle id and app Apple id, and the given environment flags.
struct AppleTenant: Sendable {
    let gateway: TestGateway
    let ca: AppleTestCA
    let slug: String
    let client: RPCClient
    let admin: RPCClient
    let payloads: ApplePayloads

    static func setUp(
        _ gateway: TestGateway, ca: AppleTestCA, slug: String = "apple-app", allowSandbox: Bool = false,
        extraOffers: [JSONValue] = []
    ) async throws -> AppleTenant {
        let admin = try await gateway.admin()
        let bundleId = "com.example.\(slug)"
        let key = try await gateway.createTenant(slug, bundleId: bundleId, admin: admin)
        try await gateway.upsertStandardCatalog(tenant: slug, admin: admin, extraOffers: extraOffers)
        _ = try await admin.call(
            method: "tenants.update",
            params: [
                "tenant": .string(slug), "appAppleId": .int(Int(AppleTestCA.appAppleId)),
                "allowSandbox": .bool(allowSandbox),
            ])
        return AppleTenant(
            gateway: gateway, ca: ca, slug: slug, client: try await gateway.tenant(key), admin: admin,
            payloads: ApplePayloads(bundleId: bundleId))
    }

    func signed(_ payload: JSONValue) throws -> String { try ca.sign(payload) }

    @discardableResult
    func notify(_ payload: JSONValue) async throws -> JSONValue {
        try await client.call(method: "appstore.notification", params: ["signedPayload": .string(try signed(payload))])
    }

    @discardableResult
    func transactions(_ transactions: [JSONValue], renewals: [JSONValue] = [], customerId: String? = nil)
        async throws -> JSONValue
    {
        var params: JSONObject = ["signedTransactions": .array(try transactions.map { .string(try signed($0)) })]
        if !renewals.isEmpty { params["signedRenewalInfo"] = .array(try renewals.map { .string(try signed($0)) }) }
        if let customerId { params["customerId"] = .string(customerId) }
        return try await client.call(method: "appstore.transactions", params: .object(params))
    }

    func group(_ customerId: String, on client: RPCClient? = nil) async throws -> JSONValue {
        let result = try await (client ?? self.client).call(
            method: "customers.get", params: ["customerId": .string(customerId)])
        return try #require(result["groups"]?[0])
    }

    /// How many rows of an Apple table the tenant has.
    func count(_ table: String) async throws -> Int {
        let tenant = try await gateway.tenantId(slug)
        return try await gateway.count(
            "SELECT count(*)::bigint FROM \(query: .unsafeRaw(table)) WHERE tenant_id = \(tenant)")
    }
}

/// Days from the tests' "now".
func days(_ n: Double) -> Date { TestGateway.now.addingTimeInterval(n * 86_400) }
