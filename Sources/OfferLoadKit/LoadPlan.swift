import Foundation

/// How the load is offered.
public enum LoadModel: Sendable, Equatable {
    /// Closed loop: `connections` connections, each keeping `depth` requests in flight; a new request is sent as
    /// soon as one completes. Latency is measured from the actual send.
    case closed(connections: Int, depth: Int)
    /// Open loop: requests at `rate` per second in total, request `i` intended at `start + i / rate`, spread
    /// round-robin over `connections`. Latency is measured from the *intended* time, so a stalled server (or a
    /// sender that fell behind) shows in the figures: no coordinated omission. At most `maxInFlight` requests per
    /// connection are outstanding; beyond that sending waits, which still counts against latency.
    case open(connections: Int, rate: Double, maxInFlight: Int = 10_000)

    /// The number of connections opened.
    public var connections: Int {
        switch self {
        case .closed(let c, _), .open(let c, _, _): c
        }
    }
}

/// When the measured part of a run ends.
public enum StopCondition: Sendable, Equatable {
    /// Stop sending `seconds` after the warm-up ended (closed loop) / after the last request intended before then
    /// (open loop); in-flight requests are awaited and counted.
    case duration(seconds: Double)
    /// Stop after this many measured requests (warm-up requests not included).
    case requests(Int)
}

/// Everything the engine needs to run one load: model, stop condition, warm-up and target addresses.
public struct LoadPlan: Sendable, Equatable {
    public var model: LoadModel
    public var stop: StopCondition
    /// Seconds at the start whose requests are sent but excluded from every figure (except the invariant ledger).
    public var warmupSeconds: Double
    /// Gateway addresses; connection `k` goes to `targets[k % targets.count]`.
    public var targets: [String]
    /// Closed loop: for this many seconds after its first send, a request answered -32050 (unavailable, retryable)
    /// is sent again, unchanged (same idempotency key), as a client riding out a database failover would; nil
    /// counts the first -32050 as the outcome.
    public var retryUnavailableSeconds: Double?

    public init(
        model: LoadModel, stop: StopCondition, warmupSeconds: Double = 0, targets: [String],
        retryUnavailableSeconds: Double? = nil
    ) {
        self.model = model
        self.stop = stop
        self.warmupSeconds = warmupSeconds
        self.targets = targets
        self.retryUnavailableSeconds = retryUnavailableSeconds
    }

    /// The address of connection `k` (round-robin over the targets).
    public func target(ofConnection k: Int) -> String { targets[k % targets.count] }

    /// Checks the plan can run; the error names the offending option.
    public func validate() throws(OfferLoadError) {
        guard !targets.isEmpty else { throw OfferLoadError(.invalidPlan, context: "--connect", "no target address") }
        guard model.connections >= 1 else {
            throw OfferLoadError(.invalidPlan, context: "--connections", "needs at least 1 connection")
        }
        switch model {
        case .closed(_, let depth):
            guard depth >= 1 else {
                throw OfferLoadError(.invalidPlan, context: "--depth", "needs a depth of at least 1")
            }
        case .open(_, let rate, let maxInFlight):
            guard rate.isFinite, rate > 0 else {
                throw OfferLoadError(.invalidPlan, context: "--rate", "needs a rate above 0 requests/s")
            }
            guard maxInFlight >= 1 else {
                throw OfferLoadError(.invalidPlan, context: "--max-in-flight", "needs at least 1")
            }
        }
        switch stop {
        case .duration(let seconds):
            guard seconds.isFinite, seconds > 0 else {
                throw OfferLoadError(.invalidPlan, context: "--duration", "needs a duration above 0 seconds")
            }
        case .requests(let n):
            guard n >= 1 else { throw OfferLoadError(.invalidPlan, context: "--requests", "needs at least 1 request") }
        }
        guard warmupSeconds.isFinite, warmupSeconds >= 0 else {
            throw OfferLoadError(.invalidPlan, context: "--warmup", "needs 0 or more seconds")
        }
        if let retry = retryUnavailableSeconds {
            guard retry.isFinite, retry > 0 else {
                throw OfferLoadError(.invalidPlan, context: "--retry-unavailable", "needs a number of seconds above 0")
            }
            guard case .closed = model else {
                throw OfferLoadError(
                    .invalidPlan, context: "--retry-unavailable", "applies to the closed loop only (no --rate)")
            }
        }
    }
}

extension LoadPlan {
    /// The default number of connections when `--connections` is not given.
    public static let defaultConnections = 16
    /// The default duration (seconds) when neither `--duration` nor `--requests` is given.
    public static let defaultDuration = 10.0

    /// Builds a plan from the command line's values (nil = not given), with the rules of `offer-load`:
    /// `--rate` selects the open loop (and excludes `--depth`); `--duration` and `--requests` exclude each other,
    /// and without either the run lasts ``defaultDuration`` seconds; connections default to
    /// ``defaultConnections``, depth to 1, warm-up to 0. The result is validated.
    public static func fromOptions(
        targets: [String], connections: Int? = nil, depth: Int? = nil, rate: Double? = nil,
        duration: Double? = nil, requests: Int? = nil, warmup: Double? = nil, maxInFlight: Int? = nil,
        retryUnavailable: Double? = nil
    ) throws(OfferLoadError) -> LoadPlan {
        let stop: StopCondition
        switch (duration, requests) {
        case (.some, .some):
            throw OfferLoadError(.invalidPlan, context: "--requests", "give --duration or --requests, not both")
        case (.some(let seconds), nil): stop = .duration(seconds: seconds)
        case (nil, .some(let n)): stop = .requests(n)
        case (nil, nil): stop = .duration(seconds: defaultDuration)
        }
        let count = connections ?? defaultConnections
        let model: LoadModel
        if let rate {
            guard depth == nil else {
                throw OfferLoadError(.invalidPlan, context: "--depth", "applies to the closed loop only (no --rate)")
            }
            model = .open(connections: count, rate: rate, maxInFlight: maxInFlight ?? 10_000)
        } else {
            guard maxInFlight == nil else {
                throw OfferLoadError(.invalidPlan, context: "--max-in-flight", "applies to the open loop only (--rate)")
            }
            model = .closed(connections: count, depth: depth ?? 1)
        }
        let plan = LoadPlan(
            model: model, stop: stop, warmupSeconds: warmup ?? 0, targets: targets,
            retryUnavailableSeconds: retryUnavailable)
        try plan.validate()
        return plan
    }
}
