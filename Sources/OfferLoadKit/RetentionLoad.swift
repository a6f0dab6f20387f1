import Foundation
import HTTPClient
import JSONRPC
import Metrics
import OfferCrypto
import Synchronization

// The `retention` scenario: Apple's Retention Messaging performance test (APPLE_OFFERS.md §8), reproduced. Apple
// sends many signed realtime requests at once, each for a subscriber, and reports the success rate and the response
// times' p50/p90/p95/p99 against a threshold (`PerformanceTestConfig.responseTimeThreshold`, about 700 ms).

/// One subscriber the retention requests ask about: its subscription chain and the product it is cancelling.
public struct RetentionSubscriber: Sendable, Equatable, Codable {
    public let originalTransactionId: String
    public let productId: String

    public init(originalTransactionId: String, productId: String) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
    }
}

/// Signs Retention Messaging requests as Apple does: ES256 under a leaf certificate whose chain (`x5c`: leaf,
/// intermediate, root) the gateway trusts (`offergate serve --apple-root-cert ROOT`). For load tests only: the key
/// is a test CA's (`Tests/OfferCryptoTests/Fixtures/AppleSignedData/test_ca_referee.py` makes one), never Apple's.
public struct RetentionRequestSigner: Sendable {
    /// The test CA file: `{"leafKeyPKCS8": PEM, "x5c": [base64 DER, …]}` (what test_ca_referee.py prints).
    struct CAFile: Decodable {
        let leafKeyPKCS8: String
        let x5c: [String]
    }

    let key: SigningKey
    let header: [UInt8]
    /// The app Apple id the requests carry (the tenant's).
    public let appAppleId: Int64
    /// `Sandbox`, as in Apple's performance test, or `Production`.
    public let environment: String

    public init(leafKeyPKCS8: String, x5c: [String], appAppleId: Int64, environment: String = "Sandbox")
        throws(OfferLoadError)
    {
        do {
            key = try SigningKey(pkcs8PEM: leafKeyPKCS8)
        } catch {
            throw OfferLoadError(.setupFailed, context: "--apple-ca", "the leaf key does not parse: \(error)")
        }
        guard x5c.count == 3 else {
            throw OfferLoadError(.setupFailed, context: "--apple-ca", "x5c must hold leaf, intermediate and root")
        }
        header = JSONSerializer.serialize(["alg": "ES256", "x5c": .array(x5c.map { .string($0) })])
        self.appAppleId = appAppleId
        self.environment = environment
    }

    /// Reads the CA file at `path`.
    public static func load(path: String, appAppleId: Int64, environment: String = "Sandbox")
        throws(OfferLoadError) -> RetentionRequestSigner
    {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw OfferLoadError(.setupFailed, context: "--apple-ca", "cannot read \(path)")
        }
        let file: CAFile
        do { file = try JSONDecoder().decode(CAFile.self, from: data) } catch {
            throw OfferLoadError(.setupFailed, context: "--apple-ca", "\(path) has no leafKeyPKCS8 and x5c")
        }
        return try RetentionRequestSigner(
            leafKeyPKCS8: file.leafKeyPKCS8, x5c: file.x5c, appAppleId: appAppleId, environment: environment)
    }

    /// The request body Apple POSTs for `subscriber`: `{"signedPayload": "<JWS>"}`.
    public func body(for subscriber: RetentionSubscriber, requestId: UUID = UUID(), at: Date = Date())
        throws(OfferLoadError) -> [UInt8]
    {
        let payload: JSONValue = [
            "originalTransactionId": .string(subscriber.originalTransactionId), "appAppleId": .int(Int(appAppleId)),
            "productId": .string(subscriber.productId), "userLocale": "en-US",
            "requestIdentifier": .string(requestId.uuidString.lowercased()),
            "signedDate": .int(Int(at.timeIntervalSince1970 * 1000)), "environment": .string(environment),
        ]
        let input = Base64URL.encode(header) + "." + Base64URL.encode(JSONSerializer.serialize(payload))
        let signature: [UInt8]
        do { signature = try key.signatureRaw(for: Array(input.utf8)) } catch {
            throw OfferLoadError(.setupFailed, context: "retention", "signing a request failed: \(error)")
        }
        return JSONSerializer.serialize(["signedPayload": .string(input + "." + Base64URL.encode(signature))])
    }

    /// One body per request, signed before the run (so the harness spends no signing CPU under load): request `i`
    /// asks about `subscribers[i % subscribers.count]`, each with its own request id.
    public func bodies(_ subscribers: [RetentionSubscriber], count: Int) throws(OfferLoadError) -> [[UInt8]] {
        guard !subscribers.isEmpty else {
            throw OfferLoadError(.missingFixture, context: "retention", "the setup provided no subscribers")
        }
        var out: [[UInt8]] = []
        out.reserveCapacity(count)
        for i in 0..<count { out.append(try body(for: subscribers[i % subscribers.count])) }
        return out
    }
}

