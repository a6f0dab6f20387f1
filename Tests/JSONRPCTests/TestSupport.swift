import Foundation
import Synchronization
import Testing

@testable import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// Per-connection state of the test handler: counts concurrency.
final class TestSession: Sendable {
    let counters = Mutex<(current: Int, max: Int, notifications: Int)>((0, 0, 0))
}

/// A handler with methods that echo, sleep, fail, and measure per-connection concurrency.
final class TestHandler: RPCHandler {
    let endedSessions = Atomic<Int>(0)
    let globalMax = Mutex<Int>(0)
    /// A "sleep" started; "waitForCancel" started waiting; its task was cancelled; a session ended.
    let sleeping = TestEvent()
    let waiting = TestEvent()
    let cancelled = TestEvent()
    let sessionEnd = TestEvent()

    /// Requests `answerNow` answered, and how many of them it answered inside a Swift task (none should be: it
    /// runs on the transport's own thread).
    let answeredNow = Mutex<(count: Int, inTasks: Int)>((0, 0))
    /// Requests `handle` saw of the methods `answerNow` knows ("now", "maybeNow").
    let handledLater = Atomic<Int>(0)

    func makeSession(_ info: ConnectionInfo) -> TestSession { TestSession() }

    /// Requests taken by `answerNow` to answer later ("later", "held"), and how many it has answered.
    let laterTaken = Atomic<Int>(0)
    let laterAnswered = Atomic<Int>(0)
    /// The replies of "held" requests, answered when the test calls `releaseHeld()`.
    let held = Mutex<[@Sendable () -> Void]>([])

    /// Answers every "held" request taken so far (`{"held": params}`), on the caller's thread.
    func releaseHeld() {
        for reply in held.withLock({ held in
            defer { held.removeAll() }
            return held
        }) { reply() }
    }

    /// "now" is answered at once (`{"now": params}`); "maybeNow" only when its params say `"now": true`; "later"
    /// (`{"ms": n}`) is answered without a task, from a Dispatch thread after n ms (`{"later": params}`);
    /// "thread" at once with the answering thread's `pthread_self()` (a socket's: its loop's).
    func answerNow(_ request: RPCRequest, session: TestSession, context: RPCContext) -> RPCNowAnswer? {
        switch request.method {
        case "thread": return .answered(.success(.int(Int(bitPattern: UInt(pthread_self())))))
        case "now": break
        case "maybeNow" where request.params?["now"] == true: break
        case "later":
            laterTaken.add(1, ordering: .relaxed)
            let params = request.params ?? .null
            let ms = Int(params["ms"]?.int64Value ?? 0)
            return .later { reply in
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(ms)) {
                    self.laterAnswered.add(1, ordering: .relaxed)
                    reply(.success(["later": params]))
                }
            }
        case "held":
            laterTaken.add(1, ordering: .relaxed)
            let params = request.params ?? .null
            return .later { reply in
                self.held.withLock {
                    $0.append {
                        self.laterAnswered.add(1, ordering: .relaxed)
                        reply(.success(["held": params]))
                    }
                }
            }
        default: return nil
        }
        let inTask = withUnsafeCurrentTask { $0 != nil }
        answeredNow.withLock {
            $0.count += 1
            if inTask { $0.inTasks += 1 }
        }
        return .answered(.success(["now": request.params ?? .null]))
    }

    func sessionEnded(_ session: TestSession) {
        endedSessions.add(1, ordering: .relaxed)
        sessionEnd.signal()
    }

    func handle(_ request: RPCRequest, session: TestSession, context: RPCContext) async -> Result<JSONValue, RPCError> {
        switch request.method {
        case "echo":
            return .success(request.params ?? .null)
        case "now", "maybeNow":
            handledLater.add(1, ordering: .relaxed)
            return .success(["later": request.params ?? .null])
        case "sleep":
            struct P: Decodable {
                var ms: Int
                var value: JSONValue?
            }
            let p: P
            do { p = try request.decodeParams(P.self) } catch { return .failure(error) }
            sleeping.signal()
            try? await Task.sleep(for: .milliseconds(p.ms))
            return .success(p.value ?? .int(p.ms))
        case "waitForCancel":
            // Waits as a handler awaiting a slow query would, until its task is cancelled (at most a minute).
            waiting.signal()
            try? await Task.sleep(for: .seconds(60))
            guard Task.isCancelled else { return .success("not cancelled") }
            cancelled.signal()
            return .failure(RPCError(code: -32050, message: "Cancelled", reason: "cancelled", retryable: true))
        case "internal":
            return .failure(.internalError())
        case "fail":
            return .failure(RPCError(code: -32050, message: "Unavailable", reason: "database_down", retryable: true))
        case "concurrency":
            let now = session.counters.withLock { c -> Int in
                c.current += 1
                c.max = max(c.max, c.current)
                return c.current
            }
            globalMax.withLock { $0 = max($0, now) }
            try? await Task.sleep(for: .milliseconds(20))
            session.counters.withLock { $0.current -= 1 }
            return .success(.int(now))
        case "maxConcurrency":
            return .success(.int(session.counters.withLock { $0.max }))
        case "note":
            session.counters.withLock { $0.notifications += 1 }
            return .success(.null)
        case "noteCount":
            return .success(.int(session.counters.withLock { $0.notifications }))
        case "progress":
            for step in 1...3 { context.notify(method: "progress", params: ["step": .int(step)]) }
            return .success("done")
        case "typed":
            struct P: Decodable {
                struct Item: Decodable { var price: String }
                var offers: [Item]
            }
            do {
                let p = try request.decodeParams(P.self)
                return .success(.int(p.offers.count))
            } catch {
                return .failure(error)
            }
        default:
            return .failure(.methodNotFound(request.method))
        }
    }
}

