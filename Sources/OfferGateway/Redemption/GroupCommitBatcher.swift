/// The group-commit state machine of one writer (pure: events in, actions out; no IO, no clock).
///
/// At most `maxInFlight` batches commit at a time (one for a campaign, whose batches serialise on its row anyway).
/// A request that arrives while none is committing starts a batch at once (or, with a linger window, when the
/// window's timer fires); requests that arrive meanwhile wait and form the next batch, up to `maxBatchSize`. So under
/// light load a request costs one transaction of its own, and under heavy load the hot row is locked and fsynced
/// once per batch instead of once per request.
///
/// A slot beyond the first is for bursts and slow commits: another batch starts while one commits only once twice as
/// many requests wait as the batch started last carried. A lone first request then holds up the burst behind it for
/// two arrivals only, and a commit that takes twice as long as the one before it is overtaken, while a steady stream
/// fills its batches as one slot would: as many arrive during a commit as it carries, and they go when it ends.
/// Opening every free slot at once split steady load into twice the batches, half as large, and each batch costs
/// PostgreSQL a statement and a commit (docs/perf/b9-retention.md, round 4). Requests never wait for more than the
/// batches committing: when the last of them ends, whatever waits goes.
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
        /// At least one batch is committing.
        case committing
    }

    let maxBatchSize: Int
    /// How many batches may commit at once.
    let maxInFlight: Int
    /// Whether idle requests wait for a timer (a linger window) before committing.
    let lingers: Bool
    private var isLingering = false
    /// Batches committing now.
    private(set) var inFlight = 0
    /// How many requests the batch started last carried: twice as many must wait before another slot opens.
    private var lastBatchSize = 0
    private(set) var queue: [Item] = []

    var phase: Phase { inFlight > 0 ? .committing : isLingering ? .lingering : .idle }

    init(maxBatchSize: Int, maxInFlight: Int = 1, lingers: Bool = false) {
        self.maxBatchSize = max(1, maxBatchSize)
        self.maxInFlight = max(1, maxInFlight)
        self.lingers = lingers
    }

    /// A request arrived.
    mutating func submit(_ item: Item) -> Action {
        queue.append(item)
        if isLingering || !mayStart { return .none }
        if lingers && inFlight == 0 {
            isLingering = true
            return .startTimer
        }
        return takeBatch()
    }

    /// The linger window ended.
    mutating func timerFired() -> Action {
        guard isLingering else { return .none }
        isLingering = false
        return takeBatch()
    }

    /// A committing batch finished (committed or failed; its items were answered by the owner).
    mutating func batchFinished() -> Action {
        guard inFlight > 0 else { return .none }
        inFlight -= 1
        return !queue.isEmpty && mayStart ? takeBatch() : .none
    }

    /// Removes and returns every queued item (shutdown).
    mutating func drain() -> [Item] {
        defer { queue.removeAll() }
        isLingering = false
        return queue
    }

    /// Whether the queue may start a batch now: with none committing, or with a slot free and twice as many waiting
    /// as the last batch carried.
    private var mayStart: Bool {
        inFlight == 0 || (inFlight < maxInFlight && queue.count >= 2 * lastBatchSize)
    }

    private mutating func takeBatch() -> Action {
        let n = min(maxBatchSize, queue.count)
        lastBatchSize = n
        let batch = Array(queue.prefix(n))
        queue.removeFirst(n)
        inFlight += 1
        return .commit(batch)
    }
}
