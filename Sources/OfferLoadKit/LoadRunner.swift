import Foundation
import JSONRPC
import Metrics
import Synchronization

/// A redemption the gateway acknowledged during the run (warm-up included: the database records those too).
public struct AcknowledgedRedemption: Sendable, Equatable, Codable {
    public let requestIndex: Int
    public let redemptionId: String
    public let campaignId: String
    public let replayed: Bool

    public init(requestIndex: Int, redemptionId: String, campaignId: String, replayed: Bool) {
        self.requestIndex = requestIndex
        self.redemptionId = redemptionId
        self.campaignId = campaignId
        self.replayed = replayed
    }
}

/// The raw figures of one run, before they are turned into a ``RunReport``.
public struct RunResult: Sendable {
    /// Latency of every measured completion (errors included), µs.
    public var latency: LatencyHistogram
    /// Per-second figures from the end of the warm-up.
    public var timeline: Timeline
    /// Measured errors by key (`"-32041"`, `"transport"`).
    public var errors: [String: UInt64]
    /// Measured completions (successes + errors).
    public var measuredRequests: UInt64
    /// Measured successes.
    public var measuredSuccesses: UInt64
    /// Completions of requests started (closed loop) or intended (open loop) during the warm-up.
    public var warmupRequests: UInt64
    /// From the end of the warm-up to the last measured completion, ns.
    public var measuredNanoseconds: UInt64
    /// Every acknowledged redemption, warm-up included, in no particular order.
    public var redemptions: [AcknowledgedRedemption]
    /// The nonce of every signature answered (`offers.sign`), warm-up included, for the ledger check.
    public var signatureNonces: [String] = []
    /// With `LoadPlan.retryUnavailableSeconds`: how the retries of -32050 answers went.
    public var retries = RetryFigures()
    /// The CPU offer-load and the gateway(s) spent during the run (sampled around it, warm-up included).
    public var cpu: CPUFigures?

    /// Measured completions per second (0 when nothing was measured).
    public var throughput: Double {
        measuredNanoseconds == 0 ? 0 : Double(measuredRequests) / (Double(measuredNanoseconds) / 1e9)
    }
}

/// The load engine: opens the plan's connections, offers load by its model, records every completion in per-
/// connection histograms and timelines, and merges them at the end.
public struct LoadRunner: Sendable {
    public let clock: any LoadClock
    public let connector: any LoadConnector
    /// The gateway processes whose CPU the run samples (``ProcessCPU/serverPIDs(of:)``); empty: offer-load's only.
    public let gatewayPIDs: [Int32]

    public init(clock: any LoadClock = SystemLoadClock(), connector: any LoadConnector, gatewayPIDs: [Int32] = []) {
        self.clock = clock
        self.connector = connector
        self.gatewayPIDs = gatewayPIDs
    }

