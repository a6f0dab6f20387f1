import Testing

@testable import JSONRPC

@Suite struct LiveCountTests {
    @Test func waitingForZeroReturnsAtOnceWhenNothingIsLive() async {
        let count = LiveCount()
        #expect(await count.waitForZero(until: .now.advanced(by: .seconds(10))))
    }

    @Test func theLastDecrementWakesEveryWaiter() async {
        let count = LiveCount()
        count.increment()
        count.increment()
        await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<3 { group.addTask { await count.waitForZero(until: .now.advanced(by: .seconds(30))) } }
            count.decrement()
            count.decrement()
            for await reached in group { #expect(reached) }
        }
        #expect(count.value == 0)
    }

    @Test func theDeadlineBoundsTheWait() async {
        let count = LiveCount()
        count.increment()
        let started = ContinuousClock.now
        #expect(!(await count.waitForZero(until: started.advanced(by: .milliseconds(50)))))
        #expect(ContinuousClock.now - started >= .milliseconds(50))
        #expect(count.state.withLock { $0.waiters.isEmpty })
    }

    @Test func cancellingTheWaiterReturnsIt() async {
        let count = LiveCount()
        count.increment()
        let waiter = Task { await count.waitForZero() }
        waiter.cancel()
        await waiter.value
        #expect(count.state.withLock { $0.waiters.isEmpty })
        #expect(count.value == 1)
    }
}
