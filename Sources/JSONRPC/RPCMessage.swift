// JSON-RPC 2.0 messages: ids, requests, responses, and the classification of an incoming frame.

/// A request id: a string, a number, or `null` (a request with id `null` is still a request, per the spec).
public enum RPCID: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case number(JSONNumber)
    case null

    /// An integer id.
    public static func int(_ value: Int64) -> RPCID { .number(JSONNumber(value)) }

    /// The id as JSON.
    public var json: JSONValue {
        switch self {
        case .string(let s): return .string(s)
        case .number(let n): return .number(n)
        case .null: return .null
        }
    }

    /// Reads an id; `nil` if `value` is not a string, number or null.
    public init?(json value: JSONValue) {
        switch value {
        case .string(let s): self = .string(s)
        case .number(let n): self = .number(n)
        case .null: self = .null
        default: return nil
        }
    }

    public var description: String { json.description }
}

/// A request or notification (`id == nil`).
public struct RPCRequest: Sendable, Hashable {
    /// The method name.
    public var method: String
    /// `params`: `nil` (absent), an object or an array.
    public var params: JSONValue?
    /// The id; `nil` for a notification.
    public var id: RPCID?

    /// Creates a request (or a notification when `id` is `nil`).
    public init(method: String, params: JSONValue? = nil, id: RPCID?) {
        self.method = method
        self.params = params
        self.id = id
    }

    /// Whether this is a notification (no `id` member): it gets no response.
    public var isNotification: Bool { id == nil }

    /// Decodes `params` into `T` (absent params decode as `{}`); decoding errors become -32602 with `data.param`.
    public func decodeParams<T: Decodable>(_ type: T.Type, decoder: JSONValueDecoder = JSONValueDecoder())
        throws(RPCError) -> T
    {
        do {
            return try decoder.decode(T.self, from: params ?? .object(JSONObject()))
        } catch let error as DecodingError {
            throw RPCError.invalidParams(error)
        } catch let error as RPCError {
            throw error
        } catch {
            throw RPCError.invalidParams("parameters could not be decoded")
        }
    }

    /// The request as JSON (`{"jsonrpc":"2.0","method",...}`).
    public var json: JSONValue {
        var object: JSONObject = ["jsonrpc": "2.0", "method": .string(method)]
        if let params { object["params"] = params }
        if let id { object["id"] = id.json }
        return .object(object)
    }

    /// Validates one request object per JSON-RPC 2.0. On failure returns the -32600 error and the id if a valid
    /// one could be read (else `nil`, answered with id `null`).
    public static func validate(_ value: JSONValue) -> Result<RPCRequest, RPCRequestInvalid> {
        guard case .object(let object) = value else {
            return .failure(RPCRequestInvalid(error: .invalidRequest("a request must be a JSON object"), id: nil))
        }
        var id: RPCID? = nil
        if let rawID = object["id"] {
            guard let parsed = RPCID(json: rawID) else {
                return .failure(
                    RPCRequestInvalid(error: .invalidRequest("id must be a string, number or null"), id: nil))
            }
            id = parsed
        }
        func invalid(_ detail: String) -> Result<RPCRequest, RPCRequestInvalid> {
            .failure(RPCRequestInvalid(error: .invalidRequest(detail), id: id))
        }
        guard object["jsonrpc"] == .string("2.0") else { return invalid("jsonrpc must be \"2.0\"") }
        guard case .string(let method)? = object["method"] else { return invalid("method must be a string") }
        let params = object["params"]
        switch params {
        case nil, .object?, .array?: break
        default: return invalid("params must be an object or an array")
        }
        return .success(RPCRequest(method: method, params: params, id: id))
    }
}

/// Why a request object was rejected: the -32600 error and the id to answer with (`nil` → `null`).
public struct RPCRequestInvalid: Error, Sendable, Hashable {
    public var error: RPCError
    public var id: RPCID?
}

