// A count of live things that shutdown waits on: woken when it reaches zero, never polled.
import Synchronization

/// Counts live things (open connections, sessions still answering) and lets tasks wait, with a deadline, until
/// none is left. The last `decrement()` resumes the waiters; nothing polls. Public for the HTTP listener's shutdown.
public final class LiveCount: Sendable {
    struct State {
        var count = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextToken: UInt64 = 0
    }

    let state = Mutex(State())

    public init() {}

    public var value: Int { state.withLock { $0.count } }

    public func increment() { state.withLock { $0.count += 1 } }

    public func decrement() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.count -= 1
            guard s.count <= 0 else { return [] }
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the count is zero (at once if it is), or when the calling task is cancelled.
    public func waitForZero() async {
        let token = state.withLock { s -> UInt64 in
            defer { s.nextToken += 1 }
            return s.nextToken
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.count <= 0 { return true }
                    s.waiters[token] = continuation
                    return false
                }
                if now {
                    continuation.resume()
                } else if Task.isCancelled {
                    // Cancelled before the waiter was stored: the handler below found nothing to resume.
                    resumeWaiter(token)
                }
            }
        } onCancel: {
            resumeWaiter(token)
        }
    }

    /// Returns whether the count reached zero before `deadline`.
    public func waitForZero(until deadline: ContinuousClock.Instant) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await self.waitForZero()
                return !Task.isCancelled
            }
            group.addTask {
                // A deadline, not a poll: this child only bounds the wait above.
                try? await Task.sleep(until: deadline, clock: .continuous)
                return false
            }
            let reachedZero = await group.next() ?? false
            group.cancelAll()
            return reachedZero || value <= 0
        }
    }

    private func resumeWaiter(_ token: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: token) }?.resume()
    }
}
