import Testing

@testable import Postgres

@Suite("Pool state machine")
struct PoolStateMachineTests {
    typealias Action = PoolStateMachine.Action
    let boom = PostgresError(kind: .connection, message: "refused")
    let timeout = PostgresError(kind: .poolTimeout, message: "timeout")

    @Test func firstAcquireOpensAConnectionAndLeasesItWhenOpened() {
        var m = PoolStateMachine(maxConnections: 2)
        #expect(m.acquire(1) == [.openConnection(1)])
        #expect(m.stats == .init(open: 0, idle: 0, inUse: 0, connecting: 1, waiters: 1, maxConnections: 2))
        #expect(m.connectionOpened(1) == [.lease(1, to: 1)])
        #expect(m.stats == .init(open: 1, idle: 0, inUse: 1, connecting: 0, waiters: 0, maxConnections: 2))
    }

    @Test func releasedConnectionIsReusedWithoutOpening() {
        var m = PoolStateMachine(maxConnections: 2)
        _ = m.acquire(1)
        _ = m.connectionOpened(1)
        #expect(m.release(1, reusable: true) == [])
        #expect(m.stats.idle == 1)
        #expect(m.acquire(2) == [.lease(1, to: 2)])
        #expect(m.stats.idle == 0)
    }

    @Test func neverOpensMoreThanMaxAndServesWaitersFirstComeFirstServed() {
        var m = PoolStateMachine(maxConnections: 2)
        #expect(m.acquire(1) == [.openConnection(1)])
        #expect(m.acquire(2) == [.openConnection(2)])
        #expect(m.acquire(3) == [])
        #expect(m.acquire(4) == [])
        #expect(m.connectionOpened(2) == [.lease(2, to: 1)])
        #expect(m.connectionOpened(1) == [.lease(1, to: 2)])
        #expect(m.stats.waiters == 2)
        #expect(m.release(1, reusable: true) == [.lease(1, to: 3)])
        #expect(m.release(2, reusable: true) == [.lease(2, to: 4)])
        #expect(m.stats == .init(open: 2, idle: 0, inUse: 2, connecting: 0, waiters: 0, maxConnections: 2))
    }

    @Test func pendingConnectCoversANewWaiterAfterATimeout() {
        var m = PoolStateMachine(maxConnections: 3)
        #expect(m.acquire(1) == [.openConnection(1)])
        #expect(m.waiterTimedOut(1, error: timeout) == [.failWaiter(1, timeout)])
        // Connection 1 is still connecting and covers the new waiter: no second open.
        #expect(m.acquire(2) == [])
        #expect(m.connectionOpened(1) == [.lease(1, to: 2)])
    }

    @Test func openedConnectionWithoutWaitersGoesIdle() {
        var m = PoolStateMachine(maxConnections: 1)
        _ = m.acquire(1)
        _ = m.waiterCancelled(1)
        #expect(m.connectionOpened(1) == [])
        #expect(m.stats.idle == 1)
    }

    @Test func timeoutOfAServedWaiterIsIgnored() {
        var m = PoolStateMachine(maxConnections: 1)
        _ = m.acquire(1)
        _ = m.connectionOpened(1)
        #expect(m.waiterTimedOut(1, error: timeout) == [])
    }

    @Test func failedConnectFailsEveryUncoveredWaiterAndTheNextAttemptBacksOff() {
        var m = PoolStateMachine(maxConnections: 2)
        #expect(m.acquire(1) == [.openConnection(1)])
        #expect(m.acquire(2) == [.openConnection(2)])
        #expect(m.acquire(3) == [])
        // Connection 2 still covers one waiter; the other two learn of the outage now.
        #expect(m.connectionFailed(1, error: boom) == [.failWaiter(1, boom), .failWaiter(2, boom)])
        #expect(m.stats == .init(open: 0, idle: 0, inUse: 0, connecting: 1, waiters: 1, maxConnections: 2))
        #expect(m.connectionFailed(2, error: boom) == [.failWaiter(3, boom)])
        // The next attempts wait a backoff that grows with the failures in a row.
        #expect(m.acquire(4) == [.openConnectionAfterBackoff(3, failures: 2)])
        #expect(m.connectionFailed(3, error: boom) == [.failWaiter(4, boom)])
        #expect(m.acquire(5) == [.openConnectionAfterBackoff(4, failures: 3)])
        // One success resets it.
        #expect(m.connectionOpened(4) == [.lease(4, to: 5)])
        #expect(m.acquire(6) == [.openConnection(5)])
    }

