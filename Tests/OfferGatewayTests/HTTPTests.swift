import Foundation
import HTTPClient
import HTTPServer
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Testing

@testable import OfferGateway

/// The HTTP listener (API.md §9) against a running gateway, with real clients: curl, Python's urllib and
/// http.client, libcurl. Serialized: each test runs a gateway and external clients, and all of them at once at the
/// start of a full run starve the busy machine's two-thread cooperative pool.
@Suite("HTTP listener", .serialized)
struct HTTPTests {
    /// A gateway with tenant `web-app` (standard catalog, a signing key): (gateway, admin client, tenant key).
    static func withTenant<T>(
        http: HTTPServerConfiguration? = nil, _ body: (TestGateway, RPCClient, String) async throws -> T
    ) async throws -> T {
        try await TestGateway.with(http: http) { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            let key = try await gw.createTenant("web-app", admin: admin)
            try await gw.upsertStandardCatalog(tenant: "web-app", admin: admin)
            try await gw.importKey(tenant: "web-app", admin: admin)
            return try await body(gw, admin, key)
        }
    }

    /// The value of one sample (`family{labels}`, written as the gateway writes it) in a /metrics text; nil when
    /// the text has none.
    static func sample(_ sample: String, in metrics: String) -> Double? {
        let prefix = sample + " "
        return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap {
            Double($0.dropFirst(prefix.count))
        }
    }

    /// Runs curl; returns (status code, body).
    static func curl(_ arguments: [String]) async throws -> (Int, String) {
        let outcome = try await ChildProcess.run(
            "/usr/bin/curl", ["-s", "--max-time", "20", "-w", "\n%{http_code}"] + arguments,
            environment: ChildProcess.environment(removingPrefixes: ["http_proxy", "HTTP_PROXY", "https_proxy"]))
        try #require(outcome.status == 0, "curl \(arguments): \(outcome)")
        var lines = outcome.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let code = Int(lines.removeLast()) ?? -1
        return (code, lines.joined(separator: "\n"))
    }

