import Foundation
import Synchronization
import Testing

@testable import OfferLoadKit

let ms: UInt64 = 1_000_000
let second: UInt64 = 1_000_000_000

@Suite struct LoadRunnerTests {
    /// The acceptance test for coordinated omission: the server stalls for 1 s; requests intended during the stall
    /// must show the stall in their latencies, measured from their intended send time.
    @Test func openLoopLatenciesIncludeAServerStall() async throws {
        let clock = VirtualClock()
        let t0 = clock.now()
        let stall = (t0 + 1 * second)..<(t0 + 2 * second)
        let connections = (0..<2).map { _ in FakeConnection(clock: clock, serviceNanos: 1 * ms, stall: stall) }
        let connector = FakeConnector(connections)
        let plan = LoadPlan(
            model: .open(connections: 2, rate: 1_000), stop: .duration(seconds: 3), targets: ["unix:/a", "unix:/b"])
        let result = try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: connector).run(plan) { _ in
                LoadRequest(method: "system.ping", params: [:])
            }
        }
        // 3000 requests intended at t0 + i ms; i in 1000..<2000 arrive during the stall and complete at
        // t0 + 2001 ms, so request i waits (2001 - i) ms: 1001 ms for the first, 2 ms for the last.
        #expect(result.measuredRequests == 3_000)
        #expect(result.measuredSuccesses == 3_000)
        #expect(result.warmupRequests == 0)
        #expect(connections.map(\.calls) == [1_500, 1_500])
        #expect(connector.addresses == ["unix:/a", "unix:/b"])
        let h = result.latency
        #expect(h.max == 1_001_000)
        #expect(h.min == 1_000)
        #expect(h.count(atOrBelow: 1_000) == 2_000)  // the unstalled ones: exactly the 1 ms service time
        // Latencies ≥ 500 ms: (2001 - i) ≥ 500 ⇔ i ≤ 1501: 502 requests. (499,711 µs tops the bucket just
        // below 500 ms: [497664, 499711]; the next one, [499712, 501759], holds 500 and 501 ms.)
        #expect(h.count - h.count(atOrBelow: 499_711) == 502)
        #expect(h.count - h.count(atOrBelow: 501_759) == 500)
        // p90 is rank 2700: the 700th smallest stalled latency, 701 ms; p99 the 970th, 971 ms.
        #expect((701_000...701_000 + 701_000 / 128).contains(h.percentile(90)))
        #expect((971_000...971_000 + 971_000 / 128).contains(h.percentile(99)))
        #expect((1_000...1_007).contains(h.percentile(50)))
        // The timeline shows the stall as a gap: nothing completes in second 1 but request 999 (at 1.000 s).
        let points = result.timeline.points
        #expect(points.map(\.completions) == [999, 1, 1_999, 1])
        #expect(points[2].maxMicros == 1_001_000)
        // Elapsed: from t0 to the last completion at t0 + 3000 ms.
        #expect(result.measuredNanoseconds == 3_000 * ms)
        #expect(result.throughput == 1_000)
    }

    /// The stall again, but the connections accept at most 100 requests in flight, as a real socket's buffers
    /// would: the sender blocks during the stall and sends the backlog afterwards. Measured from the actual send
    /// only ~200 requests would look slow; from the intended time, all 1000 intended during the stall do.
    @Test func openLoopBlockedSenderStillShowsTheStall() async throws {
        let clock = VirtualClock()
        let t0 = clock.now()
        let stall = (t0 + 1 * second)..<(t0 + 2 * second)
        let connections = (0..<2).map { _ in FakeConnection(clock: clock, serviceNanos: 1 * ms, stall: stall) }
        let plan = LoadPlan(
            model: .open(connections: 2, rate: 1_000, maxInFlight: 100), stop: .duration(seconds: 3),
            targets: ["unix:/a"])
        let result = try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: FakeConnector(connections)).run(plan) { _ in
                LoadRequest(method: "system.ping", params: [:])
            }
        }
        let h = result.latency
        #expect(h.count == 3_000)
        #expect(h.max == 1_001_000)
        // Requests intended at 1000..1999 ms all complete after 2001 ms: at least (2001 - i) ms each.
        #expect(h.count - h.count(atOrBelow: 1_000) >= 1_000)
        #expect(h.count - h.count(atOrBelow: 499_711) >= 502)
        #expect(h.percentile(90) >= 701_000)
        #expect(result.timeline.points[1].completions == 1)
    }

    @Test func openLoopCapOnInFlightStillCountsFromTheIntendedTime() async throws {
        let clock = VirtualClock()
        // One request at a time, 10 ms each, while 1000/s are intended: request i is sent when i - 1 completes,
        // at 10·i ms, completes at 10·(i + 1) ms, and was intended at i ms: latency 9·i + 10 ms.
        let connection = FakeConnection(clock: clock, serviceNanos: 10 * ms, serial: true)
        let plan = LoadPlan(
            model: .open(connections: 1, rate: 1_000, maxInFlight: 1), stop: .requests(20),
            targets: ["tcp:127.0.0.1:7411"])
        let result = try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: FakeConnector([connection])).run(plan) { _ in
                LoadRequest(method: "system.ping", params: [:])
            }
        }
        #expect(result.measuredRequests == 20)
        #expect(result.latency.min == 10_000)
        #expect(result.latency.max == 9 * 19_000 + 10_000)
        var total = 0.0
        for i in 0..<20 { total += Double(9 * i + 10) * 1_000 }
        let expectedMean = total / 20
        #expect(result.latency.mean == expectedMean)
    }

    @Test func openLoopWarmupIsExcludedAndRequestCountIsMeasuredOnly() async throws {
        let clock = VirtualClock()
        let connection = FakeConnection(clock: clock, serviceNanos: 2 * ms)
        let plan = LoadPlan(
            model: .open(connections: 1, rate: 1_000), stop: .requests(50), warmupSeconds: 0.01, targets: ["a"])
        let seen = IndexLog()
        let result = try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: FakeConnector([connection])).run(plan) { i in
                seen.add(i)
                return LoadRequest(method: "system.ping", params: [:])
            }
        }
        #expect(result.warmupRequests == 10)  // intended at 0..9 ms, before the 10 ms warm-up ends
        #expect(result.measuredRequests == 50)
        #expect(seen.sorted == Array(0..<60))
        #expect(result.latency.count == 50)
        #expect(result.latency.max == 2_000)
        // Measured from the end of the warm-up (10 ms) to the last completion (59 + 2 ms).
        #expect(result.measuredNanoseconds == 51 * ms)
    }

    @Test func closedLoopKeepsDepthInFlightPerConnection() async throws {
        let clock = VirtualClock()
        let connections = (0..<2).map { _ in FakeConnection(clock: clock, serviceNanos: 1 * ms) }
        let plan = LoadPlan(
            model: .closed(connections: 2, depth: 4), stop: .requests(1_000), warmupSeconds: 0.1, targets: ["x"])
        let result = try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: FakeConnector(connections)).run(plan) { _ in
                LoadRequest(method: "system.ping", params: [:])
            }
        }
        // 8 workers, 1 ms per request: 100 warm-up requests each in the first 100 ms, then 1000 measured
        // requests in 125 rounds of 8: 8000/s.
        #expect(result.warmupRequests == 800)
        #expect(result.measuredRequests == 1_000)
        #expect(result.measuredNanoseconds == 125 * ms)
        #expect(result.throughput == 8_000)
        #expect(result.latency.percentile(99.9) == 1_000)
        #expect(connections.map(\.calls) == [900, 900])
        #expect(result.timeline.points.map(\.completions) == [1_000])
    }

    @Test func closedLoopStopsAfterTheDuration() async throws {
        let clock = VirtualClock()
        let connection = FakeConnection(clock: clock, serviceNanos: 1 * ms)
        let plan = LoadPlan(model: .closed(connections: 1, depth: 2), stop: .duration(seconds: 0.05), targets: ["x"])
        let result = try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: FakeConnector([connection])).run(plan) { _ in
                LoadRequest(method: "system.ping", params: [:])
            }
        }
        // Two workers send at 0, 1, …, 49 ms; at 50 ms the duration is over.
        #expect(result.measuredRequests == 100)
        #expect(result.measuredNanoseconds == 50 * ms)
    }

    @Test func closedLoopHidesTheStallThatOpenLoopShows() async throws {
        // The same 1 s stall under a closed loop: only the requests in flight when it began see it, which is
        // why the open loop exists. Guards against the open loop silently measuring from the actual send.
        let clock = VirtualClock()
        let t0 = clock.now()
        let connection = FakeConnection(
            clock: clock, serviceNanos: 1 * ms, stall: (t0 + 1 * second)..<(t0 + 2 * second))
        let plan = LoadPlan(model: .closed(connections: 1, depth: 1), stop: .duration(seconds: 3), targets: ["x"])
        let result = try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: FakeConnector([connection])).run(plan) { _ in
                LoadRequest(method: "system.ping", params: [:])
            }
        }
        #expect(result.latency.count - result.latency.count(atOrBelow: 1_000) == 1)
        #expect(result.latency.max == 1_001_000)
    }

    @Test func errorsAreCountedByCode() async throws {
        let clock = VirtualClock()
        let connection = FakeConnection(clock: clock, serviceNanos: 1 * ms) { request in
            switch request.method {
            case "a": .rpcError(code: -32041)
            case "b": .transportError("connection reset")
            default: .success
            }
        }
        let plan = LoadPlan(model: .open(connections: 1, rate: 1_000), stop: .requests(30), targets: ["x"])
        let result = try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: FakeConnector([connection])).run(plan) { i in
                LoadRequest(method: ["a", "b", "c"][i % 3], params: [:])
            }
        }
        #expect(result.errors == ["-32041": 10, "transport": 10])
        #expect(result.measuredSuccesses == 10)
        #expect(result.timeline.points.map(\.errors) == [20])
    }

    @Test func closedLoopWorkerRetiresWhenItsConnectionIsLost() async throws {
        let clock = VirtualClock()
        let calls = IndexLog()
        let healthy = FakeConnection(clock: clock, serviceNanos: 1 * ms)
        let dying = FakeConnection(clock: clock, serviceNanos: 1 * ms) { _ in
            calls.add(0)
            return calls.sorted.count > 5 ? .transportError("connection reset") : .success
        }
        let plan = LoadPlan(model: .closed(connections: 2, depth: 2), stop: .requests(100), targets: ["x", "y"])
        let result = try await simulate(clock) {
            try await LoadRunner(clock: clock, connector: FakeConnector([healthy, dying])).run(plan) { _ in
                LoadRequest(method: "system.ping", params: [:])
            }
        }
        // The dying connection answers 5 times, then each of its 2 workers gets one transport error and stops;
        // the healthy connection's workers send the rest.
        #expect(result.measuredRequests == 100)
        #expect(dying.calls == 7)
        #expect(healthy.calls == 93)
        #expect(result.errors == ["transport": 2])
    }

    @Test func connectFailureNamesTheAddress() async throws {
        struct Refusing: LoadConnector {
            struct Refused: Error {}
            func connect(address: String) async throws -> any LoadConnection { throw Refused() }
        }
        let plan = LoadPlan(model: .closed(connections: 1, depth: 1), stop: .requests(1), targets: ["unix:/nope"])
        await #expect(throws: OfferLoadError.self) {
            _ = try await LoadRunner(connector: Refusing()).run(plan) { _ in LoadRequest(method: "m", params: [:])
            }
        }
        do {
            _ = try await LoadRunner(connector: Refusing()).run(plan) { _ in LoadRequest(method: "m", params: [:])
            }
        } catch let error as OfferLoadError {
            #expect(error.code == .connectFailed)
            #expect(error.context == "unix:/nope")
        }
    }

    @Test(arguments: [
        (LoadPlan(model: .closed(connections: 1, depth: 1), stop: .requests(1), targets: []), "--connect"),
        (LoadPlan(model: .closed(connections: 0, depth: 1), stop: .requests(1), targets: ["a"]), "--connections"),
        (LoadPlan(model: .closed(connections: 1, depth: 0), stop: .requests(1), targets: ["a"]), "--depth"),
        (LoadPlan(model: .open(connections: 1, rate: 0), stop: .requests(1), targets: ["a"]), "--rate"),
        (LoadPlan(model: .open(connections: 1, rate: .nan), stop: .requests(1), targets: ["a"]), "--rate"),
        (LoadPlan(model: .closed(connections: 1, depth: 1), stop: .requests(0), targets: ["a"]), "--requests"),
        (LoadPlan(model: .closed(connections: 1, depth: 1), stop: .duration(seconds: 0), targets: ["a"]), "--duration"),
        (
            LoadPlan(model: .closed(connections: 1, depth: 1), stop: .requests(1), warmupSeconds: -1, targets: ["a"]),
            "--warmup"
        ),
    ])
    func invalidPlansNameTheOption(plan: LoadPlan, option: String) {
        do {
            try plan.validate()
            Issue.record("expected \(option) to be rejected")
        } catch {
            #expect(error.code == .invalidPlan)
            #expect(error.context == option)
        }
    }

    @Test func roundRobinTargets() {
        let plan = LoadPlan(model: .closed(connections: 7, depth: 1), stop: .requests(1), targets: ["a", "b", "c"])
        #expect((0..<7).map(plan.target(ofConnection:)) == ["a", "b", "c", "a", "b", "c", "a"])
    }

    @Test func openLoopScheduleIntendedTimes() {
        let s = OpenLoopSchedule(start: 100, rate: 3, measureStart: 100 + second, stop: .duration(seconds: 1))
        #expect(s.warmupCount == 3)
        #expect(s.intendedTime(of: 0) == 100)
        #expect(s.intendedTime(of: 1) == 100 + 333_333_333)
        #expect(s.intendedTime(of: 3) == 100 + second)
        #expect(s.intendedTime(of: 5) == 100 + 1_666_666_667)
        #expect(s.intendedTime(of: 6) == nil)  // at 2 s: the end of the measured second
        let counted = OpenLoopSchedule(start: 0, rate: 1_000, measureStart: 5 * ms, stop: .requests(10))
        #expect(counted.warmupCount == 5)
        #expect(counted.intendedTime(of: 14) == 14 * ms)
        #expect(counted.intendedTime(of: 15) == nil)
    }
}

