import Foundation

/// The one error type of OfferLoadKit: a stable code, the context it happened in, and a description safe to print
/// (never an API key or other secret).
public struct OfferLoadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, as a stable machine-readable code.
    public enum Code: String, Sendable, Equatable {
        /// A `--mix` specification that does not parse or names an unknown scenario.
        case invalidMix = "invalid_mix"
        /// A load plan that cannot run (no targets, zero connections, no stop condition, …).
        case invalidPlan = "invalid_plan"
        /// A scenario name that does not exist.
        case unknownScenario = "unknown_scenario"
        /// The scenario's fixture lacks data the scenario needs (e.g. no one-time codes).
        case missingFixture = "missing_fixture"
        /// Connecting to a target failed.
        case connectFailed = "connect_failed"
        /// Setting up the scenario's data through the admin API failed (the context names the method).
        case setupFailed = "setup_failed"
        /// Reading the database for the invariant check failed.
        case ledgerFailed = "ledger_failed"
    }

    public let code: Code
    /// Where it happened (an option name, a target address, a scenario name).
    public let context: String
    /// A human-readable explanation.
    public let message: String

    public init(_ code: Code, context: String, _ message: String) {
        self.code = code
        self.context = context
        self.message = message
    }

    public var description: String { "\(context): \(message)" }
}