    @Test("every route with curl, over TCP and a Unix socket")
    func curlEveryRoute() async throws {
        try await Self.withTenant { gw, _, key in
            let path = "/tmp/og-http-\(UUID().uuidString.prefix(8)).sock"
            try gw.service.http.listen(.unix(path: path))
            for (base, extra) in [(gw.httpBase, [String]()), ("http://gateway", ["--unix-socket", path])] {
                func get(_ route: String) async throws -> (Int, JSONValue) {
                    let (status, body) = try await Self.curl(extra + [base + route])
                    return (status, (try? JSONParsing.parse(body)) ?? .string(body))
                }
                func post(_ route: String, _ body: String, key: String? = nil, type: String = "application/json")
                    async throws -> (Int, JSONValue?)
                {
                    var arguments = extra + ["-X", "POST", "-H", "Content-Type: \(type)", "--data-binary", body]
                    if let key { arguments += ["-H", "Authorization: Bearer \(key)"] }
                    let (status, text) = try await Self.curl(arguments + [base + route])
                    return (status, try? JSONParsing.parse(text))
                }
                #expect(try await get("/livez") == (200, ["status": "ok"]))
                let (readyStatus, ready) = try await get("/readyz")
                #expect(readyStatus == 200 && ready["status"]?.stringValue == "ok")
                let (metricsStatus, metrics) = try await Self.curl(extra + [base + "/metrics"])
                #expect(metricsStatus == 200 && metrics.contains("# TYPE offergate_rpc_requests_total counter"))
                let (docStatus, document) = try await get("/v1/openrpc.json")
                #expect(docStatus == 200 && document["openrpc"]?.stringValue?.hasPrefix("1.") == true)
                #expect(try await get("/nope").0 == 404)
                let ping = #"{"jsonrpc":"2.0","id":1,"method":"system.ping"}"#
                #expect(try await post("/v1/rpc", ping) == (200, ["jsonrpc": "2.0", "id": 1, "result": [:]]))
                let best =
                    #"{"jsonrpc":"2.0","id":2,"method":"offers.best","params":{"customerId":"c","productId":"monthly"}}"#
                let (unauthorized, refused) = try await post("/v1/rpc", best)
                #expect(unauthorized == 401 && refused?["error"]?["code"]?.int64Value == -32001)
                let (wrongStatus, _) = try await post("/v1/rpc", best, key: "og_not_a_key")
                #expect(wrongStatus == 401)
                let (okStatus, answer) = try await post("/v1/rpc", best, key: key)
                #expect(okStatus == 200 && answer?["result"]?["offer"] != nil, "\(String(describing: answer))")
                #expect(try await post("/v1/rpc", ping, type: "text/plain").0 == 415)
                #expect(try await post("/v1/rpc", #"{"jsonrpc":"2.0","method":"system.ping"}"#).0 == 204)
                let (appleStatus, apple) = try await post(
                    "/v1/apple/web-app/notifications", #"{"signedPayload":"not.a.jws"}"#)
                #expect(appleStatus == 400 && apple?["reason"]?.stringValue == "malformed_jws")
                #expect(try await post("/v1/apple/nobody/notifications", #"{"signedPayload":"a"}"#).0 == 404)
                #expect(try await Self.curl(extra + ["-X", "DELETE", base + "/v1/rpc"]).0 == 405)
            }
            #expect(!gw.logs.all.contains { $0.contains(key) }, "no API key in any log line")
        }
    }

    @Test("every route with Python's urllib and http.client; 100 requests on one kept-alive connection; pipelining")
    func pythonClients() async throws {
        try await Self.withTenant { gw, _, key in
            let outcome = try await runHTTPScript(
                "http_routes.py", [gw.httpBase, TestGateway.adminKey, key, "web-app"])
            #expect(outcome.status == 0, "\(outcome)")
            #expect(outcome.stdout.contains("ok"))
        }
    }

    @Test("the backends of docs/clients.md: Python's urllib and Node.js's fetch get the best offer over /v1/rpc")
    func documentedClients() async throws {
        try await Self.withTenant { gw, admin, key in
            let expected = try await admin.call(
                method: "offers.best", params: ["tenant": "web-app", "customerId": "docs-1", "productId": "monthly"])
            let offerId = try #require(expected["offer"]?["offerId"]?.stringValue)
            let environment = ChildProcess.environment(adding: ["OFFERGATE_URL": gw.httpBase, "OFFERGATE_API_KEY": key])
            let docs = PackagePaths.root.appendingPathComponent("docs/clients")
            let node = try #require(
                ["/usr/bin/node", "/usr/local/bin/node"].first { FileManager.default.isExecutableFile(atPath: $0) },
                "Node.js is missing: ops/deps installs nodejs")
            for (program, script) in [
                (try venvPython(), "python_backend.py"), (node, "node_backend.mjs"),
            ] {
                let run = try await ChildProcess.run(
                    program, [docs.appendingPathComponent(script).path, "docs-1", "monthly"], environment: environment)
                #expect(run.status == 0, "\(script): \(run)")
                let first = run.stdout.split(separator: "\n").first.map(String.init) ?? ""
                let answer = try JSONParsing.parse(first)
                #expect(answer["offer"]?.stringValue == offerId, "\(script): \(run.stdout)")
                #expect(answer["displayText"]?.stringValue == expected["offer"]?["displayText"]?.stringValue)
            }
        }
    }

