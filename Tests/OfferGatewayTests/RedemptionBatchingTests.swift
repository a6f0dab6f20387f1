import Foundation
import OfferDomain
import OfferStore
import Testing

@testable import OfferGateway

@Suite("Group commit state machine")
struct RedemptionBatcherTests {
    typealias Batcher = GroupCommitBatcher<Int>

    static func batch(_ action: Batcher.Action) -> [Int]? {
        if case .commit(let items) = action { return items }
        return nil
    }

    @Test func idleRequestCommitsAtOnce() {
        var b = Batcher(maxBatchSize: 10)
        #expect(Self.batch(b.submit(1)) == [1])
        #expect(b.phase == .committing)
    }

    @Test func requestsDuringACommitFormTheNextBatch() {
        var b = Batcher(maxBatchSize: 10)
        _ = b.submit(1)
        for i in 2...5 {
            guard case .none = b.submit(i) else {
                Issue.record("a request during a commit must wait")
                return
            }
        }
        #expect(b.queue == [2, 3, 4, 5])
        #expect(Self.batch(b.batchFinished()) == [2, 3, 4, 5])
        #expect(b.queue.isEmpty)
        guard case .none = b.batchFinished() else {
            Issue.record("nothing queued: no batch")
            return
        }
        #expect(b.phase == .idle)
    }

    @Test func batchesAreCappedAtMaxBatchSize() {
        var b = Batcher(maxBatchSize: 3)
        _ = b.submit(0)
        for i in 1...7 { _ = b.submit(i) }
        #expect(Self.batch(b.batchFinished()) == [1, 2, 3])
        #expect(Self.batch(b.batchFinished()) == [4, 5, 6])
        #expect(Self.batch(b.batchFinished()) == [7])
        guard case .none = b.batchFinished() else {
            Issue.record("expected idle")
            return
        }
        #expect(b.phase == .idle)
        #expect(Self.batch(b.submit(8)) == [8])
    }

    @Test func lingeringWaitsForTheTimer() {
        var b = Batcher(maxBatchSize: 10, lingers: true)
        guard case .startTimer = b.submit(1) else {
            Issue.record("a lingering batcher starts a timer")
            return
        }
        guard case .none = b.submit(2) else {
            Issue.record("no second timer")
            return
        }
        #expect(b.phase == .lingering)
        #expect(Self.batch(b.timerFired()) == [1, 2])
        guard case .none = b.timerFired() else {
            Issue.record("a stale timer does nothing")
            return
        }
        _ = b.submit(3)
        #expect(Self.batch(b.batchFinished()) == [3])
    }

    @Test func unexpectedEventsDoNothing() {
        var b = Batcher(maxBatchSize: 10)
        guard case .none = b.batchFinished(), case .none = b.timerFired() else {
            Issue.record("idle batcher ignores finished/timer")
            return
        }
        #expect(b.phase == .idle)
    }

    @Test func severalBatchesInFlightWhenAllowed() {
        var b = Batcher(maxBatchSize: 10, maxInFlight: 2)
        #expect(Self.batch(b.submit(1)) == [1])
        #expect(Self.batch(b.submit(2)) == nil, "one waits behind a batch of one: not yet a burst")
        #expect(Self.batch(b.submit(3)) == [2, 3], "two wait behind a batch of one: the second slot opens")
        #expect(b.inFlight == 2)
        for i in 4...7 {
            guard case .none = b.submit(i) else {
                Issue.record("both slots busy: request \(i) must wait")
                return
            }
        }
        #expect(Self.batch(b.batchFinished()) == [4, 5, 6, 7])
        #expect(b.inFlight == 2)
        guard case .none = b.batchFinished() else {
            Issue.record("nothing queued: no batch")
            return
        }
        #expect(b.inFlight == 1)
        _ = b.batchFinished()
        #expect(Self.batch(b.submit(8)) == [8], "none committing: a request starts a batch at once")
        _ = b.batchFinished()
        #expect(b.phase == .idle)
        #expect(b.inFlight == 0)
        guard case .none = b.batchFinished() else {
            Issue.record("an idle batcher ignores a stray finish")
            return
        }
        #expect(b.inFlight == 0)
    }

