import Foundation
import JSONRPC
import OfferCrypto
import OfferDomain
import OfferStore

/// An error that knows how the API shows it (as hummingbird's `HTTPResponseError` does): the JSON-RPC error a
/// client sees, and whether the failure is the gateway's own (then logged with a detail) or the client's doing.
/// Every error a service may throw conforms (a redemption refusal travels as `GatewayError.refused`), and `renderedError(_:)` is the one entry point transports use: the
/// JSON-RPC dispatcher here, and the HTTP listener, which maps the same `RPCError` codes to status codes.
protocol RenderableError: Error {
    /// The error on the wire.
    var rpcError: RPCError { get }
    /// For the server log, when the failure is the gateway's or the database's; nil when the client caused it.
    var failureDetail: String? { get }
}

extension GatewayError: RenderableError {}

extension StoreError: RenderableError {
    var rpcError: RPCError { GatewayError(self).rpcError }
    /// The store's own description (SQLSTATE, libpq's message; never bound values) for what is not the client's.
    var failureDetail: String? {
        if case .database(let failure) = self, failure.isCancelled { return nil }
        return GatewayError(self).failureDetail.map { _ in "\(self)" }
    }
}

extension RPCError: RenderableError {
    var rpcError: RPCError { self }
    /// Errors raised as `RPCError` are protocol-level (bad params shape, unknown method): the client's.
    var failureDetail: String? { nil }
}

/// -32060: Apple's signed data was rejected; `data.reason` is the verifier's reason (API.md §7). The message names
/// the failed step only: the verifier's context and OpenSSL's errors stay out of replies (and out of the log: the
/// client sent the data).
extension AppleSignedDataError: RenderableError {
    var rpcError: RPCError {
        RPCError(
            code: -32060, message: "Apple signed data rejected: \(reason.rawValue)", reason: reason.rawValue,
            retryable: false)
    }
    var failureDetail: String? { nil }
}

/// Any error as the client sees it; what is not a `RenderableError` is a bug: -32603, with the detail logged.
func renderedError(_ error: any Error) -> (rpc: RPCError, failureDetail: String?) {
    if let error = error as? any RenderableError { return (error.rpcError, error.failureDetail) }
    let unexpected = GatewayError.internal("unexpected: \(error)")
    return (unexpected.rpcError, unexpected.failureDetail)
}
