import Foundation
import OfferTestSupport
import Synchronization
import Testing

@testable import OfferLoadKit

/// A virtual clock: time moves only when the simulation executor is idle and advances it to the earliest sleeper.
final class VirtualClock: LoadClock {
    private struct Sleeper {
        let deadline: UInt64
        let order: Int
        let continuation: CheckedContinuation<Void, Never>
    }
    private struct State {
        var now: UInt64
        var sleepers: [Sleeper] = []
        var order = 0
    }
    private let state: Mutex<State>

    init(start: UInt64 = 1_000_000_000) { state = Mutex(State(now: start)) }

    func now() -> UInt64 { state.withLock { $0.now } }

    func sleep(until deadline: UInt64) async throws {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { s -> Bool in
                guard deadline > s.now else { return true }
                s.order += 1
                s.sleepers.append(Sleeper(deadline: deadline, order: s.order, continuation: c))
                return false
            }
            if ready { c.resume() }
        }
    }

    /// Moves time to the earliest deadline and wakes every sleeper due then (in the order they slept).
    /// Returns false when nobody sleeps.
    func advance() -> Bool {
        let due = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            guard let earliest = s.sleepers.map(\.deadline).min() else { return [] }
            s.now = max(s.now, earliest)
            let woken = s.sleepers.filter { $0.deadline <= earliest }.sorted { $0.order < $1.order }
            s.sleepers.removeAll { $0.deadline <= earliest }
            return woken.map(\.continuation)
        }
        for c in due { c.resume() }
        return !due.isEmpty
    }
}

/// A single-threaded task executor for deterministic simulations: every task of the run prefers it, so when its
/// queue is empty every task is suspended, and only then does the virtual clock advance.
final class SimulationExecutor: TaskExecutor {
    private let jobs = Mutex<[UnownedJob]>([])

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.append(unowned) }
    }

    /// Runs jobs, advancing `clock` whenever idle, until `done()`. Returns false on a deadlock (idle, no sleeper).
    func drive(clock: VirtualClock, done: () -> Bool) -> Bool {
        var idle = 0
        while true {
            let job = jobs.withLock { q -> UnownedJob? in q.isEmpty ? nil : q.removeFirst() }
            if let job {
                job.runSynchronously(on: asUnownedTaskExecutor())
                idle = 0
                continue
            }
            if done() { return true }
            if clock.advance() { continue }
            idle += 1
            if idle > 2_000 { return false }
            usleep(1_000)
        }
    }
}

struct SimulationDeadlock: Error {}

final class OutcomeBox<T: Sendable>: Sendable {
    let value = Mutex<Result<T, any Error>?>(nil)
}

/// Runs `body` under virtual time: deterministic, and instant however many virtual seconds pass.
func simulate<T: Sendable>(
    _ clock: VirtualClock, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let executor = SimulationExecutor()
    let outcome = OutcomeBox<T>()
    let task = Task(executorPreference: executor) {
        do {
            let value = try await body()
            outcome.value.withLock { $0 = .success(value) }
        } catch {
            outcome.value.withLock { $0 = .failure(error) }
        }
    }
    let finished = await onOwnThread { executor.drive(clock: clock) { outcome.value.withLock { $0 != nil } } }
    guard finished, let result = outcome.value.withLock({ $0 }) else {
        task.cancel()
        throw SimulationDeadlock()
    }
    return try result.get()
}

/// A fake gateway connection: each call takes `serviceNanos`, except calls arriving in the stall window, which
/// complete at the window's end plus the service time. With `serial`, calls are served one at a time in order.
final class FakeConnection: LoadConnection {
    let clock: any LoadClock
    let serviceNanos: UInt64
    let stall: Range<UInt64>?
    let serial: Bool
    private let state = Mutex<(calls: Int, busyUntil: UInt64)>((0, 0))
    let respond: @Sendable (LoadRequest) -> CallOutcome

    init(
        clock: any LoadClock, serviceNanos: UInt64, stall: Range<UInt64>? = nil, serial: Bool = false,
        respond: @escaping @Sendable (LoadRequest) -> CallOutcome = { _ in .success }
    ) {
        self.clock = clock
        self.serviceNanos = serviceNanos
        self.stall = stall
        self.serial = serial
        self.respond = respond
    }

    var calls: Int { state.withLock { $0.calls } }

    func call(_ request: LoadRequest) async -> CallOutcome {
        let arrival = clock.now()
        let done = state.withLock { s -> UInt64 in
            s.calls += 1
            var begin = arrival
            if serial { begin = max(begin, s.busyUntil) }
            if let stall, stall.contains(begin) { begin = stall.upperBound }
            s.busyUntil = begin + serviceNanos
            return begin + serviceNanos
        }
        if serviceNanos > 0 || done > arrival { try? await clock.sleep(until: done) }
        return respond(request)
    }
}

/// Hands out pre-built connections in order and remembers the addresses asked for.
final class FakeConnector: LoadConnector {
    private let state = Mutex<(next: Int, addresses: [String])>((0, []))
    let connections: [FakeConnection]

    init(_ connections: [FakeConnection]) { self.connections = connections }

    var addresses: [String] { state.withLock { $0.addresses } }

    func connect(address: String) async throws -> any LoadConnection {
        let i = state.withLock { s -> Int in
            s.addresses.append(address)
            defer { s.next += 1 }
            return s.next
        }
        return connections[i % connections.count]
    }
}
