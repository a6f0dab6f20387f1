/// The group-commit state machine of one campaign (pure: events in, actions out; no IO, no clock).
///
/// At most one batch is committing at a time. A request that arrives while the owner is idle starts a batch at
/// once (or, with a linger window, when the window's timer fires); requests that arrive while a batch commits
/// wait and form the next batch, up to `maxBatchSize`. So under light load a redemption costs one transaction of
/// its own, and under heavy load the hot row is locked and fsynced once per batch instead of once per request.
struct GroupCommitBatcher<Item: Sendable>: Sendable {
    /// What the owner must do next.
    enum Action: Sendable {
        /// Commit these items as one batch, then report `batchFinished()`.
        case commit([Item])
        /// Start a timer for the linger window, then report `timerFired()`.
        case startTimer
        /// Nothing to do now.
        case none
    }

    enum Phase: Sendable, Equatable {
        /// No batch committing, nothing queued.
        case idle
        /// Waiting for the linger timer before the first batch.
        case lingering
        /// A batch is committing.
        case committing
    }

    let maxBatchSize: Int
    /// Whether idle requests wait for a timer (a linger window) before committing.
    let lingers: Bool
    private(set) var phase: Phase = .idle
    private(set) var queue: [Item] = []

    init(maxBatchSize: Int, lingers: Bool = false) {
        self.maxBatchSize = max(1, maxBatchSize)
        self.lingers = lingers
    }

    /// A request arrived.
    mutating func submit(_ item: Item) -> Action {
        queue.append(item)
        switch phase {
        case .idle:
            if lingers {
                phase = .lingering
                return .startTimer
            }
            return takeBatch()
        case .lingering, .committing:
            return .none
        }
    }

    /// The linger window ended.
    mutating func timerFired() -> Action {
        guard phase == .lingering else { return .none }
        return takeBatch()
    }

    /// The committing batch finished (committed or failed; its items were answered by the owner).
    mutating func batchFinished() -> Action {
        guard phase == .committing else { return .none }
        if queue.isEmpty {
            phase = .idle
            return .none
        }
        return takeBatch()
    }

    /// Removes and returns every queued item (shutdown).
    mutating func drain() -> [Item] {
        defer { queue.removeAll() }
        if phase == .lingering { phase = .idle }
        return queue
    }

    private mutating func takeBatch() -> Action {
        let n = min(maxBatchSize, queue.count)
        let batch = Array(queue.prefix(n))
        queue.removeFirst(n)
        phase = .committing
        return .commit(batch)
    }
}
