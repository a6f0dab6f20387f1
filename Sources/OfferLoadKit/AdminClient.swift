import Foundation
import JSONRPC

/// A connection authenticated with the admin key, for the setup and the invariant check's API reads.
/// Errors come back as ``OfferLoadError`` with code `setupFailed`, naming the method (never a key).
public struct AdminClient: Sendable {
    let client: RPCClient
    /// The address it talks to.
    public let address: String

    /// Connects to `address` and authenticates with `adminKey`.
    public static func connect(address: String, adminKey: String) async throws(OfferLoadError) -> AdminClient {
        let client: RPCClient
        do {
            client = try await RPCClient.connect(to: address)
        } catch {
            throw OfferLoadError(.connectFailed, context: address, String(describing: error))
        }
        let admin = AdminClient(client: client, address: address)
        let session = try await admin.call("session.authenticate", ["apiKey": .string(adminKey)])
        guard session["role"]?.stringValue == "admin" else {
            client.close()
            throw OfferLoadError(.setupFailed, context: "--admin-key", "the key given is not the admin key")
        }
        return admin
    }

    /// Calls `method` with an object of params; any failure is a `setupFailed` error naming the method.
    /// `retryingFor`: how long an answer the gateway marks retryable (-32050, the database unavailable or its
    /// pool busy) is sent again, with a growing pause; only for calls that are idempotent. Zero: not retried.
    @discardableResult
    public func call(_ method: String, _ params: JSONObject, retryingFor retryWindow: Duration = .zero)
        async throws(OfferLoadError) -> JSONValue
    {
        let clock = ContinuousClock()
        let giveUp = clock.now + retryWindow
        var pause = Duration.milliseconds(50)
        while true {
            do {
                return try await client.call(method: method, params: .object(params), timeout: .seconds(300))
            } catch let error as RPCError {
                if error.retryable, clock.now + pause < giveUp {
                    try? await Task.sleep(for: pause)
                    pause = min(pause * 2, .seconds(2))
                    continue
                }
                let reason = error.reason.map { " (\($0))" } ?? ""
                throw OfferLoadError(.setupFailed, context: method, "error \(error.code): \(error.message)\(reason)")
            } catch {
                throw OfferLoadError(.setupFailed, context: method, String(describing: error))
            }
        }
    }

    /// Sends many calls of an idempotent method pipelined, at most `window` in flight; a call answered retryable
    /// is sent again for up to `retryingFor` (a setup must not fail because the gateway's pool was busy for a
    /// moment); the first other failure ends the batch.
    public func callAll(
        _ method: String, _ params: [JSONObject], window: Int = 64, retryingFor: Duration = .seconds(60)
    ) async throws(OfferLoadError) {
        var index = 0
        while index < params.count {
            let chunk = params[index..<min(params.count, index + window)]
            let failure: OfferLoadError? = await withTaskGroup(of: OfferLoadError?.self) { group in
                for p in chunk {
                    group.addTask {
                        do throws(OfferLoadError) {
                            try await self.call(method, p, retryingFor: retryingFor)
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
                var first: OfferLoadError?
                for await result in group where first == nil { first = result }
                return first
            }
            if let failure { throw failure }
            index += chunk.count
        }
    }

    public func close() { client.close() }
}