    @Test("A slot beyond the first opens only once twice as many wait as the last batch carried")
    func furtherSlotsAreForBursts() {
        var b = Batcher(maxBatchSize: 100, maxInFlight: 2)
        _ = b.submit(0)
        for i in 1...2 { _ = b.submit(i) }
        for i in 3...6 { _ = b.submit(i) }
        #expect(Self.batch(b.batchFinished()) == [3, 4, 5, 6], "a finished slot takes what waits")
        #expect(Self.batch(b.batchFinished()) == nil, "nothing left to take")
        #expect(b.inFlight == 1)
        // Batch [3…6] commits: seven arrivals wait (fewer than twice what it carried), the eighth opens the second slot.
        for i in 7...13 {
            guard case .none = b.submit(i) else {
                Issue.record("\(i): too few wait to overtake the committing batch, so it waits for that batch")
                return
            }
        }
        #expect(Self.batch(b.submit(14)) == Array(7...14))
        #expect(b.inFlight == 2)
        // One batch finishes while another commits: what waits goes only once it is a burst, or when none commits.
        _ = b.submit(15)
        #expect(Self.batch(b.batchFinished()) == nil, "one waits, eight were carried: it waits for the other batch")
        #expect(Self.batch(b.batchFinished()) == [15], "none committing: it goes")
        #expect(b.inFlight == 1)
    }

    @Test("A steady stream fills batches as one slot would, instead of splitting them between two")
    func steadyStreamKeepsBatchesFull() {
        // Every commit takes as long as 8 arrivals; the two batchers see the same arrivals and commit times.
        func batchSizes(maxInFlight: Int) -> [Int] {
            var b = Batcher(maxBatchSize: 1_000, maxInFlight: maxInFlight)
            var committing: [(endsAt: Int, size: Int)] = []
            var sizes: [Int] = []
            func take(_ action: Batcher.Action, at t: Int) {
                if let items = Self.batch(action) {
                    committing.append((t + 8, items.count))
                    sizes.append(items.count)
                }
            }
            for t in 0..<400 {
                while let i = committing.firstIndex(where: { $0.endsAt == t }) {
                    committing.remove(at: i)
                    take(b.batchFinished(), at: t)
                }
                take(b.submit(t), at: t)
            }
            return sizes
        }
        let one = batchSizes(maxInFlight: 1)
        let two = batchSizes(maxInFlight: 2)
        #expect(one.dropFirst(4).allSatisfy { $0 == 8 }, "\(one)")
        #expect(two.count <= one.count + 1, "batches: two slots \(two), one slot \(one)")
        #expect(two.dropFirst(4).allSatisfy { $0 == 8 }, "\(two)")
    }

    @Test("In a closed loop, a burst ratio of 1 overlaps two batches of one size; the default ratio of 2 keeps one")
    func closedLoopOverlapsWithRatioOne() {
        // 12 clients, each submitting again one tick after its answer; every commit takes 10 ticks.
        func run(burstRatio: Int) -> (answered: Int, lastSizes: [Int], ticksWithTwo: Int) {
            var b = Batcher(maxBatchSize: 1_000, maxInFlight: 2, burstRatio: burstRatio)
            var committing: [(endsAt: Int, items: [Int])] = []
            var arrivals: [Int: [Int]] = [:]
            for client in 0..<12 { arrivals[client, default: []].append(client) }
            var (answered, sizes, ticksWithTwo) = (0, [Int](), 0)
            func take(_ action: Batcher.Action, at t: Int) {
                if let items = Self.batch(action) {
                    committing.append((t + 10, items))
                    sizes.append(items.count)
                }
            }
            for t in 0..<600 {
                while let i = committing.firstIndex(where: { $0.endsAt == t }) {
                    let done = committing.remove(at: i)
                    answered += done.items.count
                    for client in done.items { arrivals[t + 1, default: []].append(client) }
                    take(b.batchFinished(), at: t)
                }
                for client in arrivals[t] ?? [] { take(b.submit(client), at: t) }
                if committing.count == 2 { ticksWithTwo += 1 }
            }
            return (answered, Array(sizes.suffix(8)), ticksWithTwo)
        }
        let one = run(burstRatio: 1)
        let two = run(burstRatio: 2)
        #expect(one.ticksWithTwo > 500, "ratio 1: two batches commit most of the time (\(one))")
        #expect(Set(one.lastSizes).count == 1 && one.lastSizes[0] >= 4, "ratio 1: batches of one size (\(one))")
        #expect(two.ticksWithTwo < 30, "ratio 2: after the start, one batch at a time (\(two))")
        #expect(one.answered > two.answered * 5 / 4, "ratio 1 answers more (\(one.answered) vs \(two.answered))")
    }

