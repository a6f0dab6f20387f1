import Foundation
import JSONRPC

/// What the OpenRPC document says about each method: params, result schema, errors beyond those of its access.
/// Keyed by method name; `OpenRPCTests` fails when a method of the table has no entry here or an entry names no
/// method, so the two cannot drift.
struct MethodDoc: Sendable {
    struct Param: Sendable {
        let name: String
        let schema: JSONValue
        let required: Bool
        let description: String?

        var json: JSONValue {
            var object: JSONObject = ["name": .string(name), "schema": schema, "required": .bool(required)]
            if let description { object["description"] = .string(description) }
            return .object(object)
        }
    }

    let summary: String
    let params: [Param]
    let result: JSONValue
    let errors: [Int]
}

enum MethodDocs {
    static func doc(for method: String) -> MethodDoc? { all[method] }

    static let all: [String: MethodDoc] = [:]
}
