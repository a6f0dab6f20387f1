// JSON-RPC error objects as they travel on the wire.

/// A JSON-RPC error object: `{"code", "message", "data"}`.
///
/// By OfferGate convention (API.md §7) `data` is an object `{"reason": "<snake_case>", "retryable": bool, ...}`;
/// use `init(code:message:reason:retryable:details:)` to follow it. Thrown by `RPCClient.call` for error responses.
public struct RPCError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The numeric error code.
    public var code: Int
    /// A short human-readable message (never secrets).
    public var message: String
    /// Structured details, by convention an object with `reason` and `retryable`.
    public var data: JSONValue?

    /// A generic error (application codes, or anything not covered by the helpers).
    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    /// An error following the `data: {"reason", "retryable", ...}` convention; `details` are merged into `data`.
    public init(code: Int, message: String, reason: String, retryable: Bool = false, details: JSONObject = [:]) {
        var data: JSONObject = ["reason": .string(reason), "retryable": .bool(retryable)]
        for member in details { data[member.key] = member.value }
        self.init(code: code, message: message, data: .object(data))
    }

    /// `data.reason`, if present.
    public var reason: String? { data?["reason"]?.stringValue }

    /// `data.retryable`, if present (absent means not retryable).
    public var retryable: Bool { data?["retryable"]?.boolValue ?? false }

    public var description: String {
        "RPCError(\(code), \(message)\(reason.map { ", reason: \($0)" } ?? ""))"
    }

    // MARK: Standard errors

    /// -32700: the frame is not valid JSON.
    public static func parseError(_ detail: String = "invalid JSON") -> RPCError {
        RPCError(code: -32700, message: "Parse error", reason: "parse_error", details: ["detail": .string(detail)])
    }

    /// -32600: the JSON is not a valid request object (or the frame was too large, reason `frame_too_large`).
    public static func invalidRequest(_ detail: String, reason: String = "invalid_request") -> RPCError {
        RPCError(code: -32600, message: "Invalid Request", reason: reason, details: ["detail": .string(detail)])
    }

    /// -32600 with `data.reason = "frame_too_large"` and the limit in `data.limitBytes`.
    public static func frameTooLarge(limit: Int) -> RPCError {
        RPCError(
            code: -32600, message: "Invalid Request: frame too large", reason: "frame_too_large",
            details: ["limitBytes": .int(limit)])
    }

    /// -32601: unknown method (the method name is echoed in `data.method`).
    public static func methodNotFound(_ method: String) -> RPCError {
        RPCError(
            code: -32601, message: "Method not found", reason: "method_not_found", details: ["method": .string(method)])
    }

    /// -32602: invalid params; `param` names the offending parameter path (e.g. `params.offers[2].price`).
    public static func invalidParams(_ detail: String, param: String? = nil, reason: String = "invalid_params")
        -> RPCError
    {
        var details: JSONObject = ["detail": .string(detail)]
        if let param { details["param"] = .string(param) }
        return RPCError(code: -32602, message: "Invalid params", reason: reason, details: details)
    }

    /// -32602 from a decoding error: `data.param` is the path prefixed with `params`, `data.reason` the kind
    /// (`missing_param`, `wrong_type`, `null_value`, `invalid_value`).
    public static func invalidParams(_ error: DecodingError, prefix: String = "params") -> RPCError {
        let path = error.pathDescription
        let param = path.isEmpty ? prefix : (path.hasPrefix("[") ? prefix + path : prefix + "." + path)
        let detail: String
        switch error.kindDescription {
        case "missing_param": detail = "missing required parameter"
        case "wrong_type": detail = "parameter has the wrong type"
        case "null_value": detail = "parameter must not be null"
        default: detail = "parameter has an invalid value"
        }
        return invalidParams(detail, param: param, reason: error.kindDescription)
    }

    /// -32603: internal error. Details belong in the server log, not here.
    public static func internalError(reason: String = "internal_error", retryable: Bool = false) -> RPCError {
        RPCError(code: -32603, message: "Internal error", reason: reason, retryable: retryable)
    }

    /// The error object as JSON.
    public var json: JSONValue {
        var object: JSONObject = ["code": .int(code), "message": .string(message)]
        if let data { object["data"] = data }
        return .object(object)
    }

    /// Reads an error object; `nil` if `value` is not one.
    public init?(json value: JSONValue) {
        guard case .object(let object) = value, let code = object["code"]?.int64Value,
            let message = object["message"]?.stringValue
        else { return nil }
        self.init(code: Int(code), message: message, data: object["data"])
    }
}