    /// Runs `plan`, taking request `i` from `request(i)` (indices start at 0 and count warm-up requests too).
    ///
    /// Closed loop: a worker whose call ends in a transport error stops (its connection is gone), so a run can end
    /// with fewer requests than asked; the errors say why. Open loop: every scheduled request is still sent and
    /// counted (a dead connection fails its share at once), since the offered load must not depend on the answers.
    public func run(_ plan: LoadPlan, request: @escaping @Sendable (Int) -> LoadRequest) async throws -> RunResult {
        try plan.validate()
        var connections: [any LoadConnection] = []
        for k in 0..<plan.model.connections {
            let address = plan.target(ofConnection: k)
            do {
                connections.append(try await connector.connect(address: address))
            } catch {
                for c in connections { await c.close() }
                throw OfferLoadError(.connectFailed, context: address, String(describing: error))
            }
        }
        let cpu = CPUSampler(gatewayPIDs: gatewayPIDs)
        let start = clock.now()
        let measureStart = start + Self.nanoseconds(plan.warmupSeconds)
        let recorders = connections.map { _ in Recorder(measureStart: measureStart) }
        switch plan.model {
        case .closed(_, let depth):
            await runClosed(plan, depth: depth, measureStart: measureStart, connections, recorders, request)
        case .open(_, let rate, let maxInFlight):
            await runOpen(
                plan, rate: rate, maxInFlight: maxInFlight, start: start, measureStart: measureStart,
                connections, recorders, request)
        }
        let recorded = recorders.reduce(UInt64(0)) { $0 + $1.completions }
        let cpuFigures = cpu.finish(requests: recorded)
        for c in connections { await c.close() }
        var result = RunResult(
            latency: LatencyHistogram(), timeline: Timeline(origin: measureStart), errors: [:], measuredRequests: 0,
            measuredSuccesses: 0, warmupRequests: 0, measuredNanoseconds: 0, redemptions: [])
        var lastCompletion = measureStart
        for recorder in recorders {
            let part = recorder.take()
            result.latency.merge(part.latency)
            result.timeline.merge(part.timeline)
            result.errors.merge(part.errors, uniquingKeysWith: +)
            result.measuredRequests += part.measured
            result.measuredSuccesses += part.successes
            result.warmupRequests += part.warmup
            result.redemptions += part.redemptions
            result.signatureNonces += part.signatureNonces
            result.retries.merge(part.retries)
            lastCompletion = max(lastCompletion, part.lastCompletion)
        }
        result.measuredNanoseconds = lastCompletion - measureStart
        result.cpu = cpuFigures
        result.redemptions.sort { $0.requestIndex < $1.requestIndex }
        return result
    }

    static func nanoseconds(_ seconds: Double) -> UInt64 { UInt64((seconds * 1e9).rounded()) }