    @Test("A deferrable item starts no batch: it rides with the next waited-for one, or goes when its timer fires")
    func deferrableItemsRide() {
        var b = Batcher(maxBatchSize: 10, maxInFlight: 2)
        guard case .startTimer = b.submit(1, deferrable: true) else {
            Issue.record("a deferrable item alone asks for its timer")
            return
        }
        #expect(Self.batch(b.submit(2, deferrable: true)) == nil, "one timer for the deferred items")
        #expect(b.phase == .idle && b.queue == [1, 2])
        #expect(Self.batch(b.submit(3)) == [1, 2, 3], "a waited-for item starts a batch and the deferred ones ride")
        #expect(Self.batch(b.timerFired()) == nil, "the timer finds nothing left to flush")

        // Deferred items queued while a batch commits go with it at its end only if due.
        guard case .startTimer = b.submit(4, deferrable: true) else {
            Issue.record("the last timer fired: a new one")
            return
        }
        #expect(Self.batch(b.batchFinished()) == nil, "not due, and nobody waits: the item stays")
        #expect(Self.batch(b.timerFired()) == [4], "due, with none committing: it goes")
        guard case .startTimer = b.submit(5, deferrable: true) else {
            Issue.record("a new timer for the new deferred item")
            return
        }
        #expect(
            Self.batch(b.submit(6)) == [5, 6], "a waited-for item opening the second slot carries the deferred one")
        #expect(Self.batch(b.timerFired()) == nil)
        // Due deferred items wait for the batches committing, and no longer.
        guard case .startTimer = b.submit(7, deferrable: true) else {
            Issue.record("a timer for item 7")
            return
        }
        #expect(Self.batch(b.timerFired()) == nil, "due, but both slots commit")
        #expect(Self.batch(b.batchFinished()) == nil, "one slot free, too few queued to open it beside the other")
        #expect(Self.batch(b.batchFinished()) == [7], "none committing: the due item goes")
        _ = b.batchFinished()
        #expect(b.phase == .idle)

        // flush(): the deferred items go at once (shutdown).
        _ = b.submit(8, deferrable: true)
        #expect(Self.batch(b.flush()) == [8])
        #expect(Self.batch(b.flush()) == nil, "nothing queued: no empty batch")
    }

    @Test("A lingering batcher waits for its window with every item, deferrable or not")
    func lingeringTreatsEveryItemAsWaited() {
        var b = Batcher(maxBatchSize: 10, lingers: true)
        guard case .startTimer = b.submit(1, deferrable: true) else {
            Issue.record("the linger window starts")
            return
        }
        #expect(Self.batch(b.timerFired()) == [1])
        _ = b.batchFinished()
        guard case .startTimer = b.submit(2) else {
            Issue.record("idle again: a new window")
            return
        }
        #expect(Self.batch(b.flush()) == [2], "flush() ends the window")
        #expect(Self.batch(b.timerFired()) == nil, "the window's timer then finds nothing to take")
    }

    @Test func drainReturnsQueued() {
        var b = Batcher(maxBatchSize: 10)
        _ = b.submit(1)
        _ = b.submit(2)
        _ = b.submit(3)
        #expect(b.drain() == [2, 3])
        #expect(b.queue.isEmpty)
    }
}