/// A unique Unix socket path under /tmp (short enough for sun_path).
func tempSocketPath() -> String {
    "/tmp/jrpc-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
}

/// The transports every end-to-end test runs over.
enum Transport: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case unix, tcp
    var testDescription: String { rawValue }

    func address() -> ListenAddress {
        switch self {
        case .unix: return .unix(path: tempSocketPath())
        case .tcp: return .tcp(host: "127.0.0.1", port: 0)
        }
    }
}

/// Starts a server on `transport`, runs `body` with it and its bound address, then shuts it down.
func withServer<R>(
    _ transport: Transport, configuration: RPCServerConfiguration = RPCServerConfiguration(),
    handler: TestHandler = TestHandler(),
    _ body: (RPCServer<TestHandler>, ListenAddress) async throws -> R
) async throws -> R {
    let server = try RPCServer(handler: handler, configuration: configuration)
    let bound = try server.listen(transport.address())
    do {
        let result = try await body(server, bound)
        await server.shutdown(gracePeriod: .seconds(2))
        return result
    } catch {
        await server.shutdown(gracePeriod: .seconds(2))
        throw error
    }
}

/// Reads raw lines until one parses; helper that fails on timeout/EOF.
func nextValue(_ client: RPCClient, timeout: Duration = .seconds(30)) async throws -> JSONValue {
    guard let value = try await client.nextRawValue(timeout: timeout) else {
        throw JSONRPCError(.connectionClosed, "EOF while waiting for a line")
    }
    return value
}

/// A one-shot event a test waits for with a deadline: `wait` is woken by `signal`, it does not poll.
final class TestEvent: Sendable {
    let pending = LiveCount()

    init() { pending.increment() }

    func signal() { pending.decrement() }

    var isSignalled: Bool { pending.value <= 0 }

    /// Whether the event happened (now or within `timeout`).
    func wait(timeout: Duration = .seconds(30)) async -> Bool {
        await pending.waitForZero(until: ContinuousClock.now.advanced(by: timeout))
    }
}

/// The kernel's names of this process's threads (/proc/self/task/*/comm; OfferTestSupport has the same for the
/// targets that depend on it, which this leaf module's tests do not).
func threadNames() throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap {
        try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Waits (polling) until `condition` holds or `timeout` passes; returns whether it held.
func eventually(timeout: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while clock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// A server configuration with some fields changed.
func serverConfig(_ change: (inout RPCServerConfiguration) -> Void) -> RPCServerConfiguration {
    var configuration = RPCServerConfiguration()
    change(&configuration)
    return configuration
}

/// A server serving stdio over a pipe pair (`serveStdio` on its own task) and a client attached to the other ends.
struct StdioPair {
    let server: RPCServer<TestHandler>
    let client: RPCClient
    let served: Task<Void, Never>
    let serverInput: Int32
    let serverOutput: Int32

    static func start(handler: TestHandler, configuration: RPCServerConfiguration = RPCServerConfiguration())
        async throws -> StdioPair
    {
        var toServer: [Int32] = [0, 0]
        var fromServer: [Int32] = [0, 0]
        #expect(pipe(&toServer) == 0)
        #expect(pipe(&fromServer) == 0)
        let server = try RPCServer(handler: handler, configuration: configuration)
        let (serverInput, serverOutput) = (toServer[0], fromServer[1])
        let served = Task { await server.serveStdio(input: serverInput, output: serverOutput) }
        let client = try await RPCClient.attach(readFD: fromServer[0], writeFD: toServer[1])
        return StdioPair(
            server: server, client: client, served: served, serverInput: serverInput, serverOutput: serverOutput)
    }

    /// Closes the server's ends of the pipes (the descriptors `serveStdio` leaves open).
    func closeServerEnds() {
        close(serverInput)
        close(serverOutput)
    }
}
