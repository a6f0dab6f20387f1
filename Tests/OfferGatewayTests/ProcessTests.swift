import Foundation
import JSONRPC
import OfferCrypto
import OfferGateway
import OfferTestSupport
import Postgres
import Testing

/// The built `offergate serve --stdio` binary, spawned with pipes.
struct SpawnedGateway {
    let process: Process
    let client: RPCClient
    let stdin: Pipe
    /// The child's stderr goes to a file: a pipe could be held open by unrelated children and never reach EOF.
    let stderrPath: String

    static var binary: URL { URL(fileURLWithPath: PackagePaths.binary("offergate")) }

    static func start(configuration: PostgresConfiguration, adminKey: String) async throws -> SpawnedGateway {
        #expect(FileManager.default.isExecutableFile(atPath: binary.path), "build first: swift build --build-tests")
        let process = Process()
        process.executableURL = binary
        process.arguments = ["serve", "--stdio", "--database-url", configuration.conninfo, "--log-level", "info"]
        var environment = ProcessInfo.processInfo.environment
        environment["OFFERGATE_ADMIN_KEY"] = adminKey
        environment["OFFERGATE_MASTER_KEY"] = Data(try SecureRandom.bytes(count: 32)).base64EncodedString()
        process.environment = environment
        let stdin = Pipe()
        let stdout = Pipe()
        let stderrPath = "/tmp/og-gwt-stderr-\(UUID().uuidString.prefix(8)).log"
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let stderr = try #require(FileHandle(forWritingAtPath: stderrPath))
        defer { try? stderr.close() }
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        let client = try await RPCClient.attach(
            reading: stdout.fileHandleForReading, writing: stdin.fileHandleForWriting)
        try? stdout.fileHandleForReading.close()
        return SpawnedGateway(process: process, client: client, stdin: stdin, stderrPath: stderrPath)
    }

    static func createTenantWithCatalog(_ admin: RPCClient) async throws {
        _ = try await admin.call(method: "tenants.create", params: ["slug": "sig", "bundleId": "com.example.sig"])
        _ = try await admin.call(method: "catalog.upsert", params: .object(Catalogs.standard(tenant: "sig")))
    }

    /// Closes stdin and waits (off the cooperative pool) for the exit status.
    func finish() async -> Int32 {
        client.finishWriting()
        try? stdin.fileHandleForWriting.close()
        return await exitStatus(of: process)
    }
}