/// What the gateway answered to retention requests, by Apple's answer kind (and what was not an answer).
public final class RetentionTally: Sendable {
    public struct Counts: Sendable, Equatable, Codable {
        public var promotionalOffer = 0
        public var alternateProduct = 0
        public var message = 0
        /// 200 with a body that is none of Apple's shapes (Apple: INVALID_RESPONSE).
        public var invalidResponse = 0
        /// Another status than 200, by status (Apple: UNSUCCESSFUL_HTTP_RESPONSE_CODE).
        public var statuses: [String: Int] = [:]
        /// Answers (counted above by kind too) that came past the threshold (Apple: TIMED_OUT).
        public var late = 0

        public init() {}
    }

    private let state = Mutex(Counts())

    public init() {}

    /// Classifies one response; whether it is one of Apple's answer shapes.
    @discardableResult
    public func record(status: Int, body: [UInt8], late: Bool = false) -> Bool {
        let kind = status == 200 ? Self.kind(of: body) : nil
        state.withLock { c in
            if kind != nil && late { c.late += 1 }
            switch kind {
            case "promotionalOffer": c.promotionalOffer += 1
            case "alternateProduct": c.alternateProduct += 1
            case "message": c.message += 1
            default:
                if status == 200 { c.invalidResponse += 1 } else { c.statuses[String(status), default: 0] += 1 }
            }
        }
        return kind != nil
    }

    public var counts: Counts { state.withLock { $0 } }

    /// Apple's answer kind of a body, if it is exactly one of the shapes with a message identifier.
    static func kind(of body: [UInt8]) -> String? {
        guard let object = (try? JSONParsing.parse(body))?.objectValue, object.members.count == 1,
            let member = object.members.first, member.value["messageIdentifier"]?.stringValue?.isEmpty == false
        else { return nil }
        let (key, value) = (member.key, member.value)
        switch key {
        case "promotionalOffer" where value["promotionalOfferSignatureV2"]?.stringValue != nil: return key
        case "alternateProduct" where value["productId"]?.stringValue != nil: return key
        case "message": return key
        default: return nil
        }
    }
}

/// Sends one retention request body; `reply` runs with the HTTP status and body (the transport, e.g. an HTTP client),
/// on any thread, possibly at once.
public typealias RetentionSend =
    @Sendable ([UInt8], _ reply: @escaping @Sendable (Result<(status: Int, body: [UInt8]), any Error>) -> Void) -> Void

/// A load connection for the `retention` scenario: request `i`'s pre-signed body is POSTed by `send`; a `200` with
/// one of Apple's answer shapes is a success, anything else an error (`http_<status>`, `invalid_response`). Its answers
/// come back as callbacks, so a closed loop sends each next request from the transport's own thread.
public struct RetentionLoadConnection: CallbackLoadConnection {
    let bodies: [[UInt8]]
    let send: RetentionSend
    let tally: RetentionTally
    /// An answer later than this is Apple's TIMED_OUT.
    let threshold: Duration
    let onClose: @Sendable () async -> Void

    public init(
        bodies: [[UInt8]], tally: RetentionTally, threshold: Duration, send: @escaping RetentionSend,
        onClose: @escaping @Sendable () async -> Void = {}
    ) {
        self.bodies = bodies
        self.tally = tally
        self.threshold = threshold
        self.send = send
        self.onClose = onClose
    }

    /// The request `LoadRunner` hands over names the body by index (`Scenario.request` for `.retention`).
    public func start(_ request: LoadRequest, _ done: @escaping @Sendable (CallOutcome) -> Void) {
        guard let index = request.params["index"]?.int64Value, !bodies.isEmpty else {
            return done(.transportError("retention request without a body index"))
        }
        let started = ContinuousClock.now
        let (tally, threshold) = (tally, threshold)
        send(bodies[Int(index) % bodies.count]) { reply in
            switch reply {
            case .success(let response):
                let late = ContinuousClock.now - started > threshold
                if tally.record(status: response.status, body: response.body, late: late) { return done(.success) }
                done(.rpcError(code: response.status == 200 ? 0 : response.status))
            case .failure(let error):
                done(.transportError(String(describing: error)))
            }
        }
    }

