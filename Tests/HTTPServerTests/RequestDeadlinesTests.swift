import HTTPServer
import Testing

/// The slowloris guard, event by event (a pure state machine: no clock but the instants fed to it).
@Suite("RequestDeadlines")
struct RequestDeadlinesTests {
    let start = ContinuousClock.now

    @Test("a connection that never completes its request expires once, at its deadline, not before")
    func expiresOnce() {
        var deadlines = RequestDeadlines<Int32>(timeout: .seconds(10))
        deadlines.opened(7, at: start)
        #expect(deadlines.expire(at: start + .seconds(9)).isEmpty)
        #expect(deadlines.expire(at: start + .seconds(10)) == [7])
        #expect(deadlines.connections[7] == .expired)
        #expect(deadlines.expire(at: start + .seconds(60)).isEmpty, "shut down once only")
        deadlines.closed(7)
        #expect(deadlines.connections[7] == nil)
    }

    @Test("a request being handled has no deadline; the next one's clock starts when the response is sent")
    func handlingHasNoDeadline() {
        var deadlines = RequestDeadlines<Int32>(timeout: .seconds(10))
        deadlines.opened(3, at: start)
        deadlines.handling(3)
        #expect(deadlines.expire(at: start + .seconds(100)).isEmpty)
        deadlines.requestEnded(3, at: start + .seconds(100))
        #expect(deadlines.expire(at: start + .seconds(109)).isEmpty)
        #expect(deadlines.expire(at: start + .seconds(110)) == [3])
    }

    @Test("events for unknown or expired connections change nothing")
    func strayEvents() {
        var deadlines = RequestDeadlines<Int32>(timeout: .seconds(1))
        deadlines.handling(1)
        deadlines.requestEnded(1, at: start)
        #expect(deadlines.connections.isEmpty)
        deadlines.opened(2, at: start)
        _ = deadlines.expire(at: start + .seconds(1))
        deadlines.requestEnded(2, at: start + .seconds(2))
        deadlines.handling(2)
        #expect(deadlines.connections[2] == .expired, "an expired connection stays expired until closed")
        deadlines.opened(2, at: start + .seconds(3))
        #expect(deadlines.connections[2] == .reading(deadline: start + .seconds(4)), "a reused descriptor starts anew")
    }

    @Test("many connections: only the late ones expire")
    func onlyLateOnes() {
        var deadlines = RequestDeadlines<Int32>(timeout: .seconds(5))
        for fd in Int32(0)..<100 { deadlines.opened(fd, at: start + .seconds(Int(fd % 10))) }
        let late = deadlines.expire(at: start + .seconds(9)).sorted()
        #expect(late == (Int32(0)..<100).filter { $0 % 10 <= 4 })
    }
}