@Suite("Spawned offergate over stdio")
struct StdioTests {
    @Test("serve --stdio: conformance, admin and tenant calls, exit 0 at EOF")
    func stdio() async throws {
        try await TestDatabase.with { configuration in
            let adminKey = "og_admin_stdio_" + UUID().uuidString
            let gw = try await SpawnedGateway.start(configuration: configuration, adminKey: adminKey)
            let client = gw.client
            #expect(try await client.call(method: "system.ping", timeout: .seconds(20)) == .object([:]))
            let parse = try await client.rawExchange("{not json")
            #expect(parse["error"]?["code"]?.int64Value == -32700)
            #expect(parse["id"] == .null)
            let empty = try await client.rawExchange("[]")
            #expect(empty["error"]?["code"]?.int64Value == -32600)
            let tooLarge = try await client.rawExchange(
                #"{"jsonrpc":"2.0","id":"x","method":"system.ping","params":[""#
                    + String(repeating: "a", count: 1_100_000) + #""]}"#)
            #expect(tooLarge["error"]?["data"]?["reason"]?.stringValue == "frame_too_large")
            await expectRPCError(-32601) { try await client.call(method: "nope") }
            await expectRPCError(-32001) { try await client.call(method: "catalog.get", params: [:]) }
            _ = try await client.call(method: "session.authenticate", params: ["apiKey": .string(adminKey)])
            let created = try await client.call(
                method: "tenants.create", params: ["slug": "stdio-app", "bundleId": "com.example.stdio"])
            let apiKey = try #require(created["apiKey"]?.stringValue)
            await expectRPCError(-32009) {
                try await client.call(method: "tenants.create", params: ["slug": "stdio-app", "bundleId": "x"])
            }
            await expectRPCError(-32602, param: "params.bundleId") {
                try await client.call(method: "tenants.create", params: ["slug": "other"])
            }
            var catalog = Catalogs.standard(tenant: "stdio-app")
            catalog["tenant"] = "stdio-app"
            _ = try await client.call(method: "catalog.upsert", params: .object(catalog))
            let best = try await client.call(
                method: "offers.best", params: ["tenant": "stdio-app", "customerId": "c1", "productId": "yearly"])
            #expect(best["offer"]?["displayText"]?.stringValue == "1 month free, then $39.99/year")
            // pipelined: ten requests written at once, all answered
            let lines = (0..<10).map { #"{"jsonrpc":"2.0","id":"p\#($0)","method":"system.ping"}"# }.joined(
                separator: "\n")
            try client.sendRaw(lines)
            var ids = Set<String>()
            for _ in 0..<10 {
                ids.insert(try #require(try await client.nextRawValue(timeout: .seconds(30)))["id"]?.stringValue ?? "")
            }
            #expect(ids == Set((0..<10).map { "p\($0)" }))
            // a request still in flight at EOF is answered before exit
            try client.sendRaw(#"{"jsonrpc":"2.0","id":"last","method":"system.health"}"#)
            let status = await gw.finish()
            let last = try await client.nextRawValue(timeout: .seconds(30))
            #expect(last?["id"]?.stringValue == "last")
            #expect(last?["result"]?["database"]?.stringValue == "ok")
            #expect(status == 0)
            let log = String(decoding: FileManager.default.contents(atPath: gw.stderrPath) ?? Data(), as: UTF8.self)
            unlink(gw.stderrPath)
            #expect(log.contains("\"level\""), "logs go to stderr as JSON lines")
            #expect(!log.contains(adminKey) && !log.contains(apiKey))
        }
    }
}

@Suite("Spawned offergate on a socket")
struct SignalTests {
    @Test("SIGTERM: stop accepting, finish in-flight requests, exit 0")
    func sigterm() async throws {
        try await TestDatabase.with { configuration in
            let path = "/tmp/og-gwt-\(UUID().uuidString.prefix(8)).sock"
            var environment = ProcessInfo.processInfo.environment
            let adminKey = "og_admin_sigterm_" + UUID().uuidString
            environment["OFFERGATE_ADMIN_KEY"] = adminKey
            environment["OFFERGATE_MASTER_KEY"] = Data(try SecureRandom.bytes(count: 32)).base64EncodedString()
            let logPath = "/tmp/og-gwt-stderr-\(UUID().uuidString.prefix(8)).log"
            defer { unlink(logPath) }
            let process = try ChildProcess.spawn(
                SpawnedGateway.binary.path,
                // Three loops: the request in flight is on a loop other than the accepting one (`holder` below).
                ["serve", "--listen", "unix:\(path)", "--database-url", configuration.conninfo, "--event-loops", "3"],
                environment: environment, stderr: logPath)
            defer { if process.isRunning { process.kill() } }
            let up = await eventually(timeout: .seconds(20)) {
                guard FileManager.default.fileExists(atPath: path),
                    let client = try? await RPCClient.connect(to: "unix:\(path)")
                else { return false }
                defer { client.close() }
                return (try? await client.call(method: "system.ping", timeout: .seconds(5))) == .object([:])
            }
            #expect(up)
            // Each connection goes to the loop serving the fewest: an idle one first takes (at most) the first.
            let holder = try await RPCClient.connect(to: "unix:\(path)")
            defer { holder.close() }
            #expect(try await holder.call(method: "system.ping") == .object([:]))
            let client = try await RPCClient.connect(to: "unix:\(path)")
            defer { client.close() }
            #expect(try await client.call(method: "system.health")["database"] == "ok")
            let names = try threadNames(of: process.pid)
            #expect(names.filter { $0 == "rpc-server-loop" }.count == 3)
            // The change feed's listener shows under its own name too (`top -H`, `perf`).
            #expect(names.contains("pg-listener"))
            _ = try await client.call(method: "session.authenticate", params: ["apiKey": .string(adminKey)])
            try await SpawnedGateway.createTenantWithCatalog(client)
            // A request in flight when SIGTERM arrives is still answered. To make "in flight" certain rather than
            // a race, the test holds the lock catalog.upsert takes (the tenant row) until shutdown has begun.
            let blocker = try await PostgresConnection.connect(configuration: configuration)
            try await blocker.query("BEGIN")
            try await blocker.query("SELECT 1 FROM tenants WHERE slug = 'sig' FOR UPDATE")
            let products: [JSONValue] = (0..<50).map {
                [
                    "id": .string("bulk.\($0)"), "groupId": "premium", "period": "P1M", "price": "1.99",
                    "currency": "USD",
                    "level": .int(3 + $0),
                ]
            }
            let slow = JSONValue.object([
                "jsonrpc": "2.0", "id": "slow", "method": "catalog.upsert",
                "params": ["tenant": "sig", "products": .array(products)],
            ])
            try client.sendRaw(slow.text)
            // once a ping sent after it is answered, the server has read and started the upsert
            #expect(try await client.call(method: "system.ping") == .object([:]))
            process.terminate()
            let shuttingDown = await eventually(timeout: .seconds(20)) {
                String(decoding: FileManager.default.contents(atPath: logPath) ?? Data(), as: UTF8.self)
                    .contains("shutting down")
            }
            #expect(shuttingDown)
            try await blocker.query("COMMIT")
            await blocker.close()
            let answer = try await client.nextRawValue(timeout: .seconds(30))
            #expect(
                answer?["result"]?["imported"]?["products"]?.int64Value == 50, "\(answer?.text.prefix(300) ?? "nil")")
            let status = await process.wait()
            #expect(status == 0)
            #expect(process.termination() == .exit(0))
            // the log shows the upsert finishing after shutdown began (it really was in flight)
            let log = String(decoding: FileManager.default.contents(atPath: logPath) ?? Data(), as: UTF8.self)
                .split(separator: "\n")
            let shutdownLine = log.firstIndex { $0.contains("shutting down") }
            let upsertLine = log.firstIndex { $0.contains("\"rpc.method\":\"catalog.upsert\"") && $0.contains("slow") }
            #expect(shutdownLine != nil && upsertLine != nil)
            if let shutdownLine, let upsertLine { #expect(shutdownLine < upsertLine, "\(log.suffix(6))") }
            #expect((try? await RPCClient.connect(to: "unix:\(path)")) == nil, "no longer accepting")
        }
    }
}

/// Stops and starts its own PostgreSQL cluster (no other suite uses it).
@Suite("Database down", .serialized)
struct DatabaseDownTests {
    static let server = TestServer.restartable("gateway-down")

    @Test("-32050 retryable and health 'down' while PostgreSQL is stopped; recovery after it starts")
    func databaseDown() async throws {
        try await TestGateway.with(server: DatabaseDownTests.server) { gw in
            let admin = try await gw.admin()
            defer { admin.close() }
            let key = try await gw.createTenant("acme", admin: admin)
            try await gw.upsertStandardCatalog(tenant: "acme", admin: admin)
            let client = try await gw.tenant(key)
            defer { client.close() }
            _ = try await client.call(method: "customers.get", params: ["customerId": "c1"])
            try await DatabaseDownTests.server.pg("stop")
            // c1's history is now in the gateway's per-process cache (which may answer until the listener notices
            // the outage), so ask for a customer that only the database knows: that must fail with -32050.
            do {
                let error = await expectRPCError(-32050) {
                    try await client.call(method: "customers.get", params: ["customerId": "c2"], timeout: .seconds(20))
                }
                #expect(error?.retryable == true)
                let health = try await client.call(method: "system.health", timeout: .seconds(20))
                #expect(health["database"]?.stringValue == "down")
                #expect(health["status"]?.stringValue == "degraded")
                #expect(try await client.call(method: "system.ping") == .object([:]))
            } catch {
                try await DatabaseDownTests.server.pg("start")
                throw error
            }
            try await DatabaseDownTests.server.pg("start")
            let recovered = await eventually(timeout: .seconds(15)) {
                (try? await client.call(method: "customers.get", params: ["customerId": "c2"], timeout: .seconds(5)))
                    != nil
            }
            #expect(recovered)
            #expect(try await client.call(method: "system.health")["database"]?.stringValue == "ok")
            #expect(!gw.logs.all.contains { $0.contains(key) })
        }
    }
}