    @Test("hostile HTTP: clean 4xx or a closed connection, the gateway alive, nothing stored")
    func hostile() async throws {
        var http = HTTPServerConfiguration()
        http.requestTimeout = .seconds(2)
        try await Self.withTenant(http: http) { gw, admin, key in
            let tenant = try await gw.tenantId("web-app")
            func rows() async throws -> [Int] {
                [
                    try await gw.count("SELECT count(*)::int8 FROM tenants"),
                    try await gw.count("SELECT count(*)::int8 FROM apple_notifications WHERE tenant_id = \(tenant)"),
                    try await gw.count("SELECT count(*)::int8 FROM issued_signatures WHERE tenant_id = \(tenant)"),
                ]
            }
            let before = try await rows()
            guard case .tcp(let host, let port) = gw.http else { return }
            let outcome = try await runHTTPScript(
                "http_hostile.py", [host, String(port), "web-app", "2", TestGateway.adminKey], timeout: .seconds(180))
            #expect(outcome.status == 0, "\(outcome)")
            // The obs-fold requests each carried a tenants.create: none was stored; their unfolded twin was.
            let slugs = try await gw.count("SELECT count(*)::int8 FROM tenants WHERE slug LIKE 'folded-%'")
            #expect(slugs == 0, "a request with obs-fold was acted on")
            #expect(try await gw.count("SELECT count(*)::int8 FROM tenants WHERE slug = 'unfolded-control'") == 1)
            // Alive: every route still answers, on new connections, over both transports.
            let client = try HTTPRPCClient(gw, apiKey: key)
            #expect(try await client.call(method: "catalog.get")["groups"]?.arrayValue?.count == 1)
            #expect(try await admin.call(method: "system.health")["status"]?.stringValue == "ok")
            #expect(try await rows() == [before[0] + 1] + before.dropFirst(), "nothing stored but the control tenant")
            #expect(gw.logs.all.contains { $0.contains("http request timed out") }, "the slow header was cut")
        }
    }

    @Test("/v1/rpc answers the whole method table exactly as the socket does (10,000+ frames, both transports)")
    func sameAnswersAsTheSocket() async throws {
        let pem = try SigningKey.generate().exportPKCS8PEM()
        let frames = HostileInputTests.frames(pem: pem)
        #expect(frames.count >= 10_000)
        /// One gateway set up as HostileInputTests sets it up; the sender `connect` makes answers each frame, one at
        /// a time and in order (so stateful frames, a tenants.create and its conflict, meet the same state).
        func answers(_ connect: (TestGateway) async throws -> Sender) async throws -> [String] {
            try await TestGateway.with(logLevel: .error) { gw in
                let admin = try await gw.admin()
                defer { admin.close() }
                for slug in ["fuzz-a", "victim-b"] {
                    try await gw.createTenant(slug, admin: admin)
                    try await gw.upsertStandardCatalog(tenant: slug, admin: admin)
                    _ = try await admin.call(
                        method: "keys.import",
                        params: [
                            "tenant": .string(slug), "keyId": "KEY1ABCDEF", "issuerId": "issuer",
                            "privateKeyPem": .string(pem),
                        ])
                }
                let sender = try await connect(gw)
                defer { sender.close() }
                var shapes: [String] = []
                for frame in frames { shapes.append(Self.shape(try await sender.send(frame))) }
                return shapes
            }
        }
        let overSocket = try await answers { gw in
            let client = try await gw.admin()
            return Sender(close: { client.close() }) { frame in
                try client.sendRaw(bytes: frame + [0x0A])
                return try await client.nextRawLine(timeout: .seconds(20))
            }
        }
        let overHTTP = try await answers { gw in
            let client = try HTTPRPCClient(gw, apiKey: TestGateway.adminKey)
            return Sender(close: {}) { frame in
                let response = try await client.post(frame)
                return response.status == 204 ? nil : response.body
            }
        }
        #expect(overSocket.count == frames.count && overHTTP.count == frames.count)
        var differences = 0
        for (index, (socket, http)) in zip(overSocket, overHTTP).enumerated() where socket != http {
            differences += 1
            if differences <= 5 {
                Issue.record(
                    "frame \(index) \(String(decoding: frames[index].prefix(160), as: UTF8.self)): socket \(socket), http \(http)"
                )
            }
        }
        #expect(differences == 0)
        #expect(Set(overSocket).count > 50, "the frames exercise many different answers")
    }

    /// Sends one frame and returns its answer (nil: none, as for notifications).
    struct Sender: Sendable {
        let close: @Sendable () -> Void
        let send: @Sendable ([UInt8]) async throws -> [UInt8]?

