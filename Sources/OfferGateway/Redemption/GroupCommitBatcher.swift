/// The group-commit state machine of one writer (pure: events in, actions out; no IO, no clock).
///
/// At most `maxInFlight` batches commit at a time (one for a campaign, whose batches serialise on its row anyway).
/// A request that arrives while none is committing starts a batch at once (or, with a linger window, when the
/// window's timer fires); requests that arrive meanwhile wait and form the next batch, up to `maxBatchSize`. So under
/// light load a request costs one transaction of its own, and under heavy load the hot row is locked and fsynced
/// once per batch instead of once per request.
///
/// A slot beyond the first is for bursts and slow commits: another batch starts while one commits only once
/// `burstRatio` times as many requests wait as the batch started last carried (twice, by default). A lone first
/// request then holds up the burst behind it for two arrivals only, and a commit that takes twice as long as the one
/// before it is overtaken, while a steady stream fills its batches as one slot would: as many arrive during a commit
/// as it carries, and they go when it ends. Opening every free slot at once split steady load into twice the batches,
/// half as large, and each batch costs PostgreSQL a statement and a commit (docs/perf/b9-retention.md, round 4).
/// Where a batch's cost is mostly per row rather than per statement (notifications, each with its JWS stored), a
/// ratio of 1 lets a second batch as large as the last overlap it: in a closed loop of N requests, twice the last
/// batch can never wait once that batch carries more than a third of N (docs/perf/b11-ingestion.md, session 36). Requests
/// never wait for more than the batches committing: when the last of them ends, whatever waits goes.
///
/// A deferrable item (one nobody waits for: a retention answer's record, written after the answer) never starts a
/// batch by itself: it rides in the next batch that starts for a waiting one, or, if none comes, in a batch started
/// when the timer it asked for fires (`timerFired()`), or at `flush()`. (A lingering batcher treats every item as
/// waiting: its one timer is the linger window.)
struct GroupCommitBatcher<Item: Sendable>: Sendable {
    /// What the owner must do next.
    enum Action: Sendable {
        /// Commit these items as one batch, then report `batchFinished()`.
        case commit([Item])
        /// Start a timer (the linger window, or how long a deferrable item may wait), then report `timerFired()`.
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
    /// How many times the last batch's size must wait before a slot beyond the first opens.
    let burstRatio: Int
    private var isLingering = false
    /// Batches committing now.
    private(set) var inFlight = 0
    /// How many requests the batch started last carried: `burstRatio` times as many must wait before another slot
    /// opens.
    private var lastBatchSize = 0
    private(set) var queue: [Item] = []
    /// Queued items that someone waits for (not deferrable); while there are none, the queue starts no batch unless
    /// its deferred items are due.
    private var waiting = 0
    /// Whether a timer for the deferred items runs.
    private var deferralTimerRuns = false
    /// Whether the deferred items waited long enough (their timer fired, or `flush()`): they may start a batch.
    private var deferredDue = false

    var phase: Phase { inFlight > 0 ? .committing : isLingering ? .lingering : .idle }

    init(maxBatchSize: Int, maxInFlight: Int = 1, lingers: Bool = false, burstRatio: Int = 2) {
        self.maxBatchSize = max(1, maxBatchSize)
        self.maxInFlight = max(1, maxInFlight)
        self.lingers = lingers
        self.burstRatio = max(1, burstRatio)
    }

    /// A request arrived; a `deferrable` one waits for a batch started by another, or for its timer.
    mutating func submit(_ item: Item, deferrable: Bool = false) -> Action {
        queue.append(item)
        if !deferrable || lingers { waiting += 1 }
        if isLingering { return .none }
        if waiting == 0 && !deferredDue {
            if deferralTimerRuns { return .none }
            deferralTimerRuns = true
            return .startTimer
        }
        if !mayStart { return .none }
        if lingers && inFlight == 0 {
            isLingering = true
            return .startTimer
        }
        return takeBatch()
    }

    /// The timer asked for ended: the linger window, or the deferred items' wait.
    mutating func timerFired() -> Action {
        if isLingering {
            isLingering = false
            return takeBatch()
        }
        guard deferralTimerRuns else { return .none }
        deferralTimerRuns = false
        return flush()
    }

    /// Deferred items (and a linger window) wait no longer: the queue starts a batch as waiting items would (with
    /// none committing, at once).
    mutating func flush() -> Action {
        guard !queue.isEmpty else { return .none }
        isLingering = false
        deferredDue = true
        return mayStart ? takeBatch() : .none
    }

    /// A committing batch finished (committed or failed; its items were answered by the owner).
    mutating func batchFinished() -> Action {
        guard inFlight > 0 else { return .none }
        inFlight -= 1
        return !queue.isEmpty && mayStart ? takeBatch() : .none
    }

    /// Removes and returns every queued item (shutdown).
    mutating func drain() -> [Item] {
        defer {
            queue.removeAll()
            (waiting, deferredDue) = (0, false)
        }
        isLingering = false
        return queue
    }

    /// Whether the queue may start a batch now: when someone waits in it (or its deferred items are due), with none
    /// committing, or with a slot free and `burstRatio` times as many queued as the last batch carried.
    private var mayStart: Bool {
        (waiting > 0 || deferredDue)
            && (inFlight == 0 || (inFlight < maxInFlight && queue.count >= burstRatio * lastBatchSize))
    }

    private mutating func takeBatch() -> Action {
        let n = min(maxBatchSize, queue.count)
        lastBatchSize = n
        let batch = Array(queue.prefix(n))
        queue.removeFirst(n)
        // What a full batch left behind goes next as if waited for (which of it was deferrable is not kept).
        waiting = queue.count
        deferredDue = false
        inFlight += 1
        return .commit(batch)
    }
}
