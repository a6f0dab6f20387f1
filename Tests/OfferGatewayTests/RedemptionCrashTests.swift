import Foundation
import JSONRPC
import OfferCrypto
import OfferTestSupport
import Synchronization
import Testing

@testable import OfferGateway
@testable import OfferStore

/// A redemption storm that keeps going until told to stop, recording what clients saw. Every request carries an
/// idempotency key (`<prefix>-k<n>` for customer `<prefix>-<n>`). Transport failures (the gateway died) end a
/// connection's loop; RPC errors are counted by code. With `retryUnavailable`, a request answered -32050 is sent
/// again unchanged, as a client riding out a database failover does (each -32050 is still counted).
final class RedemptionStorm: Sendable {
    struct Seen: Sendable {
        var successes: [String] = []
        /// Acknowledged redemptions by request number `n`: the id, when, whether a replay, after how many -32050.
        var acknowledgements: [Int: Acknowledgement] = [:]
        /// Acknowledged redemptions by request number `n`: the redemption id.
        var acknowledged: [Int: String] { acknowledgements.mapValues(\.id) }
        var errors: [Int: Int] = [:]
        var transportFailures = 0
    }

    struct Acknowledgement: Sendable {
        let id: String
        let at: ContinuousClock.Instant
        let replayed: Bool
        let retries: Int
    }

    let seen = Mutex(Seen())
    let stopped = Atomic<Bool>(false)
    let nextCustomer = Atomic<Int>(0)
    /// Connections that have authenticated and are redeeming.
    let ready = Atomic<Int>(0)
    let prefix: String

    init(prefix: String) {
        self.prefix = prefix
    }

    var successes: Int { seen.withLock { $0.successes.count } }

    /// Every answer and failure so far: what a wait on the storm counts as progress.
    var answered: Int {
        seen.withLock { $0.successes.count + $0.errors.values.reduce(0, +) + $0.transportFailures }
    }

    /// The params of request `n`.
    func params(code: String, _ n: Int) -> JSONValue {
        ["code": .string(code), "customerId": .string("\(prefix)-\(n)"), "idempotencyKey": .string("\(prefix)-k\(n)")]
    }

    /// Runs `connections` loops on `socket` until `stop()` (or the gateway dies).
    func run(socket: String, apiKey: String, code: String, connections: Int, retryUnavailable: Bool = false) async {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<connections {
                group.addTask {
                    guard let client = try? await RPCClient.connect(to: "unix:" + socket),
                        (try? await client.call(method: "session.authenticate", params: ["apiKey": .string(apiKey)]))
                            != nil
                    else {
                        self.seen.withLock { $0.transportFailures += 1 }
                        return
                    }
                    self.ready.add(1, ordering: .relaxed)
                    while !self.stopped.load(ordering: .relaxed) {
                        let n = self.nextCustomer.wrappingAdd(1, ordering: .relaxed).oldValue
                        do {
                            var answer: JSONValue?
                            var retries = 0
                            while answer == nil {
                                do {
                                    answer = try await client.call(
                                        method: "codes.redeem", params: self.params(code: code, n),
                                        timeout: .seconds(20))
                                } catch let error as RPCError where error.code == -32050 && retryUnavailable {
                                    self.seen.withLock { $0.errors[error.code, default: 0] += 1 }
                                    retries += 1
                                    try await Task.sleep(for: .milliseconds(20))
                                }
                            }
                            if let id = answer?["redemptionId"]?.stringValue {
                                let acknowledgement = Acknowledgement(
                                    id: id, at: .now, replayed: answer?["replayed"]?.boolValue == true,
                                    retries: retries)
                                self.seen.withLock {
                                    $0.successes.append(id)
                                    $0.acknowledgements[n] = acknowledgement
                                }
                            }
                        } catch let error as RPCError {
                            self.seen.withLock { $0.errors[error.code, default: 0] += 1 }
                        } catch {
                            self.seen.withLock { $0.transportFailures += 1 }
                            break
                        }
                    }
                    client.close()
                }
            }
        }
    }

    func stop() { stopped.store(true, ordering: .relaxed) }
}

