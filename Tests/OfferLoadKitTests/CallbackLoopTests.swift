import Foundation
import Synchronization
import Testing

@testable import OfferLoadKit

#if canImport(Glibc)
    import Glibc
#endif

/// A connection answering through callbacks from its own thread, as `RPCLoadConnection` does from the client event
/// loop: the closed loop must keep `depth` calls in flight, count every answer, and retire a slot on a lost
/// connection. It paces the open loop on that same thread (a queue's timer), as the client loop's timerfd does.
final class ThreadedCallbackConnection: PacedLoadConnection {
    private let queue = DispatchQueue(label: "fake-callback-connection")
    private let state = Mutex<(calls: Int, inFlight: Int, maxInFlight: Int)>((0, 0, 0))
    let respond: @Sendable (Int) -> CallOutcome

    init(respond: @escaping @Sendable (Int) -> CallOutcome = { _ in .success }) { self.respond = respond }

    var calls: Int { state.withLock { $0.calls } }
    var maxInFlight: Int { state.withLock { $0.maxInFlight } }
    /// How many times an open loop was paced on this connection, and its ticks.
    let pacings = Atomic<Int>(0)
    let ticks = Atomic<Int>(0)

    func pace(after nanoseconds: UInt64, _ tick: @escaping @Sendable () -> UInt64?) async throws {
        pacings.add(1, ordering: .relaxed)
        arm(after: nanoseconds, tick)
    }

    private func arm(after nanoseconds: UInt64, _ tick: @escaping @Sendable () -> UInt64?) {
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [self] in
            ticks.add(1, ordering: .relaxed)
            if let next = tick() { arm(after: next, tick) }
        }
    }

    func call(_ request: LoadRequest) async -> CallOutcome {
        Issue.record("the load loops should use start(_:_:) on a callback connection")
        return .transportError("unexpected")
    }

    func start(_ request: LoadRequest, _ done: @escaping @Sendable (CallOutcome) -> Void) {
        let n = state.withLock { s -> Int in
            s.calls += 1
            s.inFlight += 1
            s.maxInFlight = max(s.maxInFlight, s.inFlight)
            return s.calls
        }
        queue.async { [self] in
            let outcome = respond(n)
            state.withLock { $0.inFlight -= 1 }
            done(outcome)
        }
    }
}

final class CallbackConnector: LoadConnector {
    let connections: [ThreadedCallbackConnection]
    private let next = Mutex(0)
    init(_ connections: [ThreadedCallbackConnection]) { self.connections = connections }
    func connect(address: String) async throws -> any LoadConnection {
        let i = next.withLock { n -> Int in
            defer { n += 1 }
            return n
        }
        return connections[i % connections.count]
    }
}

@Suite struct CallbackLoopTests {
    @Test func closedLoopOverCallbacksCountsEveryAnswerAndKeepsTheDepth() async throws {
        let connections = [ThreadedCallbackConnection(), ThreadedCallbackConnection()]
        let plan = LoadPlan(model: .closed(connections: 2, depth: 4), stop: .requests(2_000), targets: ["x", "y"])
        let indices = IndexLog()
        let result = try await LoadRunner(connector: CallbackConnector(connections)).run(plan) { i in
            indices.add(i)
            return LoadRequest(method: "system.ping", params: [:])
        }
        #expect(result.measuredRequests == 2_000)
        #expect(result.measuredSuccesses == 2_000)
        #expect(result.latency.count == 2_000)
        #expect(result.errors.isEmpty)
        // Every index handed out once, in one run of 0..<2000; no connection ever had more than its depth out.
        #expect(indices.sorted == Array(0..<2_000))
        #expect(connections.map(\.calls).reduce(0, +) == 2_000)
        #expect(connections.allSatisfy { $0.maxInFlight <= 4 })
        let cpu = try #require(result.cpu)
        #expect(cpu.requests == 2_000)
        #expect(cpu.gatewayNanoseconds == nil)
    }

    @Test func openLoopOverCallbacksSendsEveryScheduledRequestAndWaitsForEveryAnswer() async throws {
        // Answers take a while (2 ms), so requests are still out when the schedule ends: the run must wait for
        // them, and a connection's in-flight cap (3) must hold with no task per request.
        let connections = [
            ThreadedCallbackConnection(respond: { _ in
                usleep(2_000)
                return .success
            }),
            ThreadedCallbackConnection(respond: { n in n % 10 == 0 ? .rpcError(code: -32029) : .success }),
        ]
        let plan = LoadPlan(
            model: .open(connections: 2, rate: 2_000, maxInFlight: 3), stop: .requests(400), targets: ["x", "y"])
        let result = try await LoadRunner(connector: CallbackConnector(connections)).run(plan) { _ in
            LoadRequest(method: "system.ping", params: [:])
        }
        #expect(result.measuredRequests == 400)
        #expect(result.latency.count == 400)
        #expect(connections.map(\.calls) == [200, 200])
        #expect(result.errors == ["-32029": 20])
        #expect(result.measuredSuccesses == 380)
        #expect(connections.allSatisfy { $0.maxInFlight <= 3 })
        // Sent by one paced sender on the first connection's thread, a tick for many requests; no request early.
        #expect(connections.map { $0.pacings.load(ordering: .relaxed) } == [1, 0])
        #expect(connections[0].ticks.load(ordering: .relaxed) > 1)
        #expect(result.measuredNanoseconds >= 399 * 1_000_000_000 / 2_000)
    }