    private func runClosed(
        _ plan: LoadPlan, depth: Int, measureStart: UInt64, _ connections: [any LoadConnection],
        _ recorders: [Recorder], _ request: @escaping @Sendable (Int) -> LoadRequest
    ) async {
        let issuer = ClosedLoopIssuer(plan: plan, measureStart: measureStart)
        let clock = self.clock
        let callbacks = connections.compactMap { $0 as? any CallbackLoadConnection }
        if plan.retryUnavailableSeconds == nil, callbacks.count == connections.count {
            // Each answer sends the next request from the connection's own thread: no task switch per call.
            await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
                let latch = Latch(callbacks.count * depth) { finished.resume() }
                for (k, connection) in callbacks.enumerated() {
                    for _ in 0..<depth {
                        Self.issue(connection, recorders[k], issuer, clock, request, latch, now: clock.now())
                    }
                }
            }
            return
        }
        await withDiscardingTaskGroup { group in
            for (k, connection) in connections.enumerated() {
                let recorder = recorders[k]
                for _ in 0..<depth {
                    group.addTask {
                        while !Task.isCancelled {
                            let sentAt = clock.now()
                            guard let index = issuer.next(now: sentAt) else { return }
                            let outcome = await Self.call(
                                connection, request(index), sentAt: sentAt, plan: plan, clock: clock,
                                recorder: recorder)
                            recorder.record(index: index, startedAt: sentAt, completedAt: clock.now(), outcome)
                            // A lost connection answers at once: going on would spin and flood the figures
                            // with errors. The worker retires; the others carry on.
                            if case .transportError = outcome { return }
                        }
                    }
                }
            }
        }
    }

    /// One closed-loop slot of a callback connection: sends the next request; its answer records it and sends the
    /// next, until the issuer says the run is over or the connection is lost (then the slot counts down `latch`).
    /// `now` is the send time (the previous answer's completion: one clock read per request).
    static func issue(
        _ connection: any CallbackLoadConnection, _ recorder: Recorder, _ issuer: ClosedLoopIssuer,
        _ clock: any LoadClock, _ request: @escaping @Sendable (Int) -> LoadRequest, _ latch: Latch,
        now sentAt: UInt64
    ) {
        guard let index = issuer.next(now: sentAt) else {
            latch.countDown()
            return
        }
        connection.start(request(index)) { outcome in
            let completedAt = clock.now()
            recorder.record(index: index, startedAt: sentAt, completedAt: completedAt, outcome)
            // As in the task-per-slot loop: a lost connection retires the slot instead of spinning.
            if case .transportError = outcome {
                latch.countDown()
                return
            }
            issue(connection, recorder, issuer, clock, request, latch, now: completedAt)
        }
    }

    /// One request, sent again while it is answered -32050 and the plan's retry window (from `sentAt`) lasts; a
    /// retried request's whole wait is recorded (how long a client saw the database unavailable).
    static func call(
        _ connection: any LoadConnection, _ request: LoadRequest, sentAt: UInt64, plan: LoadPlan,
        clock: any LoadClock, recorder: Recorder
    ) async -> CallOutcome {
        var outcome = await connection.call(request)
        guard let window = plan.retryUnavailableSeconds, outcome == .rpcError(code: LoadRunner.unavailableCode)
        else { return outcome }
        let giveUp = sentAt + nanoseconds(window)
        var answers = 1
        while outcome == .rpcError(code: LoadRunner.unavailableCode), clock.now() < giveUp {
            do { try await clock.sleep(until: clock.now() + retryPause) } catch { break }
            outcome = await connection.call(request)
            if outcome == .rpcError(code: LoadRunner.unavailableCode) { answers += 1 }
        }
        recorder.retried(unavailableAnswers: answers, waitedNanoseconds: clock.now() - sentAt, outcome: outcome)
        return outcome
    }

    /// -32050: unavailable (the database), retryable.
    public static let unavailableCode = -32050
    /// The pause before a request answered -32050 is sent again.
    static let retryPause: UInt64 = 20_000_000

    /// The open loop's shortest sleep (200 µs). Requests falling due meanwhile leave together on waking, so the
    /// sender wakes at most ~5,000 times a second instead of once per request, which at 48,000 requests a second cost
    /// the harness more CPU than the gateway (docs/perf/offer-load.md). Latency is still measured from each request's
    /// intended time, so the wait counts against the gateway.
    static let openLoopQuantum: UInt64 = 200_000

    private func runOpen(
        _ plan: LoadPlan, rate: Double, maxInFlight: Int, start: UInt64, measureStart: UInt64,
        _ connections: [any LoadConnection], _ recorders: [Recorder],
        _ request: @escaping @Sendable (Int) -> LoadRequest
    ) async {
        let schedule = OpenLoopSchedule(start: start, rate: rate, measureStart: measureStart, stop: plan.stop)
        let clock = self.clock
        // Connections that can pace take each request without a task of its own, sent by a timer on the thread that
        // handles their answers (`sendOnLoop`): at tens of thousands of requests a second, a task per request made the
        // harness's own scheduling lag part of the latencies it reports, and so did a sender thread of its own,
        // which handed every request over to the loop. A simulated clock (tests) and other connections (HTTP) drive
        // a task per request below.
        let paced = connections.compactMap { $0 as? any PacedLoadConnection }
        if paced.count == connections.count, clock is SystemLoadClock,
            await Self.sendOnLoop(schedule, maxInFlight: maxInFlight, paced, recorders, clock, request)
        {
            return
        }
        let slots = connections.map { _ in Slots(maxInFlight) }
        await withDiscardingTaskGroup { group in
            var index = 0
            while let intended = schedule.intendedTime(of: index) {
                let now = clock.now()
                if now < intended {
                    // Wake at most once a quantum and send everything due by then (see `openLoopQuantum`).
                    let wake = max(intended, now + Self.openLoopQuantum)
                    do { try await clock.sleep(until: wake) } catch { break }
                }
                let k = index % connections.count
                let (connection, recorder, slot, i) = (connections[k], recorders[k], slots[k], index)
                await slot.acquire()
                group.addTask {
                    let outcome = await connection.call(request(i))
                    recorder.record(index: i, startedAt: intended, completedAt: clock.now(), outcome)
                    slot.release()
                }
                index += 1
            }
        }
    }
}

