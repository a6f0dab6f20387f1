import Foundation
import OfferTestSupport
import Synchronization
import Testing

@testable import OfferGateway

@Suite struct WorkThreadTests {
    @Test("jobs run in the order submitted, each once, and the backlog empties")
    func runsInOrder() async throws {
        let thread = WorkThread(name: "wt-order")
        let seen = Mutex<[Int]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            for i in 0..<5_000 {
                thread.submit {
                    seen.withLock { $0.append(i) }
                    if i == 4_999 { done.resume() }
                }
            }
        }
        #expect(seen.withLock { $0 } == Array(0..<5_000))
        #expect(await eventually { thread.finished == 5_000 && thread.backlog == 0 })
    }

    @Test("the backlog counts jobs waiting and running")
    func backlogCountsWaitingJobs() async throws {
        let thread = WorkThread(name: "wt-backlog")
        let gate = DispatchSemaphore(value: 0)
        thread.submit { gate.wait() }
        thread.submit {}
        thread.submit {}
        #expect(thread.backlog == 3)
        #expect(thread.finished == 0)
        gate.signal()
        #expect(await eventually { thread.backlog == 0 && thread.finished == 3 })
    }

    @Test("its thread starts at the first job and ends when the owner is released")
    func threadEndsWithItsOwner() async throws {
        let name = "wt-\(UInt32.random(in: 0..<100_000_000))"
        var thread: WorkThread? = WorkThread(name: name)
        #expect(try !threadNames().contains(name), "no thread before the first job")
        let ran = Mutex(false)
        thread?.submit { ran.withLock { $0 = true } }
        #expect(await eventually { ran.withLock { $0 } })
        #expect(try threadNames().contains(name))
        thread = nil
        #expect(try await eventually { try !threadNames().contains(name) })
    }
}