        init(close: @escaping @Sendable () -> Void, send: @escaping @Sendable ([UInt8]) async throws -> [UInt8]?) {
            self.close = close
            self.send = send
        }
    }

    /// What must agree between transports: per response its id and error code and reason, or the result's keys
    /// (values hold fresh API keys, nonces and signatures).
    static func shape(_ bytes: [UInt8]?) -> String {
        guard let bytes else { return "none" }
        guard let value = try? JSONParsing.parse(bytes) else { return "unparsable" }
        func one(_ response: JSONValue) -> String {
            let id = response["id"].map { $0.text } ?? "-"
            if let error = response["error"] {
                return "\(id) E\(error["code"]?.int64Value ?? 0):\(error["data"]?["reason"]?.stringValue ?? "")"
            }
            let keys = response["result"]?.objectValue.map { $0.keys.sorted().joined(separator: ",") } ?? "value"
            return "\(id) R:\(keys)"
        }
        if let array = value.arrayValue { return "[" + array.map(one).sorted().joined(separator: " | ") + "]" }
        return one(value)
    }

    @Test("rpc.discover and GET /v1/openrpc.json: one document, exactly the method table, valid OpenRPC 1.x")
    func openRPC() async throws {
        try await TestGateway.with { gw in
            let anonymous = try await gw.connect()
            defer { anonymous.close() }
            let discovered = try await anonymous.call(method: "rpc.discover")
            let response = try await gw.httpConnection().send("GET", "/v1/openrpc.json")
            #expect(response.status == 200)
            let served = try JSONParsing.parse(response.body)
            #expect(discovered == served)
            let names = (served["methods"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
            #expect(Set(names) == Set(Gateway.allMethods.map(\.name)), "the document is the dispatcher's table")
            #expect(names.count == Gateway.allMethods.count)
            // Every method of the table is described, and nothing else is.
            let table = Set(Gateway.allMethods.map(\.name))
            #expect(
                table.subtracting(MethodDocs.all.keys).isEmpty,
                "methods without a description: add them to MethodDocs.all (Sources/OfferGateway/OpenRPC/MethodDocs.swift)"
            )
            #expect(Set(MethodDocs.all.keys).subtracting(table).isEmpty, "descriptions of methods the gateway lacks")
            for method in served["methods"]?.arrayValue ?? [] {
                let access = Gateway.allMethods.first { $0.name == method["name"]?.stringValue }?.access
                #expect(method["x-access"]?.stringValue == access?.name)
            }
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("og-openrpc-\(UUID()).json")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data(response.body).write(to: file)
            let check = try await runHTTPScript("openrpc_check.py", [file.path])
            #expect(check.status == 0, "\(check)")
        }
    }

    @Test("the documented params are the ones each method reads: a missing required param is named by -32602")
    func documentedParamsAreRead() async throws {
        try await Self.withTenant { gw, admin, _ in
            for (name, doc) in MethodDocs.all.sorted(by: { $0.key < $1.key }) {
                for param in doc.params where param.required && param.name != "tenant" {
                    var params = JSONObject()
                    for other in doc.params where other.required && other.name != param.name {
                        params[other.name] = other.example
                    }
                    if doc.params.contains(where: { $0.name == "tenant" }) { params["tenant"] = "web-app" }
                    do {
                        _ = try await admin.call(method: name, params: .object(params))
                        Issue.record("\(name) without \(param.name) succeeded")
                    } catch let error as RPCError {
                        #expect(error.code == -32602, "\(name) without \(param.name): \(error)")
                        #expect(
                            error.data?["param"]?.stringValue?.hasPrefix("params.\(param.name)") == true,
                            "\(name) without \(param.name): \(error)")
                    }
                }
            }
        }
    }

