import Foundation
import OfferCrypto

/// Settings of the application layer (transports are configured separately).
public struct GatewayOptions: Sendable {
    /// The operators' API key (`OFFERGATE_ADMIN_KEY`); nil turns admin methods off.
    public var adminKey: String?
    /// Requests a second per tenant (0 = unlimited), and the burst allowed after a quiet period.
    public var rateLimit: Double = 0
    public var rateBurst: Double = 0
    /// How many customers' transaction histories each process keeps in memory.
    public var customerCacheSize: Int = 100_000
    /// How many `offers.best` answers each process remembers (see `DecisionMemo`); 0 turns the memo off.
    public var decisionMemoSize: Int = 20_000
    /// Log every request at info level (otherwise at debug).
    public var logRequests: Bool = true
    public var version: String = OfferGateVersion.current
    /// The clock for decisions without an explicit `at` and for signature timestamps.
    public var clock: @Sendable () -> Date = { Date() }
    /// Where nonces come from: by default a fresh time-ordered (v7) UUID, its random bits from OpenSSL's CSPRNG
    /// buffered per thread (Foundation's `UUID()` opens `/dev/urandom` on every call on Linux). Time-ordered, because
    /// the nonce is the ledger's key: see `UUID.timeOrdered(at:)`.
    public var nonce: @Sendable () -> UUID = { UUID.timeOrdered() }
    /// The one verifier of Apple's signed data of this process (its verified-chain cache is shared by every
    /// connection); nil: one trusting only the built-in Apple Root CA - G3. `offergate serve --apple-root-cert FILE`
    /// adds roots; tests pass one trusting their own CA.
    public var appleVerifier: AppleSignedDataVerifier?
    /// How often the in-memory `offers.best` counts of the funnel (`offered`) are added to the database: what a
    /// crash can lose. nil (or zero) turns that counting off.
    public var funnelFlushInterval: Duration? = .seconds(1)

    public init(adminKey: String? = nil) {
        self.adminKey = adminKey
    }
}

/// The version reported by `system.health`.
public enum OfferGateVersion {
    public static let current = "0.1.0"
}
