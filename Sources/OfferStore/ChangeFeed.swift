import Foundation
import Postgres
import Synchronization

/// A change to stored data that other gateway processes may hold cached, as announced by the database itself
/// (triggers `NOTIFY` on every write, whichever process made it; see migrations 0001, 0002, 0003 and 0013).
public enum StoreChange: Sendable, Hashable {
    /// The tenant's catalog (groups, products, offers), its signing keys, its settings (`tenants.update`: app
    /// Apple id, Sandbox/Xcode flags; migration 0003) or its API keys (migration 0013) changed. One announcement
    /// stands for all (the schema does not tell them apart, and gateways of different versions share a database):
    /// drop them all.
    case catalogOrSigningKeys(tenant: UUID)
    /// The subscription history of one customer of the tenant changed: recorded transactions, or Apple's data
    /// (transactions and renewal infos, including ones a link just gave them).
    case customer(tenant: UUID, customerId: String)
    /// Changes may have gone unseen: drop everything cached.
    case mayHaveMissedChanges(MissedChangesReason)
}

/// Why a `ChangeFeed` may have missed changes.
public enum MissedChangesReason: Sendable, Hashable {
    /// The feed has just started listening: whatever was cached before may be older than it.
    case started
    /// The connection to the database was lost (a restart, a failover): until `.reconnected`, announcements may be
    /// missed, so nothing cached is provably current. Consumers drop everything and keep nothing new until then.
    case connectionLost
    /// The connection to the database was lost and is back: announcements made meanwhile are gone.
    case reconnected
    /// The consumer fell behind and the feed's buffer was full: the queued changes were dropped.
    case overflow
    /// An announcement this version cannot read (a newer schema's format, say).
    case unrecognised
}

/// The bounded queue between the feed and its one consumer, as a pure value (unit-tested without PostgreSQL).
///
/// It never drops a change silently: when a change would exceed `capacity`, the whole queue is replaced by
/// `.mayHaveMissedChanges(.overflow)`. While such a marker waits, later changes add nothing (the marker makes the
/// consumer drop everything, which covers them), and a change already queued is not queued twice. A marker about
/// the connection (`.started`, `.connectionLost`, `.reconnected`) replaces a waiting marker, so the consumer
/// always learns the feed's latest state (listening or not); `.overflow` and `.unrecognised` add nothing to one.
struct ChangeBuffer: Sendable {
    let capacity: Int
    private var queue: [StoreChange] = []
    private var head = 0
    private var queued: Set<StoreChange> = []
    /// How many times the queue overflowed.
    private(set) var overflows = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { queue.count - head }
    var isEmpty: Bool { count == 0 }

    /// Whether the queue holds a `.mayHaveMissedChanges` marker (then it holds nothing else).
    private var holdsMarker: Bool {
        guard count == 1, case .mayHaveMissedChanges = queue[head] else { return false }
        return true
    }

    mutating func push(_ change: StoreChange) {
        if case .mayHaveMissedChanges(let reason) = change {
            // Supersedes everything queued. A waiting marker stays when this one says less (an overflow or an
            // unrecognised change only asks for a drop, which the waiting one already does); a connection marker
            // replaces it, since whether the feed is listening now is what the consumer must act on.
            if holdsMarker && (reason == .overflow || reason == .unrecognised) { return }
            replace(with: change)
            return
        }
        if holdsMarker || queued.contains(change) { return }
        if count >= capacity {
            overflows += 1
            replace(with: .mayHaveMissedChanges(.overflow))
            return
        }
        queue.append(change)
        queued.insert(change)
    }

    mutating func pop() -> StoreChange? {
        guard head < queue.count else { return nil }
        let change = queue[head]
        head += 1
        queued.remove(change)
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1_024, head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
        return change
    }

    private mutating func replace(with marker: StoreChange) {
        queue.removeAll(keepingCapacity: true)
        head = 0
        queued.removeAll(keepingCapacity: true)
        queue.append(marker)
    }
}

/// The store's change feed: what other processes (and this one) changed, read from PostgreSQL's `LISTEN`/`NOTIFY`
/// and turned into `StoreChange`s. Callers never see channel names or payload formats.
///
/// One long-running `run()` (start it in a task you own, cancel that task to stop it) keeps a dedicated connection
/// listening and reconnects by itself; `changes` is the single consumer's sequence. The buffer between the two is
/// bounded (`bufferSize`) and never drops silently (see `MissedChangesReason.overflow`).
public final class ChangeFeed: Sendable {
    /// Buffer size unless told otherwise: a burst of this many distinct changes waits for a slow consumer.
    public static let defaultBufferSize = 4_096

    /// The channel catalog, signing-key, tenant-settings and API-key changes are announced on, with the tenant id
    /// (migrations 0001, 0003, 0013).
    static let catalogChannel = "offergate_catalog"
    /// The channel changes to a customer's transactions are announced on, `<tenant>:<customer>` (migrations/0002).
    static let customerChannel = "offergate_customer"

    private enum Readiness {
        case waiting([CheckedContinuation<Void, any Error>])
        case listening
        case ended(StoreError)
    }

    private struct State {
        var buffer: ChangeBuffer
        var consumer: CheckedContinuation<StoreChange?, Never>?
        var finished = false
        var readiness: Readiness = .waiting([])
    }

    private let configuration: PostgresConfiguration
    private let reconnectDelay: Duration
    private let state: Mutex<State>
    private let notificationsRead = Atomic<Int>(0)

