import Foundation
import OfferTestSupport
import Synchronization
import Testing

@testable import OfferGateway

/// `GroupCommitWriter` without a database: each commit is held until the test lets it finish, so what forms a batch,
/// when a caller is told and when `run()` returns are known.
@Suite("Group commit writer")
struct GroupCommitWriterTests {
    /// Commits that wait for `finish(_:with:)`; each call's rows and completion are kept in order.
    final class HeldCommits: Sendable {
        private let calls = Mutex<[(rows: [Int], committed: @Sendable (Result<Void, any Error>) -> Void)]>([])

        var batches: [[Int]] { calls.withLock { $0.map(\.rows) } }

        func commit(_ rows: [Int], _ committed: @escaping @Sendable (Result<Void, any Error>) -> Void) {
            calls.withLock { $0.append((rows, committed)) }
        }

        /// Tells the `index`th commit's outcome.
        func finish(_ index: Int, with result: Result<Void, any Error> = .success(())) {
            let committed = calls.withLock { $0[index].committed }
            committed(result)
        }
    }

    /// What each row's caller was told, by row.
    final class Outcomes: Sendable {
        private let told = Mutex<[Int: String]>([:])

        var all: [Int: String] { told.withLock { $0 } }

        func done(_ row: Int) -> @Sendable (Result<Void, any Error>) -> Void {
            { result in
                let said: String
                switch result {
                case .success: said = "committed"
                case .failure(GatewayError.unavailable): said = "unavailable"
                case .failure(let error): said = "\(error)"
                }
                self.told.withLock { $0[row] = said }
            }
        }
    }

    struct Refused: Error, CustomStringConvertible {
        var description: String { "refused" }
    }

    @Test("Rows arriving while every slot commits form the next batch; a caller is told only after its batch commits")
    func batchesAndAnswersAfterCommit() throws {
        let commits = HeldCommits()
        let outcomes = Outcomes()
        let writer = GroupCommitWriter<Int>(maxInFlight: 2) { commits.commit($0, $1) }
        for row in 1...7 { writer.submit(row, done: outcomes.done(row)) }
        // Two slots: 1 commits alone; two waiting behind it open the second slot; the rest wait for a slot, together.
        #expect(commits.batches == [[1], [2, 3]])
        #expect(outcomes.all.isEmpty)

        commits.finish(1)
        #expect(outcomes.all == [2: "committed", 3: "committed"])
        #expect(
            commits.batches == [[1], [2, 3], [4, 5, 6, 7]], "the freed slot takes everything queued, in one batch")

        commits.finish(2, with: .failure(Refused()))
        #expect(
            outcomes.all == [2: "committed", 3: "committed", 4: "refused", 5: "refused", 6: "refused", 7: "refused"])
        #expect(outcomes.all[1] == nil, "row 1's commit has not finished")
        writer.submit(8, done: outcomes.done(8))
        #expect(commits.batches.count == 3, "one row, where the last batch carried four: it waits for row 1's commit")
        commits.finish(0)
        #expect(outcomes.all[1] == "committed")
        #expect(commits.batches.last == [8], "once none commits, the waiting row goes")
        commits.finish(3)
        #expect(outcomes.all[8] == "committed")
        #expect(commits.batches.count == 4, "nothing queued: no empty batch")

        writer.submit(9, done: outcomes.done(9))
        #expect(commits.batches.last == [9], "an idle writer commits a row at once")
    }

    @Test("run() returns after finish() only once every batch formed before it committed; later rows are refused")
    func finishDrains() async throws {
        let commits = HeldCommits()
        let outcomes = Outcomes()
        let writer = GroupCommitWriter<Int>(maxInFlight: 1) { commits.commit($0, $1) }
        let returned = Mutex(false)
        let running = Task {
            await writer.run()
            returned.withLock { $0 = true }
        }
        writer.submit(1, done: outcomes.done(1))
        writer.submit(2, done: outcomes.done(2))
        writer.finish()
        writer.submit(3, done: outcomes.done(3))
        #expect(outcomes.all == [3: "unavailable"], "a row after finish() fails as unavailable (retryable), at once")

        try await Task.sleep(for: .milliseconds(100))
        #expect(!returned.withLock { $0 }, "row 1 is still committing")
        commits.finish(0)
        #expect(commits.batches == [[1], [2]], "the row queued before finish() is still committed")
        try await Task.sleep(for: .milliseconds(100))
        #expect(!returned.withLock { $0 }, "row 2 is still committing")
        commits.finish(1)
        await running.value
        #expect(outcomes.all == [1: "committed", 2: "committed", 3: "unavailable"])
    }

    @Test("A deferrable row rides in the next batch, goes alone after the deferral window, and is flushed by finish()")
    func deferrableRows() async throws {
        let commits = HeldCommits()
        let outcomes = Outcomes()
        let writer = GroupCommitWriter<Int>(maxInFlight: 2, deferral: .milliseconds(200)) { commits.commit($0, $1) }
        writer.submit(1, deferrable: true, done: outcomes.done(1))
        writer.submit(2, done: outcomes.done(2))
        #expect(commits.batches == [[1, 2]], "the deferred row rides with the next one waited for")
        commits.finish(0)
        #expect(outcomes.all == [1: "committed", 2: "committed"])

        let queued = ContinuousClock.now
        writer.submit(3, deferrable: true, done: outcomes.done(3))
        #expect(commits.batches.count == 1, "alone, a deferred row starts no commit at once")
        #expect(await eventually(timeout: .seconds(30)) { commits.batches.count == 2 })
        #expect(ContinuousClock.now - queued >= .milliseconds(200), "it went when its window ended")
        #expect(commits.batches.last == [3])
        commits.finish(1)
        #expect(outcomes.all[3] == "committed")

        writer.submit(4, deferrable: true, done: outcomes.done(4))
        let returned = Mutex(false)
        let running = Task {
            await writer.run()
            returned.withLock { $0 = true }
        }
        writer.finish()
        #expect(commits.batches.last == [4], "finish() commits the deferred rows at once")
        try await Task.sleep(for: .milliseconds(50))
        #expect(!returned.withLock { $0 }, "run() waits for that commit")
        commits.finish(2)
        await running.value
        #expect(outcomes.all[4] == "committed")
    }

    @Test("An idle writer's run() returns at finish()")
    func finishIdle() async {
        let writer = GroupCommitWriter<Int>(maxInFlight: 2) { _, committed in committed(.success(())) }
        let outcomes = Outcomes()
        writer.submit(1, done: outcomes.done(1))
        #expect(outcomes.all == [1: "committed"], "a commit that tells at once answers on the caller's thread")
        async let ran: Void = writer.run()
        writer.finish()
        await ran
    }
}
