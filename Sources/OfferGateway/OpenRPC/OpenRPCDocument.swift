import Foundation
import JSONRPC

/// The OpenRPC 1.x document of the API (`rpc.discover`, `GET /v1/openrpc.json`), generated from the dispatcher's
/// own method table (`Gateway.allMethods`): a method exists in the document exactly when the gateway answers it.
enum OpenRPCDocument {
    static let openrpcVersion = "1.3.2"

    static func make(methods: [MethodSpec], version: String) -> JSONValue {
        let described: [JSONValue] = methods.sorted { $0.name < $1.name }.map { spec in
            let doc = MethodDocs.doc(for: spec.name)
            var method: JSONObject = [
                "name": .string(spec.name),
                "summary": .string(doc?.summary ?? spec.name),
                "params": .array((doc?.params ?? []).map(\.json)),
                "result": ["name": "result", "schema": doc?.result ?? ["type": "object"]],
                "paramStructure": "by-name",
                "x-access": .string(spec.access.name),
            ]
            let errors = (doc?.errors ?? []) + spec.access.errors
            if !errors.isEmpty {
                method["errors"] = .array(
                    Set(errors).sorted().map { code in
                        ["code": .int(code), "message": .string(ErrorCatalog.message(code))]
                    })
            }
            return .object(method)
        }
        return [
            "openrpc": .string(openrpcVersion),
            "info": [
                "title": "OfferGate", "version": .string(version),
                "description":
                    "JSON-RPC 2.0 API of OfferGate (API.md). Authenticate per connection with session.authenticate, or per HTTP request with Authorization: Bearer.",
            ],
            "servers": [["name": "http", "url": "/v1/rpc"]],
            "methods": .array(described),
        ]
    }
}

extension Access {
    var name: String {
        switch self {
        case .open: "open"
        case .tenant: "tenant"
        case .admin: "admin"
        }
    }

    /// Errors every method of this access can answer.
    var errors: [Int] {
        switch self {
        case .open: [-32602]
        case .tenant: [-32001, -32002, -32602, -32029, -32050, -32603]
        case .admin: [-32001, -32002, -32602, -32050, -32603]
        }
    }
}

/// The messages of API.md §7, for the document's error entries.
enum ErrorCatalog {
    static func message(_ code: Int) -> String {
        switch code {
        case -32700: "parse error"
        case -32600: "invalid request"
        case -32601: "method not found"
        case -32602: "invalid params (data.param names it)"
        case -32603: "internal error"
        case -32001: "unauthenticated"
        case -32002: "forbidden"
        case -32004: "not found"
        case -32009: "conflict"
        case -32020: "not eligible"
        case -32029: "rate limited (data.retryAfterMs)"
        case -32030: "no active signing key"
        case -32040: "unknown code"
        case -32041: "code exhausted"
        case -32042: "campaign not active"
        case -32043: "customer limit reached"
        case -32050: "unavailable (retryable)"
        case -32060: "Apple signed data rejected (data.reason)"
        default: "error"
        }
    }
}