    /// A feed for `database`, not yet listening (call `run()`).
    public init(
        database: OfferDatabase, bufferSize: Int = ChangeFeed.defaultBufferSize,
        reconnectDelay: Duration = .milliseconds(200)
    ) {
        self.configuration = database.pool.configuration
        self.reconnectDelay = reconnectDelay
        self.state = Mutex(State(buffer: ChangeBuffer(capacity: bufferSize)))
    }

    /// The changes, in order, for ONE consumer. Ends when `run()` returns.
    public var changes: Changes { Changes(feed: self) }

    /// How many times the buffer overflowed so far (each time the consumer was told to drop everything).
    public var overflows: Int { state.withLock { $0.buffer.overflows } }

    /// How many notifications `run()` has read from PostgreSQL so far (queued, merged or covered by a marker alike):
    /// lets a caller know a burst has been read in full, however many socket reads it took.
    public var notificationCount: Int { notificationsRead.load(ordering: .acquiring) }

    /// Listens until the calling task is cancelled, reconnecting by itself (a lost connection delivers
    /// `.mayHaveMissedChanges(.connectionLost)`, each reconnect `.mayHaveMissedChanges(.reconnected)`); delivers
    /// `.mayHaveMissedChanges(.started)` once first listening. With a multi-host URL it follows the primary.
    /// Throws `.unavailable` if the first connect fails. Ends `changes` when it returns. Call it once per feed
    /// (a feed that ended stays ended: make a new one).
    public func run() async throws(StoreError) {
        do {
            try await PostgresListener.run(
                configuration: configuration, channels: [Self.catalogChannel, Self.customerChannel],
                reconnectDelay: reconnectDelay,
                onListening: { [self] in
                    push(.mayHaveMissedChanges(.started))
                    becomeReady(nil)
                },
                deliver: { [self] event in
                    switch event {
                    case .notification(let note):
                        notificationsRead.add(1, ordering: .releasing)
                        push(Self.change(channel: note.channel, payload: note.payload))
                    case .disconnected: push(.mayHaveMissedChanges(.connectionLost))
                    case .reconnected: push(.mayHaveMissedChanges(.reconnected))
                    }
                })
            finish(StoreError.wrap(PostgresError.cancelledByTask()))
        } catch {
            let failure = StoreError.wrap(error)
            finish(failure)
            throw failure
        }
    }

    /// Returns once `run()` listens (so no change made after this returns is missed); throws what `run()` threw
    /// if it ended first.
    public func waitUntilListening() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome: Result<Void, StoreError>? = state.withLock { s in
                switch s.readiness {
                case .waiting(var waiters):
                    waiters.append(continuation)
                    s.readiness = .waiting(waiters)
                    return nil
                case .listening: return .success(())
                case .ended(let error): return .failure(error)
                }
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }

    /// The change a notification announces. Payload forms: `<tenant uuid>` on the catalog channel,
    /// `<tenant uuid>:<customer id>` on the customer channel (a UUID has no ':', a customer id may).
    static func change(channel: String, payload: String) -> StoreChange {
        switch channel {
        case catalogChannel:
            if let tenant = UUID(uuidString: payload) { return .catalogOrSigningKeys(tenant: tenant) }
        case customerChannel:
            let parts = payload.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2, let tenant = UUID(uuidString: String(parts[0])) {
                return .customer(tenant: tenant, customerId: String(parts[1]))
            }
        default:
            break
        }
        return .mayHaveMissedChanges(.unrecognised)
    }

    // MARK: Buffer and consumer

    func push(_ change: StoreChange) {
        let consumer = state.withLock { s -> CheckedContinuation<StoreChange?, Never>? in
            guard !s.finished else { return nil }
            if let consumer = s.consumer {
                s.consumer = nil
                return consumer
            }
            s.buffer.push(change)
            return nil
        }
        consumer?.resume(returning: change)
    }

    private func becomeReady(_ error: StoreError?) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
            guard case .waiting(let waiters) = s.readiness else { return [] }
            s.readiness = error.map { .ended($0) } ?? .listening
            return waiters
        }
        for waiter in waiters {
            if let error { waiter.resume(throwing: error) } else { waiter.resume() }
        }
    }

    private func finish(_ error: StoreError) {
        becomeReady(error)
        let consumer = state.withLock { s in
            s.finished = true
            defer { s.consumer = nil }
            return s.consumer
        }
        consumer?.resume(returning: nil)
    }

    fileprivate func next() async -> StoreChange? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<StoreChange?, Never>) in
                let ready = state.withLock { s -> StoreChange?? in
                    if let change = s.buffer.pop() { return .some(change) }
                    if s.finished || Task.isCancelled { return .some(nil) }
                    precondition(s.consumer == nil, "ChangeFeed.changes has one consumer")
                    s.consumer = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let consumer = state.withLock { s in
                defer { s.consumer = nil }
                return s.consumer
            }
            consumer?.resume(returning: nil)
        }
    }

    /// The single consumer's view of the feed.
    public struct Changes: AsyncSequence, Sendable {
        public typealias Element = StoreChange
        let feed: ChangeFeed

        public func makeAsyncIterator() -> Iterator { Iterator(feed: feed) }

        public struct Iterator: AsyncIteratorProtocol, Sendable {
            let feed: ChangeFeed

            /// The next change; nil once the feed stopped or the consuming task was cancelled.
            public mutating func next() async -> StoreChange? { await feed.next() }
        }
    }
}
