import Dispatch
import Foundation
import Synchronization
import Testing

@testable import JSONRPC

/// Counts how many of its requests run at once; "slow" ones take a little longer.
final class PeakHandler: RPCHandler {
    let running = Atomic<Int>(0)
    let peak = Atomic<Int>(0)
    let ended = Atomic<Int>(0)

    func makeSession(_ info: ConnectionInfo) {}
    func sessionEnded(_ session: ()) { ended.add(1, ordering: .relaxed) }

    func handle(_ request: RPCRequest, session: (), context: RPCContext) async -> Result<JSONValue, RPCError> {
        let now = running.add(1, ordering: .sequentiallyConsistent).newValue
        var seen = peak.load(ordering: .relaxed)
        while now > seen {
            let (exchanged, original) = peak.compareExchange(expected: seen, desired: now, ordering: .relaxed)
            if exchanged { break }
            seen = original
        }
        if request.method == "slow" { try? await Task.sleep(for: .microseconds(200)) }
        running.subtract(1, ordering: .sequentiallyConsistent)
        return .success(.null)
    }
}

@Suite("connection dispatcher")
struct ConnectionDispatcherTests {
    static let info = ConnectionInfo(id: 1, transport: .stdio, listenAddress: nil, peer: nil)

    /// One reader (as stdio's) dispatches 5,000 requests with `blockingAt: 8`: never more than the limit in
    /// flight, and every request gets through (a lost wake-up would hang the reader).
    @Test func neverMoreThanTheLimitInFlightAndNoLostWakeUps() async throws {
        let handler = PeakHandler()
        let total = 5_000
        let done = Atomic<Int>(0)
        let dispatcher = ConnectionDispatcher(
            handler: handler, info: Self.info, maxDepth: 64, sendFrame: { _ in },
            complete: { _ in done.add(1, ordering: .relaxed) })
        let fast = Array(#"{"jsonrpc":"2.0","method":"fast","id":1}"#.utf8)
        let slow = Array(#"{"jsonrpc":"2.0","method":"slow","id":1}"#.utf8)
        let reader = Thread {
            for index in 0..<total {
                #expect(dispatcher.inFlight < 8)
                dispatcher.dispatch(index % 7 == 0 ? slow : fast, blockingAt: 8)
            }
        }
        reader.start()
        // A lost wake-up stops all progress for good. How long 5,000 task round trips take is not this test's
        // business: in a full suite on two loaded cores they took 38-41 s here (at b250f9d and after), and over
        // 60 s once in CI, so the wait is for progress, not for a total time.
        var seen = -1
        var lastProgress = ContinuousClock.now
        while done.load(ordering: .relaxed) < total {
            let now = done.load(ordering: .relaxed)
            if now != seen {
                (seen, lastProgress) = (now, ContinuousClock.now)
            } else if ContinuousClock.now - lastProgress > .seconds(30) {
                Issue.record("no request finished for 30 s: \(now) of \(total) done, in flight \(dispatcher.inFlight)")
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(handler.peak.load(ordering: .relaxed) <= 8)
        let idle = TestEvent()
        dispatcher.whenIdle { idle.signal() }
        #expect(await idle.wait(timeout: .seconds(30)))
        #expect(dispatcher.inFlight == 0)
        dispatcher.closed()
        #expect(handler.ended.load(ordering: .relaxed) == 1)
    }

    /// Closing the connection cancels what runs; the session ends once those tasks finished, and later frames are
    /// dropped.
    @Test func closingCancelsWhatRunsThenEndsTheSession() async throws {
        let handler = TestHandler()
        let answers = Mutex<[[UInt8]?]>([])
        let dispatcher = ConnectionDispatcher(
            handler: handler, info: Self.info, maxDepth: 64, sendFrame: { _ in },
            complete: { bytes in answers.withLock { $0.append(bytes) } })
        dispatcher.dispatch(Array(#"{"jsonrpc":"2.0","method":"waitForCancel","id":"w"}"#.utf8))
        #expect(await handler.waiting.wait())
        #expect(handler.endedSessions.load(ordering: .relaxed) == 0)
        dispatcher.closed()
        #expect(await handler.cancelled.wait())
        #expect(await handler.sessionEnd.wait())
        #expect(handler.endedSessions.load(ordering: .relaxed) == 1)
        dispatcher.dispatch(Array(#"{"jsonrpc":"2.0","method":"echo","id":"late"}"#.utf8))
        #expect(dispatcher.inFlight == 0)
        #expect(answers.withLock { $0.count } == 1)
    }
}