extension LoadRunner {
    /// The open loop sent from the connections' event-loop thread, paced by a timer there (``PacedOpenLoop``): what
    /// `offer-load --rate` runs against a gateway over JSON-RPC. The same schedule, quantum, in-flight cap and
    /// recording as the task-driven loop. False, with nothing sent, when the timer could not be started (the caller
    /// then runs the task-driven loop).
    fileprivate static func sendOnLoop(
        _ schedule: OpenLoopSchedule, maxInFlight: Int, _ connections: [any PacedLoadConnection],
        _ recorders: [Recorder], _ clock: any LoadClock, _ request: @escaping @Sendable (Int) -> LoadRequest
    ) async -> Bool {
        let outstanding = LiveCount()
        let sender = PacedOpenLoop(
            schedule: schedule, maxInFlight: maxInFlight, connections: connections, recorders: recorders, clock: clock,
            request: request, outstanding: outstanding)
        // The sender counts as outstanding until its last request is sent.
        outstanding.increment()
        do {
            try await connections[0].pace(after: 0, sender.tick)
        } catch {
            return false
        }
        await withTaskCancellationHandler {
            await outstanding.waitForZero()
        } onCancel: {
            sender.cancel()
        }
        return true
    }
}

/// The open loop's sender as a timer's tick on the thread that handles the connections' answers
/// (``PacedLoadConnection``): each tick sends every request whose intended time has come and returns the wait until
/// the next one, at least ``LoadRunner/openLoopQuantum``. No thread of its own, so no hand-over, lock or wake-up
/// between threads per request, and what a request allocates is freed on the thread that made it. It replaced a sender
/// thread sleeping with `clock_nanosleep` (itself a cure for `Task.sleep`'s overshoot) whose hand-over to the loop
/// showed in the tail it measured: `offers.best` at 127,000/s, p99 0.7-19 ms before and 0.4-0.5 ms after, side by
/// side against one gateway (docs/perf/offer-load.md, session 31). A connection at its in-flight cap holds the sending
/// up, as the blocked sender thread did, until a tick finds a slot free (the request's wait still counts from its
/// intended time).
///
/// Ticks run one at a time on one thread; `next` is atomic only so that the type is `Sendable` without a promise.
final class PacedOpenLoop: Sendable {
    /// One connection's requests out, against the cap (answers may come on any thread).
    final class InFlight: Sendable {
        let count = Atomic<Int>(0)
    }

    let schedule: OpenLoopSchedule
    let maxInFlight: Int
    let connections: [any PacedLoadConnection]
    let recorders: [Recorder]
    let inFlight: [InFlight]
    let clock: any LoadClock
    let request: @Sendable (Int) -> LoadRequest
    let outstanding: LiveCount
    let next = Atomic<Int>(0)
    let cancelled = Atomic<Bool>(false)

    init(
        schedule: OpenLoopSchedule, maxInFlight: Int, connections: [any PacedLoadConnection], recorders: [Recorder],
        clock: any LoadClock, request: @escaping @Sendable (Int) -> LoadRequest, outstanding: LiveCount
    ) {
        self.schedule = schedule
        self.maxInFlight = maxInFlight
        self.connections = connections
        self.recorders = recorders
        self.inFlight = connections.map { _ in InFlight() }
        self.clock = clock
        self.request = request
        self.outstanding = outstanding
    }

