import Dispatch
import Synchronization

/// Runs actions at their deadlines, on one Dispatch timer for all of them: a deadline costs an entry in a heap, not
/// a task, a sleep or a timer of its own. Made for many short deadlines that are mostly met (Retention Messaging's
/// budget, one per answer): an entry whose action is no longer wanted is `cancel`led, and every cancelled entry at the
/// top of the heap is dropped whenever the timer fires, which then waits for the first entry still pending. Under
/// load that is a few firings a second (each clears every answer given since the last), not one per entry.
///
/// Actions run on the timer's serial queue, one after another: they must be quick and never block (resume a
/// continuation, cancel a task).
final class DeadlineTimer: Sendable {
    /// The process's timer (one Dispatch timer source, created on first use).
    static let shared = DeadlineTimer()

    /// One scheduled action; `cancel()` means it will not run (if it has not yet).
    final class Entry: Sendable {
        let deadline: ContinuousClock.Instant
        private let action: Mutex<(@Sendable () -> Void)?>

        fileprivate init(_ deadline: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void) {
            self.deadline = deadline
            self.action = Mutex(action)
        }

        /// The action will not run; whether it was still pending.
        @discardableResult
        func cancel() -> Bool { action.withLock { $0.take() } != nil }

        fileprivate var isPending: Bool { action.withLock { $0 != nil } }

        fileprivate func fire() { action.withLock { $0.take() }?() }
    }

    private struct State {
        /// A binary min-heap by deadline.
        var heap: [Entry] = []
        /// The deadline the timer is set for (nil: not set).
        var armed: ContinuousClock.Instant?
        /// Set only under the lock, so two callers never leave it at the later of their deadlines.
        let timer: any DispatchSourceTimer
    }

    private let state: Mutex<State>

    init() {
        state = Mutex(State(timer: DispatchSource.makeTimerSource(queue: DispatchQueue(label: "offergate.deadlines"))))
        state.withLock { s in
            s.timer.setEventHandler { [weak self] in self?.fired() }
            s.timer.activate()
        }
    }

    deinit { state.withLock { $0.timer.cancel() } }

    /// Entries held (pending or not yet dropped), for tests.
    var count: Int { state.withLock { $0.heap.count } }

    /// Runs `action` at `deadline` (at once, on the timer's queue, when it has passed) unless the returned entry is
    /// cancelled first.
    @discardableResult
    func schedule(at deadline: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void) -> Entry {
        let entry = Entry(deadline, action)
        state.withLock { s in
            Self.push(entry, into: &s.heap)
            if s.armed.map({ deadline < $0 }) ?? true { arm(deadline, &s) }
        }
        return entry
    }

    private func arm(_ deadline: ContinuousClock.Instant, _ s: inout State) {
        s.armed = deadline
        let wait = max(.zero, deadline - ContinuousClock.now)
        s.timer.schedule(deadline: .now() + .nanoseconds(Int(wait / .nanoseconds(1))), leeway: .nanoseconds(0))
    }

    /// Runs every action whose deadline passed, drops cancelled entries from the top, and sets the timer for the
    /// first pending one left.
    private func fired() {
        let now = ContinuousClock.now
        var due: [Entry] = []
        state.withLock { s in
            while let top = s.heap.first, top.deadline <= now || !top.isPending {
                due.append(Self.popMin(&s.heap))
            }
            s.armed = nil
            if let next = s.heap.first?.deadline { arm(next, &s) }
        }
        for entry in due { entry.fire() }
    }

    private static func push(_ entry: Entry, into heap: inout [Entry]) {
        heap.append(entry)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].deadline < heap[parent].deadline else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private static func popMin(_ heap: inout [Entry]) -> Entry {
        let top = heap[0]
        let last = heap.removeLast()
        guard !heap.isEmpty else { return top }
        heap[0] = last
        var i = 0
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var smallest = i
            if l < heap.count, heap[l].deadline < heap[smallest].deadline { smallest = l }
            if r < heap.count, heap[r].deadline < heap[smallest].deadline { smallest = r }
            guard smallest != i else { break }
            heap.swapAt(i, smallest)
            i = smallest
        }
        return top
    }
}