    public func close() async { await onClose() }
}

/// The figures of a retention run as Apple's performance test reports them (`PerformanceTestResultResponse`:
/// config, result, successRate, responseTimes in milliseconds, failures by Apple's `SendAttemptResult`), plus the
/// answers by kind and the same percentiles in microseconds (Apple's whole milliseconds hide a 50 ms target's
/// margin).
public struct RetentionReport: Sendable, Equatable, Codable {
    public struct Config: Sendable, Equatable, Codable {
        public let maxConcurrentRequests: Int
        public let totalRequests: Int
        /// Distinct subscribers the requests ask about.
        public let distinctSubscribers: Int
        /// Milliseconds an answer may take (Apple's `responseTimeThreshold`).
        public let responseTimeThreshold: Int
        /// Percent of requests that must succeed (Apple's `successRateThreshold`).
        public let successRateThreshold: Int
    }

    public struct ResponseTimes: Sendable, Equatable, Codable {
        public let average: Int
        public let p50: Int
        public let p90: Int
        public let p95: Int
        public let p99: Int
    }

    public let config: Config
    /// `PASS` or `FAIL`.
    public let result: String
    /// Percent of requests answered with one of Apple's shapes inside the threshold (rounded down).
    public let successRate: Int
    /// The same as a fraction (exact, for 100 %-or-not).
    public let successFraction: Double
    /// Whole milliseconds, rounded to the nearest (as Apple reports them).
    public let responseTimes: ResponseTimes
    /// Microseconds.
    public let responseTimesMicros: ResponseTimes
    /// Failures by Apple's `SendAttemptResult` names: TIMED_OUT (answered past the threshold),
    /// UNSUCCESSFUL_HTTP_RESPONSE_CODE, INVALID_RESPONSE, NO_RESPONSE.
    public let failures: [String: Int]
    public let answers: RetentionTally.Counts

    public init(
        result run: RunResult, tally: RetentionTally.Counts, concurrency: Int, distinctSubscribers: Int,
        thresholdMs: Int, successRateThreshold: Int
    ) {
        let total = Int(run.measuredRequests)
        let h = run.latency
        var failures: [String: Int] = [:]
        let nonAnswers = tally.statuses.values.reduce(0, +)
        if nonAnswers > 0 { failures["UNSUCCESSFUL_HTTP_RESPONSE_CODE"] = nonAnswers }
        if tally.invalidResponse > 0 { failures["INVALID_RESPONSE"] = tally.invalidResponse }
        let transport = Int(run.errors["transport"] ?? 0)
        if transport > 0 { failures["NO_RESPONSE"] = transport }
        // A good answer past the threshold is a timeout to Apple.
        let goodButLate = min(tally.late, Int(run.measuredSuccesses))
        if goodButLate > 0 { failures["TIMED_OUT"] = goodButLate }
        let succeeded = max(0, Int(run.measuredSuccesses) - goodButLate)
        successFraction = total == 0 ? 0 : Double(succeeded) / Double(total)
        successRate = total == 0 ? 0 : succeeded * 100 / total
        func ms(_ micros: UInt64) -> Int { Int((micros + 500) / 1_000) }
        responseTimes = ResponseTimes(
            average: ms(UInt64(h.mean.rounded())), p50: ms(h.percentile(50)), p90: ms(h.percentile(90)),
            p95: ms(h.percentile(95)), p99: ms(h.percentile(99)))
        responseTimesMicros = ResponseTimes(
            average: Int(h.mean.rounded()), p50: Int(h.percentile(50)), p90: Int(h.percentile(90)),
            p95: Int(h.percentile(95)), p99: Int(h.percentile(99)))
        config = Config(
            maxConcurrentRequests: concurrency, totalRequests: total, distinctSubscribers: distinctSubscribers,
            responseTimeThreshold: thresholdMs, successRateThreshold: successRateThreshold)
        result = total > 0 && successRate >= successRateThreshold ? "PASS" : "FAIL"
        self.failures = failures
        answers = tally
    }