    @Test func connectBackoffIsBoundedAndJittered() {
        let first = (0..<50).map { _ in PostgresPool.backoff(failures: 1) }
        #expect(first.allSatisfy { $0 >= .milliseconds(10) && $0 <= .milliseconds(20) })
        let late = (0..<50).map { _ in PostgresPool.backoff(failures: 1_000) }
        #expect(late.allSatisfy { $0 >= .milliseconds(250) && $0 <= .milliseconds(500) })
        #expect(Set(late).count > 1)
    }

    @Test func brokenConnectionIsDiscardedAndReplacedForWaiters() {
        var m = PoolStateMachine(maxConnections: 1)
        _ = m.acquire(1)
        _ = m.connectionOpened(1)
        #expect(m.acquire(2) == [])
        #expect(m.release(1, reusable: false) == [.closeConnection(1), .openConnection(2)])
        #expect(m.connectionOpened(2) == [.lease(2, to: 2)])
    }

    @Test func brokenConnectionWithoutWaitersIsJustClosed() {
        var m = PoolStateMachine(maxConnections: 1)
        _ = m.acquire(1)
        _ = m.connectionOpened(1)
        #expect(m.release(1, reusable: false) == [.closeConnection(1)])
        #expect(m.stats.open == 0)
        #expect(m.acquire(2) == [.openConnection(2)])
    }

    @Test func closeClosesIdleFailsWaitersAndClosesLeasedOnRelease() {
        var m = PoolStateMachine(maxConnections: 2)
        _ = m.acquire(1)
        _ = m.acquire(2)
        _ = m.connectionOpened(1)
        _ = m.connectionOpened(2)
        #expect(m.release(2, reusable: true) == [])
        #expect(m.acquire(3) == [.lease(2, to: 3)])
        #expect(m.acquire(4) == [])
        _ = m.release(2, reusable: true)  // goes to waiter 4
        #expect(m.acquire(5) == [])
        let closed = PoolStateMachine.closedError
        #expect(m.close() == [.failWaiter(5, closed)])
        #expect(m.release(1, reusable: true) == [.closeConnection(1)])
        #expect(m.release(2, reusable: true) == [.closeConnection(2)])
        #expect(m.acquire(6) == [.failWaiter(6, closed)])
        #expect(m.close() == [])
        #expect(m.stats.open == 0)
    }

    @Test func closeWhileConnectingClosesTheNewConnection() {
        var m = PoolStateMachine(maxConnections: 1)
        _ = m.acquire(1)
        #expect(m.close() == [.failWaiter(1, PoolStateMachine.closedError)])
        #expect(m.connectionOpened(1) == [.closeConnection(1)])
    }

    @Test func closeWithIdleConnections() {
        var m = PoolStateMachine(maxConnections: 2)
        _ = m.acquire(1)
        _ = m.connectionOpened(1)
        _ = m.release(1, reusable: true)
        #expect(m.close() == [.closeConnection(1)])
        #expect(m.stats.idle == 0)
    }

    @Test func staleEventsAreIgnored() {
        var m = PoolStateMachine(maxConnections: 1)
        #expect(m.release(42, reusable: true) == [])
        #expect(m.connectionOpened(42) == [])
        #expect(m.connectionFailed(42, error: boom) == [])
        #expect(m.waiterCancelled(42) == [])
    }
}