/// Collects request indices from concurrent tasks.
final class IndexLog: Sendable {
    private let state = Mutex<[Int]>([])
    func add(_ i: Int) { state.withLock { $0.append(i) } }
    var sorted: [Int] { state.withLock { $0.sorted() } }
}

@Suite struct LoadPlanOptionTests {
    @Test func defaultsAreAClosedLoopOfTenSeconds() throws {
        let plan = try LoadPlan.fromOptions(targets: ["unix:/s"])
        #expect(
            plan
                == LoadPlan(
                    model: .closed(connections: 16, depth: 1), stop: .duration(seconds: 10),
                    targets: ["unix:/s"]))
    }

    @Test func rateSelectsTheOpenLoop() throws {
        let plan = try LoadPlan.fromOptions(
            targets: ["a", "b"], connections: 4, rate: 2_500, requests: 1_000, warmup: 2, maxInFlight: 64)
        #expect(plan.model == .open(connections: 4, rate: 2_500, maxInFlight: 64))
        #expect(plan.stop == .requests(1_000))
        #expect(plan.warmupSeconds == 2)
    }

    @Test func conflictingOptionsNameTheOption() {
        func context(_ make: () throws(OfferLoadError) -> LoadPlan) -> String? {
            do {
                _ = try make()
                return nil
            } catch { return error.context }
        }
        #expect(
            context { () throws(OfferLoadError) in try LoadPlan.fromOptions(targets: ["a"], duration: 1, requests: 1) }
                == "--requests")
        #expect(
            context { () throws(OfferLoadError) in try LoadPlan.fromOptions(targets: ["a"], depth: 2, rate: 10) }
                == "--depth")
        #expect(
            context { () throws(OfferLoadError) in try LoadPlan.fromOptions(targets: ["a"], maxInFlight: 3) }
                == "--max-in-flight")
        #expect(context { () throws(OfferLoadError) in try LoadPlan.fromOptions(targets: []) } == "--connect")
        #expect(context { () throws(OfferLoadError) in try LoadPlan.fromOptions(targets: ["a"], depth: 4) } == nil)
    }
}
