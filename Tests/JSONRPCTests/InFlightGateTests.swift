import Dispatch
import Foundation
import Synchronization
import Testing

@testable import JSONRPC

@Suite("stdio in-flight gate")
struct InFlightGateTests {
    /// One reader admits 5,000 requests that complete on other threads after random short delays: never more than
    /// the limit in flight, and every request gets through (a lost wake-up would hang the reader).
    @Test func neverMoreThanTheLimitAndNoLostWakeUps() async throws {
        let gate = InFlightGate(limit: 8)
        let running = Atomic<Int>(0)
        let peak = Atomic<Int>(0)
        let done = Atomic<Int>(0)
        let total = 5_000
        let finished = DispatchSemaphore(value: 0)
        let reader = Thread {
            for index in 0..<total {
                gate.enter()
                let now = running.add(1, ordering: .sequentiallyConsistent).newValue
                var seen = peak.load(ordering: .relaxed)
                while now > seen {
                    let (exchanged, original) = peak.compareExchange(
                        expected: seen, desired: now, ordering: .relaxed)
                    if exchanged { break }
                    seen = original
                }
                DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(index % 7 == 0 ? 200 : 0)) {
                    running.subtract(1, ordering: .sequentiallyConsistent)
                    gate.leave()
                    if done.add(1, ordering: .sequentiallyConsistent).newValue == total { finished.signal() }
                }
            }
        }
        reader.start()
        let completed = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: finished.wait(timeout: .now() + 60)) }
        }
        #expect(completed == .success, "requests still in flight: \(gate.inFlight)")
        #expect(peak.load(ordering: .relaxed) <= 8)
        #expect(peak.load(ordering: .relaxed) >= 2)  // requests did overlap
        #expect(gate.inFlight == 0)
    }
}