    @Test("a Bearer key is read once, then found in memory; rotated here, or revoked by another writer, it is refused")
    func bearerKeysRemembered() async throws {
        try await Self.withTenant { gw, admin, key in
            let best: JSONValue = ["customerId": "key-cache-1", "productId": "monthly"]
            @Sendable func status(_ key: String) async throws -> Int {
                do {
                    _ = try await HTTPRPCClient(gw, apiKey: key).call(method: "offers.best", params: best)
                    return 200
                } catch let error as RPCError {
                    return error.code == -32001 ? 401 : Int(error.code)
                }
            }
            /// `offergate_cache_{hits,misses}_total{cache="api_keys"}` from /metrics.
            @Sendable func lookups() async throws -> (hits: Double, misses: Double) {
                let text = try await gw.httpConnection().send("GET", "/metrics").text
                return (
                    Self.sample(#"offergate_cache_hits_total{cache="api_keys"}"#, in: text) ?? -1,
                    Self.sample(#"offergate_cache_misses_total{cache="api_keys"}"#, in: text) ?? -1
                )
            }
            // The tenant's setup (catalog, signing key) is announced on the change feed too, and each announcement
            // forgets the keys: wait until one request's key stays remembered.
            #expect(try await status(key) == 200)
            #expect(
                try await eventually {
                    let before = try await lookups()
                    _ = try await status(key)
                    return try await lookups().hits == before.hits + 1
                })
            let before = try await lookups()
            for _ in 0..<5 { #expect(try await status(key) == 200) }
            let after = try await lookups()
            #expect(after.hits - before.hits >= 4, "\(before) → \(after): keys read again instead of remembered")

            // Rotated through this gateway: the old key is refused at once, the new one works.
            let rotated = try #require(
                try await admin.call(method: "tenants.rotateApiKey", params: ["tenant": "web-app"])["apiKey"]?
                    .stringValue)
            #expect(try await status(key) == 401)
            #expect(try await status(rotated) == 200)
            #expect(try await status(rotated) == 200)

            // Revoked by another writer (straight in the database): refused once the change feed announces it.
            let revoked = try await gw.count(
                """
                WITH r AS (UPDATE api_keys SET revoked_at = now() WHERE revoked_at IS NULL RETURNING 1)
                SELECT count(*)::int8 FROM r
                """)
            #expect(revoked == 1)
            #expect(try await eventually { try await status(rotated) == 401 })
            #expect(try await status(key) == 401)
        }
    }

    @Test("POST /v1/rpc answers at once, without a task, what a socket answers at once: the same bytes, counted")
    func answeredAtOnceOverHTTP() async throws {
        try await Self.withTenant { gw, admin, key in
            let params: JSONValue = ["customerId": "at-once-1", "productId": "monthly"]
            let client = try HTTPRPCClient(gw, apiKey: key)
            @Sendable func atOnce(_ method: String) async throws -> Int {
                let text = try await gw.httpConnection().send("GET", "/metrics").text
                return Int(Self.sample(#"offergate_rpc_answered_at_once_total{method="\#(method)"}"#, in: text) ?? 0)
            }
            let first = try await client.call(method: "offers.best", params: params)
            // Once the key stays remembered (the tenant's setup announcements forget it once or twice), a
            // remembered answer and a ping are answered at once; the same answer as over a socket.
            #expect(
                try await eventually {
                    let before = try await atOnce("offers.best")
                    let again = try await client.call(method: "offers.best", params: params)
                    let after = try await atOnce("offers.best")
                    return again == first && after == before + 1
                })
            let before = (best: try await atOnce("offers.best"), ping: try await atOnce("system.ping"))
            for _ in 0..<5 {
                #expect(try await client.call(method: "offers.best", params: params) == first)
                #expect(try await client.call(method: "system.ping") == [:])
            }
            #expect(try await atOnce("offers.best") - before.best >= 4)
            #expect(try await atOnce("system.ping") - before.ping >= 4)
            let overSocket = try await admin.call(
                method: "offers.best",
                params: ["tenant": "web-app", "customerId": "at-once-1", "productId": "monthly"])
            #expect(overSocket == first)
            // A key of the wrong shape is refused at once too: 401 with the JSON-RPC error, as before.
            let wrong = try await HTTPRPCClient(gw, apiKey: "og_short").post(
                JSONSerializer.serialize(
                    ["jsonrpc": "2.0", "id": 1, "method": "offers.best", "params": params] as JSONValue))
            #expect(wrong.status == 401 && wrong.header("www-authenticate") == "Bearer")
            #expect((try JSONParsing.parse(wrong.body))["error"]?["code"]?.int64Value == -32001)
        }
    }

    @Test("/metrics: parsed by prometheus_client; every family of point 3; bounded labels; counts follow requests")
    func metrics() async throws {
        try await Self.withTenant { gw, _, key in
            let client = try HTTPRPCClient(gw, apiKey: key)
            for _ in 0..<3 { _ = try await client.call(method: "system.ping") }
            _ = try await client.call(
                method: "offers.introEligibility",
                params: ["customerId": "metrics-secret-customer", "productId": "monthly", "transactionId": "t-1"])
            _ = try await client.call(
                method: "offers.best", params: ["customerId": "metrics-secret-customer", "productId": "monthly"])
            _ = try await client.call(
                method: "offers.best", params: ["customerId": "metrics-secret-customer", "productId": "monthly"])
            await #expect(throws: RPCError.self) {
                try await client.call(method: "codes.redeem", params: ["code": "NOSUCHCODE", "customerId": "c"])
            }
            _ = try await gw.httpConnection().send(
                "POST", "/v1/apple/web-app/notifications", headers: [("Content-Type", "application/json")],
                body: Array(#"{"signedPayload":"x.y.z"}"#.utf8))
            let response = try await gw.httpConnection().send("GET", "/metrics")
            #expect(response.header("content-type") == "text/plain; version=0.0.4; charset=utf-8")
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("og-metrics-\(UUID()).txt")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data(response.body).write(to: file)
            let parsed = try await runHTTPScript("metrics_check.py", [file.path])
            try #require(parsed.status == 0, "\(parsed)")
            let json = try JSONParsing.parse(parsed.stdout)
            let families = json["families"]?.objectValue ?? [:]
            for (name, type) in [
                ("offergate_rpc_requests", "counter"), ("offergate_rpc_errors", "counter"),
                ("offergate_rpc_answered_at_once", "counter"),
                ("offergate_rpc_request_duration_seconds", "histogram"), ("offergate_http_requests", "counter"),
                ("offergate_http_request_duration_seconds", "histogram"), ("offergate_db_pool_connections", "gauge"),
                ("offergate_code_redemptions", "counter"), ("offergate_signatures", "counter"),
                ("offergate_apple_data_ingested", "counter"), ("offergate_cache_hits", "counter"),
                ("offergate_cache_misses", "counter"), ("process_resident_memory_bytes", "gauge"),
                ("process_cpu_seconds", "counter"), ("process_open_fds", "gauge"),
            ] {
                #expect(families[name]?.stringValue == type, "\(name): \(String(describing: families[name]))")
            }
            func value(_ name: String, _ labels: JSONObject) -> Double? {
                for sample in json["samples"]?.arrayValue ?? [] where sample[0]?.stringValue == name {
                    if sample[1] == .object(labels) { return sample[2]?.doubleValue }
                }
                return nil
            }
            #expect(value("offergate_rpc_requests_total", ["method": "system.ping"]) == 3)
            #expect(value("offergate_signatures_total", ["format": "introEligibility"]) == 1)
            #expect(value("offergate_code_redemptions_total", ["outcome": "unknown_code"]) == 1)
            #expect(value("offergate_rpc_errors_total", ["method": "codes.redeem", "code": "-32040"]) == 1)
            #expect(
                value(
                    "offergate_apple_data_ingested_total", ["type": "notification", "result": "rejected_malformed_jws"])
                    == 1)
            #expect((value("offergate_cache_hits_total", ["cache": "decisions"]) ?? 0) >= 1)
            #expect((value("process_resident_memory_bytes", [:]) ?? 0) > 1_000_000)
            #expect((value("process_open_fds", [:]) ?? 0) > 3)
            #expect(value("offergate_http_requests_total", ["route": "rpc", "status": "200"]) ?? 0 >= 6)
            #expect(!response.text.contains("metrics-secret-customer"), "no customer id in any label")
            #expect(!response.text.contains(key), "no API key")
        }
    }
}

/// Stops and starts its own PostgreSQL cluster (no other suite uses it).
@Suite("HTTP: Apple's notifications", .serialized)
struct HTTPNotificationTests {
    static let server = TestServer.restartable("http-notifications")

    @Test("signed notifications over HTTP: 200 applied, 200 duplicate, 400 with the reason, 404, 503 down, 200 back")
    func notifications() async throws {
        let ca = try await AppleTestCA.shared()
        let verifier = try ca.verifier()
        try await TestGateway.with(server: Self.server, configure: { options, _ in options.appleVerifier = verifier }) {
            gw in
            let app = try await AppleTenant.setUp(gw, ca: ca, slug: "http-app")
            defer {
                app.client.close()
                app.admin.close()
            }
            let connection = try gw.httpConnection()
            @Sendable func post(_ slug: String, _ jws: String) async throws -> (Int, JSONValue) {
                let body = JSONSerializer.serialize(["signedPayload": .string(jws)])
                let response = try await connection.send(
                    "POST", "/v1/apple/\(slug)/notifications", headers: [("Content-Type", "application/json")],
                    body: body)
                return (response.status, (try? JSONParsing.parse(response.body)) ?? .null)
            }
            let p = app.payloads
            let token = UUID().uuidString.lowercased()
            func notification(_ id: String, signed: Double) throws -> String {
                let transaction = try app.signed(
                    p.transaction(
                        id: id, original: "h-1", purchase: days(signed), expires: days(signed + 30), token: token,
                        signed: days(signed)))
                return try app.signed(
                    p.notification(type: "DID_RENEW", transaction: transaction, signed: days(signed)))
            }
            let first = try notification("h-1", signed: -3)
            let (applied, body) = try await post("http-app", first)
            #expect(applied == 200 && body["applied"] == true && body["duplicate"] == false, "\(body.text)")
            #expect(body["customerId"]?.stringValue == token)
            let (again, duplicate) = try await post("http-app", first)
            #expect(again == 200 && duplicate["duplicate"] == true)
            // Rejected: a signature that does not verify, a payload for another app, not a JWS at all.
            let parts = first.split(separator: ".")
            // The signature's first byte changed (still valid base64url, 64 bytes): it no longer verifies.
            let signature = parts[2]
            let flipped = (signature.hasPrefix("A") ? "B" : "A") + String(signature.dropFirst())
            let forged = "\(parts[0]).\(parts[1]).\(flipped)"
            let (badSignature, bad) = try await post("http-app", String(forged))
            #expect(badSignature == 400 && bad["reason"]?.stringValue == "invalid_signature", "\(bad.text)")
            let other = ApplePayloads(bundleId: "com.example.someone-else")
            let (wrongApp, wrong) = try await post(
                "http-app", try app.signed(other.notification(signed: days(-1))))
            #expect(wrongApp == 400 && wrong["reason"]?.stringValue == "wrong_bundle_id", "\(wrong.text)")
            #expect(try await post("no-such-app", first).0 == 404)
            #expect(try await app.count("apple_notifications") == 1)
            // The database stops: 503 (Apple retries); once it is back, the same notification is applied.
            let second = try notification("h-2", signed: -2)
            try await Self.server.pg("stop")
            do {
                let (down, downBody) = try await post("http-app", second)
                #expect(down == 503 && downBody["retryable"] == true, "\(downBody.text)")
                let ready = try await connection.send("GET", "/readyz")
                #expect(ready.status == 503)
            } catch {
                try await Self.server.pg("start")
                throw error
            }
            try await Self.server.pg("start")
            let retried = await eventually(timeout: .seconds(20)) {
                (try? await post("http-app", second))?.0 == 200
            }
            #expect(retried, "Apple's retry is applied once the database is back")
            #expect(try await app.count("apple_notifications") == 2)
            #expect(try await connection.send("GET", "/readyz").status == 200)
        }
    }
}