    func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Sends what is due; returns the nanoseconds until the next tick, or nil once every request is sent (or the run
    /// was cancelled).
    func tick() -> UInt64? {
        var index = next.load(ordering: .relaxed)
        defer { next.store(index, ordering: .relaxed) }
        var now = clock.now()
        while !cancelled.load(ordering: .relaxed), let intended = schedule.intendedTime(of: index) {
            if intended > now {
                now = clock.now()
                if intended > now { return max(intended - now, LoadRunner.openLoopQuantum) }
            }
            let k = index % connections.count
            let slot = inFlight[k]
            guard slot.count.load(ordering: .relaxed) < maxInFlight else { return LoadRunner.openLoopQuantum }
            slot.count.add(1, ordering: .relaxed)
            outstanding.increment()
            let (recorder, clock, outstanding, i) = (recorders[k], clock, outstanding, index)
            connections[k].start(request(i)) { outcome in
                recorder.record(index: i, startedAt: intended, completedAt: clock.now(), outcome)
                slot.count.subtract(1, ordering: .relaxed)
                outstanding.decrement()
            }
            index += 1
        }
        // The sender's own count, taken before the first tick: a tick returns nil once, and is not run again.
        outstanding.decrement()
        return nil
    }
}

/// The open-loop schedule: request `i` is intended at `start + i × 10⁹ / rate` ns; the schedule ends after the
/// stop condition (counted on measured requests, those intended at or after `measureStart`).
public struct OpenLoopSchedule: Sendable, Equatable {
    public let start: UInt64
    public let rate: Double
    public let measureStart: UInt64
    public let stop: StopCondition
    /// The number of requests intended before `measureStart` (the warm-up requests).
    public let warmupCount: Int

    public init(start: UInt64, rate: Double, measureStart: UInt64, stop: StopCondition) {
        self.start = start
        self.rate = rate
        self.measureStart = measureStart
        self.stop = stop
        // The first i with offset(i) ≥ measureStart - start, from an estimate corrected for rounding.
        var i = 0
        if measureStart > start {
            let span = measureStart - start
            i = Int((Double(span) * rate / 1e9).rounded(.down))
            while i > 0 && Self.offset(i - 1, rate) >= span { i -= 1 }
            while Self.offset(i, rate) < span { i += 1 }
        }
        warmupCount = i
    }

    static func offset(_ i: Int, _ rate: Double) -> UInt64 { UInt64((Double(i) * 1e9 / rate).rounded()) }

    /// The intended send time of request `i`, or nil when the run has no request `i`.
    public func intendedTime(of i: Int) -> UInt64? {
        let t = start + Self.offset(i, rate)
        switch stop {
        case .duration(let seconds):
            return t < measureStart + LoadRunner.nanoseconds(seconds) ? t : nil
        case .requests(let n):
            return i < warmupCount + n ? t : nil
        }
    }
}

/// Hands out request indices to closed-loop workers and says when to stop.
final class ClosedLoopIssuer: Sendable {
    private struct State {
        var next = 0
        var measuredIssued = 0
    }
    private let state = Mutex(State())
    private let measureStart: UInt64
    private let stop: StopCondition
    private let stopAt: UInt64?

    init(plan: LoadPlan, measureStart: UInt64) {
        self.measureStart = measureStart
        self.stop = plan.stop
        if case .duration(let seconds) = plan.stop {
            stopAt = measureStart + LoadRunner.nanoseconds(seconds)
        } else {
            stopAt = nil
        }
    }

    /// The index of the next request to send at `now`, or nil when the run is over.
    func next(now: UInt64) -> Int? {
        if let stopAt, now >= stopAt { return nil }
        return state.withLock { s -> Int? in
            if now >= measureStart, case .requests(let n) = stop {
                guard s.measuredIssued < n else { return nil }
                s.measuredIssued += 1
            }
            defer { s.next += 1 }
            return s.next
        }
    }
}

/// Runs `done` once, when `countDown` was called `count` times (the closed loop's callback slots finishing).
final class Latch: Sendable {
    private let remaining: Mutex<Int>
    private let done: @Sendable () -> Void

    init(_ count: Int, done: @escaping @Sendable () -> Void) {
        remaining = Mutex(count)
        self.done = done
        if count == 0 { done() }
    }

    func countDown() {
        let last = remaining.withLock { n -> Bool in
            n -= 1
            return n == 0
        }
        if last { done() }
    }
}

/// A counting semaphore for the open loop's in-flight cap of one connection.
final class Slots: Sendable {
    private struct State {
        var free: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(free: count)) }

    func acquire() async {
        let acquired = state.withLock { s -> Bool in
            guard s.free > 0 else { return false }
            s.free -= 1
            return true
        }
        if acquired { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { s -> Bool in
                if s.free > 0 {
                    s.free -= 1
                    return true
                }
                s.waiters.append(c)
                return false
            }
            if ready { c.resume() }
        }
    }