@Suite("Redemption survives crashes", .serialized)
struct RedemptionCrashTests {
    /// This suite's own cluster (it restarts PostgreSQL mid-storm): no other suite is disturbed.
    static let server = TestServer.restartable("redemption-restart")

    /// A spawned `offergate serve` on a Unix socket.
    struct SpawnedGateway {
        let process: ChildProcess
        let socket: String

        static func start(
            databaseURL: String, adminKey: String, masterKey: String, extraArguments: [String] = []
        ) async throws -> SpawnedGateway {
            let binary = PackagePaths.binary("offergate")
            guard FileManager.default.isExecutableFile(atPath: binary) else {
                throw MissingEnvironment(
                    variable: "the built gateway (run `swift build`): \(binary)")
            }
            let socket = RedemptionSupport.socketPath()
            var environment = ProcessInfo.processInfo.environment
            environment["OFFERGATE_ADMIN_KEY"] = adminKey
            environment["OFFERGATE_MASTER_KEY"] = masterKey
            let process = try ChildProcess.spawn(
                binary,
                [
                    "serve", "--listen", "unix:" + socket, "--database-url", databaseURL, "--pool-size", "8",
                    "--log-level", "error", "--quiet-requests",
                ] + extraArguments,
                environment: environment)
            let up = await eventually(timeout: .seconds(20)) {
                guard let client = try? await RPCClient.connect(to: "unix:" + socket) else { return false }
                defer { client.close() }
                return (try? await client.call(method: "system.ping", params: [:])) != nil
            }
            guard up else {
                let exited = process.exitStatus().map { "it exited with status \($0)" } ?? "it was still running"
                process.kill()
                throw TestCommandError("offergate serve did not answer system.ping on \(socket) within 20 s; \(exited)")
            }
            return SpawnedGateway(process: process, socket: socket)
        }

        func client(apiKey: String) async throws -> RPCClient {
            let client = try await RPCClient.connect(to: "unix:" + socket)
            _ = try await client.call(method: "session.authenticate", params: ["apiKey": .string(apiKey)])
            return client
        }

        /// Never leaves a gateway behind, whatever the test did.
        func killIfRunning() {
            if process.isRunning { process.kill() }
            unlink(socket)
        }

        func kill9() async {
            process.kill()
            await waitForExit()
        }

        func terminate() async {
            process.terminate()
            await waitForExit()
        }

        /// Polls (never blocks a cooperative thread in waitpid), for 15 s at most.
        private func waitForExit() async {
            _ = await eventually(timeout: .seconds(15)) { !process.isRunning }
            unlink(socket)
        }
    }

    @Test func sigkillMidStormLosesNoAcknowledgedRedemptionAndNeverOverRedeems() async throws {
        try await TestDatabase.withConninfo { url in
            let adminKey = "og_admin_crash_test"
            let padded = Data(try SecureRandom.bytes(count: 32)).base64EncodedString()
            let limit = 400
            let first = try await SpawnedGateway.start(databaseURL: url, adminKey: adminKey, masterKey: padded)
            defer { first.killIfRunning() }
            let admin = try await first.client(apiKey: adminKey)
            let apiKey = try await RedemptionSupport.seedTenant(admin, slug: "crash")
            _ = try await admin.call(
                method: "campaigns.create",
                params: [
                    "tenant": "crash", "campaignId": "c", "offerId": "code1", "kind": "custom", "code": "CRASH",
                    "totalLimit": .int(limit),
                ])
            admin.close()

            // Storm the first gateway; SIGKILL it once some redemptions were acknowledged.
            let storm1 = RedemptionStorm(prefix: "a")
            async let done1: Void = storm1.run(socket: first.socket, apiKey: apiKey, code: "CRASH", connections: 32)
            let progressed = await eventually(timeout: .seconds(20)) { storm1.successes >= 100 }
            await first.kill9()
            storm1.stop()
            await done1
            #expect(progressed)
            let before = storm1.seen.withLock { $0 }
            #expect(before.successes.count >= 100)
            #expect(before.successes.count < limit)

            // Restart and storm until the limit is reached.
            let second = try await SpawnedGateway.start(databaseURL: url, adminKey: adminKey, masterKey: padded)
            defer { second.killIfRunning() }
            let storm2 = RedemptionStorm(prefix: "b")
            async let done2: Void = storm2.run(socket: second.socket, apiKey: apiKey, code: "CRASH", connections: 32)
            // However slowly a loaded machine redeems; a storm that stops answering fails after 20 s.
            let exhausted = await eventually(progressing: { storm2.answered }, stall: .seconds(20)) {
                storm2.seen.withLock { ($0.errors[-32041] ?? 0) >= 64 }
            }
            storm2.stop()
            await done2
            await second.terminate()
            #expect(exhausted)
            let after = storm2.seen.withLock { $0 }
            #expect(Set(after.errors.keys).isSubset(of: [-32041]))

            let database = try RedemptionDatabaseOpener.open(url)
            let rows = try await RedemptionRows.read(database, campaignId: "c")
            let stored = Set(
                try await database.pool.query("SELECT redemption_id::text FROM redemptions").map {
                    try $0.decode(String.self, at: 0)
                })
            await database.pool.close()
            // Every acknowledged success is durable; the counter matches the rows; the limit holds exactly.
            #expect(Set(before.successes).isSubset(of: stored))
            #expect(Set(after.successes).isSubset(of: stored))
            #expect(rows.live == rows.counter)
            #expect(rows.live == limit)
            #expect(before.successes.count + after.successes.count <= limit)
        }
    }

