// A thread of its own that runs submitted jobs in order, taken in batches: work moved off a transport's thread
// without the cooperative pool's task and hand-offs.
import Dispatch
import JSONRPC
import Synchronization
import Threads

/// Runs jobs one after another on a dedicated thread, started at the first `submit` and ended when this object is
/// released (after the jobs already submitted). Jobs submitted while it runs are taken together at its next turn:
/// a steady stream costs one lock per job and one wake-up per batch, not one per job. `backlog` tells a caller
/// when doing the job itself would be sooner.
final class WorkThread: Sendable {
    private final class Queue: Sendable {
        struct State {
            var jobs: [@Sendable () -> Void] = []
            /// The thread waits for the semaphore: the next `submit` signals it.
            var idle = false
            var started = false
            var ending = false
        }
        let state = Mutex(State())
        let wake = DispatchSemaphore(value: 0)
        /// Jobs submitted; jobs finished.
        let submitted = Atomic<Int>(0)
        let finished = Atomic<Int>(0)

        func run() {
            var batch: [@Sendable () -> Void] = []
            while true {
                let ending = state.withLock { s -> Bool in
                    swap(&batch, &s.jobs)
                    if batch.isEmpty { s.idle = !s.ending }
                    return s.ending
                }
                if batch.isEmpty {
                    if ending { return }
                    wake.wait()
                    continue
                }
                for job in batch {
                    job()
                    finished.add(1, ordering: .relaxed)
                }
                batch.removeAll(keepingCapacity: true)
            }
        }
    }

    private let queue = Queue()
    let name: String

    init(name: String) { self.name = name }

    /// Jobs submitted and not finished yet (the one running included).
    var backlog: Int { queue.submitted.load(ordering: .relaxed) - finished }

    /// Jobs finished since the start.
    var finished: Int { queue.finished.load(ordering: .relaxed) }

    deinit {
        let wakeIt = queue.state.withLock { s -> Bool in
            s.ending = true
            defer { s.idle = false }
            return s.idle
        }
        if wakeIt { queue.wake.signal() }
    }

    /// Queues `job` for the thread (starting it the first time).
    func submit(_ job: @escaping @Sendable () -> Void) {
        queue.submitted.add(1, ordering: .relaxed)
        let (start, wakeIt) = queue.state.withLock { s -> (Bool, Bool) in
            s.jobs.append(job)
            defer { (s.started, s.idle) = (true, false) }
            return (!s.started, s.idle)
        }
        if wakeIt { queue.wake.signal() }
        if start {
            // The thread holds the queue, not this object: releasing the owner ends it.
            let queue = queue
            startThread(named: name) { queue.run() }
        }
    }
}