@Suite("Redemption batch decisions")
struct RedemptionDeciderTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func campaign(
        kind: CampaignKind = .custom, total: Int? = nil, perCustomer: Int = 1, startsAt: Date? = nil,
        expiresAt: Date? = nil, deactivatedAt: Date? = nil
    ) throws -> Campaign {
        try Campaign(
            id: "c", offerId: "o", kind: kind, code: kind == .custom ? "SPRING" : nil, totalLimit: total,
            perCustomerLimit: perCustomer, startsAt: startsAt, expiresAt: expiresAt, deactivatedAt: deactivatedAt)
    }

    static func attempt(
        _ customer: String, code: String = "SPRING", oneTime: Bool = false, eligible: Bool = true, key: String? = nil
    ) -> RedemptionAttempt {
        RedemptionAttempt(
            customerId: customer, code: code, oneTime: oneTime, eligible: eligible, idempotencyKey: key,
            requestHash: RedemptionCoordinator.requestHash(code: code, customerId: customer), redemptionId: UUID())
    }

    static func decide(
        _ attempts: [RedemptionAttempt], _ campaign: Campaign, redeemed: Int = 0, perCustomer: [String: Int] = [:],
        used: Set<String> = [], records: [String: IdempotencyRecord] = [:]
    ) -> [RedemptionVerdict] {
        RedemptionDecider.decide(
            attempts, campaign: campaign, at: now, redeemed: redeemed, perCustomer: perCustomer, usedCodes: used,
            records: records)
    }

    @Test func batchIsCutToTheRemainingCapacity() throws {
        let attempts = (0..<5).map { Self.attempt("u\($0)") }
        let verdicts = Self.decide(attempts, try Self.campaign(total: 10), redeemed: 7)
        #expect(verdicts == [.accepted, .accepted, .accepted, .refused(.codeExhausted), .refused(.codeExhausted)])
    }

    @Test func unlimitedCampaignAcceptsAll() throws {
        let attempts = (0..<50).map { Self.attempt("u\($0)") }
        #expect(Self.decide(attempts, try Self.campaign(), redeemed: 1_000_000).allSatisfy { $0 == .accepted })
    }

    @Test func perCustomerLimitCountsStoredAndBatchRedemptions() throws {
        let attempts = [Self.attempt("a"), Self.attempt("a"), Self.attempt("a"), Self.attempt("b")]
        let verdicts = Self.decide(attempts, try Self.campaign(perCustomer: 2), perCustomer: ["a": 1, "b": 2])
        #expect(
            verdicts == [
                .accepted, .refused(.customerLimitReached), .refused(.customerLimitReached),
                .refused(.customerLimitReached),
            ])
    }

    @Test func customerLimitIsCheckedBeforeCapacity() throws {
        let verdicts = Self.decide(
            [Self.attempt("a"), Self.attempt("b")], try Self.campaign(total: 1), perCustomer: ["a": 1])
        #expect(verdicts == [.refused(.customerLimitReached), .accepted])
    }

    @Test func oneTimeCodeIsRedeemedOnce() throws {
        let campaign = try Self.campaign(kind: .oneTime)
        let attempts = [
            Self.attempt("a", code: "X", oneTime: true), Self.attempt("b", code: "X", oneTime: true),
            Self.attempt("c", code: "Y", oneTime: true), Self.attempt("d", code: "Z", oneTime: true),
        ]
        let verdicts = Self.decide(attempts, campaign, used: ["Y"])
        #expect(verdicts == [.accepted, .refused(.codeExhausted), .refused(.codeExhausted), .accepted])
    }

    @Test func oneTimeCodeRefusedByCustomerLimitStaysAvailableInTheBatch() throws {
        let campaign = try Self.campaign(kind: .oneTime)
        let attempts = [Self.attempt("a", code: "X", oneTime: true), Self.attempt("b", code: "X", oneTime: true)]
        let verdicts = Self.decide(attempts, campaign, perCustomer: ["a": 1])
        #expect(verdicts == [.refused(.customerLimitReached), .accepted])
    }

    @Test(arguments: [
        (
            Optional(now.addingTimeInterval(60)), Optional<Date>.none, Optional<Date>.none,
            Campaign.Refusal.campaignNotStarted
        ),
        (nil, Optional(now), nil, .campaignExpired),
        (nil, nil, Optional(now.addingTimeInterval(-1)), .campaignDeactivated),
    ])
    func inactiveCampaignRefusesEveryone(starts: Date?, expires: Date?, deactivated: Date?, refusal: Campaign.Refusal)
        throws
    {
        let campaign = try Self.campaign(startsAt: starts, expiresAt: expires, deactivatedAt: deactivated)
        #expect(
            Self.decide([Self.attempt("a"), Self.attempt("b")], campaign) == [.refused(refusal), .refused(refusal)])
    }

    @Test func storedKeyReplaysOrConflicts() throws {
        let same = Self.attempt("a", key: "k1")
        let other = Self.attempt("b", key: "k2")
        let records = [
            "k1": IdempotencyRecord(requestHash: same.requestHash, responseJSON: "{\"redemptionId\":\"x\"}"),
            "k2": IdempotencyRecord(requestHash: "00", responseJSON: "{}"),
        ]
        let verdicts = Self.decide([same, other], try Self.campaign(total: 1), records: records)
        #expect(verdicts == [.replay("{\"redemptionId\":\"x\"}"), .keyConflict])
    }

    @Test func repeatedKeyInOneBatchUsesTheFirstOutcome() throws {
        let first = Self.attempt("a", key: "k")
        let again = Self.attempt("a", key: "k")
        let different = Self.attempt("b", key: "k")
        let verdicts = Self.decide([first, again, different, Self.attempt("c")], try Self.campaign(total: 2))
        #expect(verdicts == [.accepted, .sameAs(0), .keyConflict, .accepted])
    }

    @Test func replayedAnswersCarryReplayedTrue() throws {
        let first = Self.attempt("a", key: "k")
        let receipt = RedemptionReceipt(
            redemptionId: "r", campaignId: "c", offerId: "o", productId: "p", replayed: false)
        // What is stored under the key reads back as the same ids with replayed: true.
        #expect(!receipt.storedJSON.contains("replayed"))
        #expect(RedemptionReceipt(storedJSON: receipt.storedJSON) == receipt.asReplay())
        #expect(receipt.asReplay().replayed)
        #expect(RedemptionReceipt(storedJSON: "{\"redemptionId\":\"r\"}") == nil)
        #expect(first.requestHash == RedemptionCoordinator.requestHash(code: "SPRING", customerId: "a"))
        #expect(first.requestHash != RedemptionCoordinator.requestHash(code: "SPRING", customerId: "b"))
    }

    /// A batch decides one attempt exactly as the domain's refusal order does (the rule `codes.validate` applies),
    /// for every combination of campaign state, eligibility, used code and counts.
    @Test func aBatchAgreesWithTheDomainRuleOnEveryState() throws {
        let windows: [(Date?, Date?, Date?)] = [
            (nil, nil, nil), (Self.now.addingTimeInterval(60), nil, nil), (nil, Self.now, nil),
            (nil, nil, Self.now.addingTimeInterval(-60)),
        ]
        var seen = Set<Campaign.Refusal?>()
        for (startsAt, expiresAt, deactivatedAt) in windows {
            let campaign = try Self.campaign(
                kind: .oneTime, total: 3, perCustomer: 2, startsAt: startsAt, expiresAt: expiresAt,
                deactivatedAt: deactivatedAt)
            for eligible in [true, false] {
                for used in [true, false] {
                    for (redeemed, mine) in [(0, 0), (1, 2), (3, 0), (3, 2)] {
                        let attempt = Self.attempt("a", code: "X", oneTime: true, eligible: eligible)
                        let verdict = Self.decide(
                            [attempt], campaign, redeemed: redeemed, perCustomer: ["a": mine], used: used ? ["X"] : [])
                        let facts = RedemptionFacts(
                            at: Self.now, customerEligible: eligible, oneTimeCodeUsed: used, redeemed: redeemed,
                            customerRedeemed: mine)
                        let expected = campaign.refusal(facts)
                        #expect(verdict == [expected.map { .refused($0) } ?? .accepted])
                        seen.insert(expected)
                    }
                }
            }
        }
        // Every refusal (and acceptance) was reached.
        #expect(seen.count == Campaign.Refusal.allCases.count + 1)
    }
}