    @Test func postgresRestartMidStormRecoversWithoutOverRedeeming() async throws {
        try await TestDatabase.withConninfo(on: RedemptionCrashTests.server) { url in
            let gateways = try await RedemptionGateways.start(url: url, count: 2, poolSize: 6)
            do {
                let admin = try await gateways.client()
                let apiKey = try await RedemptionSupport.seedTenant(admin, slug: "pgrestart")
                let limit = 5000
                _ = try await admin.call(
                    method: "campaigns.create",
                    params: [
                        "tenant": "pgrestart", "campaignId": "c", "offerId": "code1", "kind": "custom",
                        "code": "BOUNCE",
                        "totalLimit": .int(limit),
                    ])
                let storm = RedemptionStorm(prefix: "r")
                async let done1: Void = storm.run(
                    socket: gateways.sockets[0], apiKey: apiKey, code: "BOUNCE", connections: 16)
                async let done2: Void = storm.run(
                    socket: gateways.sockets[1], apiKey: apiKey, code: "BOUNCE", connections: 16)
                // Every connection authenticated before PostgreSQL goes away (authenticating needs it).
                #expect(
                    await eventually(timeout: .seconds(20)) {
                        storm.successes >= 50 && storm.ready.load(ordering: .relaxed) == 32
                    })
                try await RedemptionCrashTests.server.pg("restart")
                let beforeRecovery = storm.successes
                // The gateways recover by themselves: successes resume until the limit is reached.
                let exhausted = await eventually(progressing: { storm.answered }, stall: .seconds(60)) {
                    storm.seen.withLock { ($0.errors[-32041] ?? 0) >= 32 }
                }
                storm.stop()
                #expect(exhausted)
                #expect(storm.successes > beforeRecovery)
                _ = await (done1, done2)
                let seen = storm.seen.withLock { $0 }
                #expect(seen.transportFailures == 0)
                #expect(Set(seen.errors.keys).isSubset(of: [-32050, -32041]))
                #expect((seen.errors[-32050] ?? 0) > 0, "clients should have seen -32050 while PostgreSQL restarted")
                let database = try gateways.database()
                let rows = try await RedemptionRows.read(database, campaignId: "c")
                let stored = Set(
                    try await database.pool.query("SELECT redemption_id::text FROM redemptions").map {
                        try $0.decode(String.self, at: 0)
                    })
                await database.pool.close()
                #expect(Set(seen.successes).isSubset(of: stored))
                #expect(rows.live == rows.counter)
                // Failed COMMITs have unknown outcomes: rows may exceed acknowledgements, never the limit.
                #expect(rows.live == limit)
                #expect(seen.successes.count <= limit)
                await gateways.shutdown()
            } catch {
                await gateways.shutdown()
                throw error
            }
        }
    }
}

enum RedemptionDatabaseOpener {
    static func open(_ url: String) throws -> OfferStore.OfferDatabase {
        try OfferStore.OfferDatabase.connect(url: url, maxConnections: 2)
    }
}