/// A response: `{"jsonrpc":"2.0","id",...,"result"|"error"}`.
public struct RPCResponse: Sendable, Hashable {
    /// The id of the request answered (`.null` when it could not be read).
    public var id: RPCID
    /// The result or the error.
    public var result: Result<JSONValue, RPCError>

    public init(id: RPCID, result: Result<JSONValue, RPCError>) {
        self.id = id
        self.result = result
    }

    /// The response as JSON.
    public var json: JSONValue {
        var object: JSONObject = ["jsonrpc": "2.0"]
        switch result {
        case .success(let value): object["result"] = value
        case .failure(let error): object["error"] = error.json
        }
        object["id"] = id.json
        return .object(object)
    }

    /// Appends the response's frame: its compact JSON and a newline (what `RPCExchange.frame` returns).
    public func appendFrame(to out: inout [UInt8]) {
        append(to: &out)
        out.append(0x0A)
    }

    /// Appends the compact JSON of the response (same bytes as serializing `json`, without building it).
    public func append(to out: inout [UInt8]) {
        switch result {
        case .success(let value):
            JSONSerializer.appendASCII("{\"jsonrpc\":\"2.0\",\"result\":", to: &out)
            JSONSerializer.append(value, to: &out)
        case .failure(let error):
            JSONSerializer.appendASCII("{\"jsonrpc\":\"2.0\",\"error\":", to: &out)
            JSONSerializer.append(error.json, to: &out)
        }
        JSONSerializer.appendASCII(",\"id\":", to: &out)
        JSONSerializer.append(id.json, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// Reads a response object; `nil` if `value` is not one.
    public init?(json value: JSONValue) {
        guard case .object(let object) = value, object["jsonrpc"] == .string("2.0"),
            let rawID = object["id"], let id = RPCID(json: rawID)
        else { return nil }
        if let result = object["result"], object["error"] == nil {
            self.init(id: id, result: .success(result))
        } else if let rawError = object["error"], object["result"] == nil, let error = RPCError(json: rawError) {
            self.init(id: id, result: .failure(error))
        } else {
            return nil
        }
    }
}

/// What an incoming frame turned out to be, before any handler runs.
public enum RPCInbound: Sendable, Hashable {
    /// One element: a valid request/notification, or an invalid one to answer with -32600.
    public enum Entry: Sendable, Hashable {
        case request(RPCRequest)
        case invalid(RPCRequestInvalid)
    }

    /// A single (non-batch) message.
    case single(Entry)
    /// A non-empty batch.
    case batch([Entry])
    /// The frame must be answered with exactly this response (parse error, empty batch, too deep...).
    case reject(RPCResponse)

    /// Classifies one frame (the bytes of one line, without the newline).
    public static func classify(_ frame: some Collection<UInt8>, maxDepth: Int = JSONParsing.defaultMaxDepth)
        -> RPCInbound
    {
        let value: JSONValue
        do {
            value = try JSONParsing.parse(frame, maxDepth: maxDepth)
        } catch {
            if error.code == .nestingTooDeep {
                return .reject(RPCResponse(id: .null, result: .failure(.parseError("nesting too deep"))))
            }
            return .reject(RPCResponse(id: .null, result: .failure(.parseError(error.context))))
        }
        return classify(value)
    }

    /// Classifies an already parsed JSON value.
    public static func classify(_ value: JSONValue) -> RPCInbound {
        if case .array(let elements) = value {
            guard !elements.isEmpty else {
                return .reject(RPCResponse(id: .null, result: .failure(.invalidRequest("empty batch"))))
            }
            return .batch(elements.map(entry))
        }
        return .single(entry(value))
    }

    static func entry(_ value: JSONValue) -> Entry {
        switch RPCRequest.validate(value) {
        case .success(let request): return .request(request)
        case .failure(let invalid): return .invalid(invalid)
        }
    }
}