    @Test func aLostConnectionRetiresItsSlotsAndErrorsAreCountedByCode() async throws {
        // The healthy connection answers nothing until the dying one has had its 7 calls, so the split does not
        // depend on which queue runs first (a token passed from answer to answer).
        let dyingDone = DispatchSemaphore(value: 0)
        let healthy = ThreadedCallbackConnection { n in
            _ = dyingDone.wait(timeout: .now() + 60)
            dyingDone.signal()
            return n % 10 == 0 ? .rpcError(code: -32041) : .success
        }
        let dying = ThreadedCallbackConnection { n in
            if n == 7 { dyingDone.signal() }
            return n > 5 ? .transportError("connection reset") : .success
        }
        let plan = LoadPlan(model: .closed(connections: 2, depth: 2), stop: .requests(100), targets: ["x", "y"])
        let result = try await LoadRunner(connector: CallbackConnector([healthy, dying])).run(plan) { _ in
            LoadRequest(method: "codes.redeem", params: [:])
        }
        // The dying connection answers 5 times, then each of its 2 slots gets one transport error and stops; the
        // healthy connection's slots send the rest, every tenth answered -32041.
        #expect(result.measuredRequests == 100)
        #expect(dying.calls == 7)
        #expect(healthy.calls == 93)
        #expect(result.errors == ["transport": 2, "-32041": 9])
        #expect(result.measuredSuccesses == 89)
    }
}

@Suite struct ProcessCPUTests {
    @Test func statFieldsAreCountedFromTheLastParenthesis() {
        // comm may hold spaces and parentheses; utime (14) = 1234, stime (15) = 56.
        let line = "4242 (offer load) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 9 0 77 1 2"
        #expect(ProcessCPU.ticks(statLine: line) == 1_290)
        #expect(ProcessCPU.ticks(statLine: "garbage") == nil)
    }

    @Test func listeningSocketsAreFoundByPortInAProcNetTable() {
        let table = """
              sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
               0: 0100007F:1CF3 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 98765 1 0
               1: 0100007F:1CF3 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 98766 1 0
               2: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 11111 1 0
            """
        // 0x1CF3 = 7411: only the listening (0A) row counts, not the established connection on the same port.
        #expect(ProcessCPU.listeningInodes(table: table, port: 7411) == ["98765"])
        #expect(ProcessCPU.listeningInodes(table: table, port: 80) == ["11111"])
        #expect(ProcessCPU.listeningInodes(table: table, port: 81).isEmpty)
    }

    @Test func theServerOfALocalSocketIsFoundOverUnixAndTCP() throws {
        // This process listens itself, so the pid found must be its own.
        let unixPath = "/tmp/pcpu-\(UUID().uuidString.prefix(8)).sock"
        let unix = try Self.listen(domain: AF_UNIX, unixPath: unixPath)
        defer {
            close(unix.fd)
            unlink(unixPath)
        }
        #expect(ProcessCPU.serverPID(of: "unix:\(unixPath)") == getpid())
        let tcp = try Self.listen(domain: AF_INET, unixPath: nil)
        defer { close(tcp.fd) }
        #expect(ProcessCPU.serverPID(of: "tcp:127.0.0.1:\(tcp.port)") == getpid())
        #expect(ProcessCPU.serverPID(of: "http://localhost:\(tcp.port)/v1") == getpid())
        #expect(ProcessCPU.serverPIDs(of: ["unix:\(unixPath)", "tcp:127.0.0.1:\(tcp.port)"]) == [getpid()])
        // Not on this host, or nothing there: not measured rather than guessed.
        #expect(ProcessCPU.serverPID(of: "tcp:192.0.2.1:\(tcp.port)") == nil)
        #expect(ProcessCPU.serverPID(of: "unix:/tmp/nothing-listens-here.sock") == nil)
        // /proc/net/tcp comes a page (about 27 sockets) per read: the whole table must be read.
        let many = try (0..<60).map { _ in try Self.listen(domain: AF_INET, unixPath: nil) }
        defer { for socket in many { close(socket.fd) } }
        #expect(ProcessCPU.serverPID(of: "tcp:127.0.0.1:\(many.last!.port)") == getpid())
        // Own CPU is counted, and so is this process's through /proc.
        let before = ProcessCPU.ownNanoseconds()
        var x: UInt64 = 1
        for i in 0..<20_000_000 { x = x &* 6_364_136_223_846_793_005 &+ UInt64(i) }
        #expect(x != 0)
        #expect(ProcessCPU.ownNanoseconds() > before)
        #expect((ProcessCPU.nanoseconds(ofProcess: getpid()) ?? 0) > 0)
    }

    static func listen(domain: Int32, unixPath: String?) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(domain, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        if let unixPath {
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                for (i, b) in unixPath.utf8.enumerated() { raw[i] = b }
            }
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            try #require(rc == 0)
        } else {
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            try #require(rc == 0)
        }
        try #require(Glibc.listen(fd, 8) == 0)
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return (fd, UInt16(bigEndian: bound.sin_port))
    }
}