    func release() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.waiters.isEmpty {
                s.free += 1
                return nil
            }
            return s.waiters.removeFirst()  // the slot passes straight to the waiter
        }
        waiter?.resume()
    }
}

/// The figures of one connection, guarded by a mutex (its depth workers or in-flight tasks record concurrently).
final class Recorder: Sendable {
    struct Part {
        var latency = LatencyHistogram()
        var timeline: Timeline
        var errors: [String: UInt64] = [:]
        var measured: UInt64 = 0
        var successes: UInt64 = 0
        var warmup: UInt64 = 0
        var lastCompletion: UInt64 = 0
        var redemptions: [AcknowledgedRedemption] = []
        var signatureNonces: [String] = []
        var retries = RetryFigures()
    }
    private let measureStart: UInt64
    private let state: Mutex<Part>

    init(measureStart: UInt64) {
        self.measureStart = measureStart
        state = Mutex(Part(timeline: Timeline(origin: measureStart)))
    }

    /// Records one completion; `startedAt` is the intended (open loop) or actual (closed loop) send time.
    func record(index: Int, startedAt: UInt64, completedAt: UInt64, _ outcome: CallOutcome) {
        let latency = completedAt >= startedAt ? completedAt - startedAt : 0
        state.withLock { p in
            if case .redeemed(let id, let campaign, let replayed) = outcome {
                p.redemptions.append(
                    AcknowledgedRedemption(
                        requestIndex: index, redemptionId: id, campaignId: campaign, replayed: replayed))
            }
            if case .signed(let nonce) = outcome { p.signatureNonces.append(nonce) }
            guard startedAt >= measureStart else {
                p.warmup += 1
                return
            }
            p.measured += 1
            p.latency.record(nanoseconds: latency)
            p.timeline.record(completedAt: completedAt, latencyNanoseconds: latency, isError: outcome.isError)
            if let key = outcome.errorKey { p.errors[key, default: 0] += 1 } else { p.successes += 1 }
            p.lastCompletion = max(p.lastCompletion, completedAt)
        }
    }

    /// Records that a request was answered -32050 `unavailableAnswers` times before `outcome`, `waitedNanoseconds`
    /// after it was first sent.
    func retried(unavailableAnswers: Int, waitedNanoseconds: UInt64, outcome: CallOutcome) {
        state.withLock { p in
            p.retries.retriedRequests += 1
            p.retries.unavailableAnswers += UInt64(unavailableAnswers)
            p.retries.longestWaitNanoseconds = max(p.retries.longestWaitNanoseconds, waitedNanoseconds)
            if outcome == .rpcError(code: LoadRunner.unavailableCode) { p.retries.gaveUp += 1 }
        }
    }

    func take() -> Part { state.withLock { $0 } }

    /// Completions recorded so far, warm-up included.
    var completions: UInt64 { state.withLock { $0.measured + $0.warmup } }
}

/// How retrying -32050 answers went (``LoadPlan/retryUnavailableSeconds``).
public struct RetryFigures: Sendable, Equatable, Codable {
    /// Requests answered -32050 at least once.
    public var retriedRequests: UInt64 = 0
    /// -32050 answers in all (a retried request may get several).
    public var unavailableAnswers: UInt64 = 0
    /// Requests still answered -32050 when their retry window ended (their -32050 is their outcome).
    public var gaveUp: UInt64 = 0
    /// The longest a retried request waited from its first send to its final answer: how long a client saw
    /// writes unavailable.
    public var longestWaitNanoseconds: UInt64 = 0

    public init() {}

    mutating func merge(_ other: RetryFigures) {
        retriedRequests += other.retriedRequests
        unavailableAnswers += other.unavailableAnswers
        gaveUp += other.gaveUp
        longestWaitNanoseconds = max(longestWaitNanoseconds, other.longestWaitNanoseconds)
    }
}