    /// The report as one line of JSON (sorted keys).
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// A few lines for people.
    public var text: String {
        let t = responseTimes
        let u = responseTimesMicros
        let failureText =
            failures.isEmpty
            ? "none"
            : failures.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                .joined(separator: ", ")
        return """
            Apple performance test shape: \(config.maxConcurrentRequests) concurrent, \(config.totalRequests) requests, \
            \(config.distinctSubscribers) distinct subscribers, threshold \(config.responseTimeThreshold) ms, \
            success rate threshold \(config.successRateThreshold) %
            result \(result): success rate \(successRate) % (\(String(format: "%.4f", successFraction * 100)) %)
            response times ms: average \(t.average), p50 \(t.p50), p90 \(t.p90), p95 \(t.p95), p99 \(t.p99)
            response times µs: average \(u.average), p50 \(u.p50), p90 \(u.p90), p95 \(u.p95), p99 \(u.p99)
            answers: promotionalOffer \(answers.promotionalOffer), alternateProduct \(answers.alternateProduct), \
            message \(answers.message)
            failures: \(failureText)

            """
    }
}

extension ScenarioSetup {
    /// The app Apple id the retention setup gives the tenant (the signed requests carry it).
    public static let retentionAppAppleId: Int64 = 1_234_567_890

    /// The subscribers of a seed, every one of them (those without history too: Apple asks about any subscriber;
    /// the gateway then answers with an alternate product or the default message).
    public static func retentionSubscribers(_ seed: HistorySeed) -> [RetentionSubscriber] {
        guard !seed.products.isEmpty else { return [] }
        return (0..<seed.count).map { i in
            RetentionSubscriber(
                originalTransactionId: "\(seed.runTag)-t\(i)-0", productId: seed.products[i % seed.products.count])
        }
    }

    /// The `retention.configure` params (without `tenant`): a message for every promotional offer, the first two
    /// products as alternates, and a default.
    public static func retentionParams(products: Int, offers: Int) -> JSONObject {
        let promotional = promotionalOffers(products: products, offers: offers)
        return [
            "defaultMessageId": "msg-default",
            "offers": .array(
                promotional.map { ["offerId": .string($0.offerId), "messageId": .string("msg-\($0.offerId)")] }),
            "alternateProducts": .array(
                (0..<min(2, products)).map { ["productId": .string("p\($0)"), "messageId": .string("msg-alt-p\($0)")] }),
        ]
    }

    /// The tenant's app Apple id and Sandbox data (Apple's performance test runs in Sandbox), then its retention
    /// configuration.
    static func setUpRetention(slug: String, options o: SetupOptions, admin: AdminClient) async throws(OfferLoadError) {
        try await admin.call(
            "tenants.update",
            ["tenant": .string(slug), "appAppleId": .int(Int(retentionAppAppleId)), "allowSandbox": true])
        var params = retentionParams(products: o.products, offers: o.offersPerProduct)
        params["tenant"] = .string(slug)
        try await admin.call("retention.configure", params)
    }
}

/// Opens the `retention` scenario's connections: `open` makes one transport connection to `address` (the runner's
/// target for the connection) and returns how to send a body on it and how to close it.
public struct RetentionLoadConnector: LoadConnector {
    public typealias Open = @Sendable (String) throws -> (send: RetentionSend, close: @Sendable () async -> Void)

    let bodies: [[UInt8]]
    let tally: RetentionTally
    let threshold: Duration
    let open: Open

    public init(bodies: [[UInt8]], tally: RetentionTally, threshold: Duration, open: @escaping Open) {
        self.bodies = bodies
        self.tally = tally
        self.threshold = threshold
        self.open = open
    }

    /// Over HTTP: one libcurl connection (kept alive) per load connection to `address` (`http://HOST:PORT`, or
    /// `unix:/path`, as `--http` takes it), POSTing to `/v1/apple/{tenant}/retention` as Apple does (no API key). The
    /// answers arrive on the HTTP client's loop thread (``HTTPConnection/start(_:_:headers:body:_:)``).
    public static func overHTTP(
        tenant: String, bodies: [[UInt8]], tally: RetentionTally, threshold: Duration, timeout: Duration
    ) -> RetentionLoadConnector {
        let path = "/v1/apple/\(tenant)/retention"
        return RetentionLoadConnector(bodies: bodies, tally: tally, threshold: threshold) { address in
            let connection = try HTTPConnection(HTTPLoadConnector.endpoint(address), timeout: timeout)
            let send: RetentionSend = { body, reply in
                connection.start("POST", path, headers: [("Content-Type", "application/json")], body: body) {
                    reply($0.map { ($0.status, $0.body) }.mapError { $0 })
                }
            }
            return (send, {})
        }
    }

    public func connect(address: String) async throws -> any LoadConnection {
        let (send, close) = try open(address)
        return RetentionLoadConnection(bodies: bodies, tally: tally, threshold: threshold, send: send, onClose: close)
    }
}
