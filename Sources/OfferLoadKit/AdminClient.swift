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
    @discardableResult
    public func call(_ method: String, _ params: JSONObject) async throws(OfferLoadError) -> JSONValue {
        do {
            return try await client.call(method: method, params: .object(params), timeout: .seconds(300))
        } catch let error as RPCError {
            let reason = error.reason.map { " (\($0))" } ?? ""
            throw OfferLoadError(.setupFailed, context: method, "error \(error.code): \(error.message)\(reason)")
        } catch {
            throw OfferLoadError(.setupFailed, context: method, String(describing: error))
        }
    }

    /// Sends many calls pipelined, at most `window` in flight; the first failure ends the batch.
    public func callAll(_ method: String, _ params: [JSONObject], window: Int = 64) async throws(OfferLoadError) {
        var index = 0
        while index < params.count {
            let chunk = params[index..<min(params.count, index + window)]
            let failure: OfferLoadError? = await withTaskGroup(of: OfferLoadError?.self) { group in
                for p in chunk {
                    group.addTask {
                        do throws(OfferLoadError) {
                            try await self.call(method, p)
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
