import Testing

@testable import JSONRPC

/// The channel lifecycle, transition by transition, without sockets: each test feeds the events the event loop
/// would report and checks the action it would perform and what it would poll for.
@Suite struct ChannelStateMachineTests {
    typealias Machine = ChannelStateMachine

    static func machine(
        maxInFlight: Int = 2, highWater: Int = 100, lowWater: Int = 40, idleTimeout: Double? = nil, now: Double = 0
    ) -> Machine {
        Machine(
            limits: .init(maxInFlight: maxInFlight, highWater: highWater, lowWater: lowWater, idleTimeout: idleTimeout),
            now: now)
    }

    /// Delivers `frames` frames that await completions, as the loop does for `.deliverFrames`.
    static func deliver(_ frames: Int, to machine: inout Machine) -> Machine.Action {
        for _ in 0..<frames where machine.canDeliverFrame { machine.frameStarted() }
        return machine.deliveryStopped()
    }

    @Test func aNewChannelReadsAndDelivers() {
        var m = Self.machine()
        #expect(m.state == .active(input: .open, output: .open))
        #expect(m.wantsRead && m.canDeliverFrame && m.acceptsOutput)
        #expect(!m.wantsWrite && !m.isClosed)
        #expect(m.bytesRead(now: 1) == .deliverFrames)
        #expect(Self.deliver(1, to: &m) == .none)
        #expect(m.inFlight == 1)
    }

    @Test func theInFlightCapPausesReadingAndDeliveryUntilACompletion() {
        var m = Self.machine(maxInFlight: 2)
        #expect(m.bytesRead(now: 1) == .deliverFrames)
        #expect(Self.deliver(5, to: &m) == .none)
        #expect(m.inFlight == 2)
        #expect(!m.wantsRead && !m.canDeliverFrame)
        // Bytes that still arrive (a stale readiness) are buffered, not delivered.
        #expect(m.bytesRead(now: 2) == .none)
        #expect(m.frameCompleted() == .deliverFrames)
        #expect(m.inFlight == 1 && m.canDeliverFrame && m.wantsRead)
        #expect(m.deliveryStopped() == .none)
    }

    @Test func backPressurePausesReadingAtHighWaterAndResumesAtLowWater() {
        var m = Self.machine(highWater: 100, lowWater: 40)
        m.outputQueued(60)
        #expect(m.wantsRead && m.wantsWrite)
        m.outputQueued(40)
        #expect(m.pendingOutput == 100 && m.outputBackPressure && !m.wantsRead)
        // Frames already buffered are still delivered: only reading pauses.
        #expect(m.canDeliverFrame)
        #expect(m.outputWritten(50, now: 1) == .none)
        #expect(m.pendingOutput == 50 && !m.wantsRead)
        #expect(m.outputWritten(10, now: 2) == .none)
        #expect(m.pendingOutput == 40 && m.wantsRead && m.wantsWrite)
        #expect(m.outputWritten(40, now: 3) == .none)
        #expect(!m.wantsWrite)
    }

    @Test func peerEOFWithNothingInFlightClosesAfterDeliveringWhatWasRead() {
        var m = Self.machine()
        #expect(m.inputEnded() == .deliverFrames)
        #expect(m.state == .active(input: .peerClosed, output: .open))
        #expect(!m.wantsRead)
        // The last frames before EOF are still delivered (handled synchronously here), then the channel closes.
        #expect(m.canDeliverFrame)
        #expect(m.deliveryStopped() == .close(.peerClosed))
        #expect(m.state == .closed(.peerClosed))
    }

    @Test func halfCloseAnswersWhatIsInFlightThenCloses() {
        var m = Self.machine()
        #expect(m.bytesRead(now: 1) == .deliverFrames)
        #expect(Self.deliver(2, to: &m) == .none)
        #expect(m.inputEnded() == .none)  // at the cap: nothing to deliver, two answers owed
        #expect(m.state == .active(input: .peerClosed, output: .open))
        m.outputQueued(10)  // first answer, partly written
        #expect(m.outputWritten(4, now: 2) == .none)
        #expect(m.frameCompleted() == .deliverFrames)
        #expect(m.deliveryStopped() == .none)
        m.outputQueued(10)  // second answer
        #expect(m.frameCompleted() == .deliverFrames)
        #expect(m.deliveryStopped() == .none)  // still 16 bytes unwritten
        #expect(m.outputWritten(16, now: 3) == .close(.peerClosed))
    }

    @Test func writesDuringDeliveryDoNotCloseAChannelThatStillHasFramesToStart() {
        var m = Self.machine(maxInFlight: 1)
        #expect(m.bytesRead(now: 1) == .deliverFrames)
        #expect(Self.deliver(1, to: &m) == .none)
        #expect(m.inputEnded() == .none)
        #expect(m.frameCompleted() == .deliverFrames)
        // A too-large line's error answer is written in full while delivering: not "done" yet...
        m.outputQueued(30)
        #expect(m.outputWritten(30, now: 2) == .none)
        // ...because the next buffered frame is started.
        m.frameStarted()
        #expect(m.deliveryStopped() == .none)
        #expect(m.frameCompleted() == .deliverFrames)
        #expect(m.deliveryStopped() == .close(.peerClosed))
    }

    @Test func drainWithNothingInFlightClosesAtOnce() {
        var m = Self.machine()
        #expect(m.drainRequested() == .close(.drained))
        #expect(m.state == .closed(.drained))
    }

    @Test func drainStartsNothingNewAndClosesWhenTheLastAnswerIsWritten() {
        var m = Self.machine(maxInFlight: 4)
        #expect(m.bytesRead(now: 1) == .deliverFrames)
        #expect(Self.deliver(1, to: &m) == .none)
        #expect(m.drainRequested() == .none)
        #expect(m.state == .active(input: .draining, output: .open))
        #expect(!m.wantsRead && !m.canDeliverFrame)
        #expect(m.bytesRead(now: 2) == .none)
        m.outputQueued(8)
        #expect(m.outputWritten(0, now: 3) == .none)
        #expect(m.frameCompleted() == .none)  // answered, not yet written
        #expect(m.outputWritten(8, now: 4) == .close(.drained))
    }

    @Test func drainAfterPeerEOFClosesAsDrained() {
        var m = Self.machine()
        #expect(m.bytesRead(now: 1) == .deliverFrames)
        #expect(Self.deliver(1, to: &m) == .none)
        #expect(m.inputEnded() == .deliverFrames)
        #expect(m.deliveryStopped() == .none)
        #expect(m.drainRequested() == .none)
        #expect(m.frameCompleted() == .close(.drained))
    }

    @Test func finishWritingWithNothingQueuedShutsTheWriteSideAtOnce() {
        var m = Self.machine()
        #expect(m.finishWritingRequested() == .shutdownWrite)
        #expect(m.state == .active(input: .open, output: .shutdown))
        #expect(!m.acceptsOutput && !m.wantsWrite)
        #expect(m.wantsRead)  // answers still come in
        // Bytes after the shutdown could never leave: they are not counted.
        m.outputQueued(10)
        #expect(m.pendingOutput == 0)
        #expect(m.finishWritingRequested() == .none)
    }

    @Test func finishWritingWithBytesQueuedShutsTheWriteSideOnceTheyAreWritten() {
        var m = Self.machine()
        m.outputQueued(20)
        #expect(m.finishWritingRequested() == .none)
        #expect(m.state == .active(input: .open, output: .shutdownWhenFlushed))
        #expect(m.acceptsOutput && m.wantsWrite)
        #expect(m.outputWritten(15, now: 1) == .none)
        #expect(m.outputWritten(5, now: 2) == .shutdownWrite)
        #expect(m.state == .active(input: .open, output: .shutdown))
        // The peer answers everything and closes: our read side sees EOF and the channel closes.
        #expect(m.inputEnded() == .deliverFrames)
        #expect(m.deliveryStopped() == .close(.peerClosed))
    }

    @Test func flushingTheLastBytesAfterPeerEOFClosesInsteadOfHalfClosing() {
        var m = Self.machine()
        m.outputQueued(20)
        #expect(m.finishWritingRequested() == .none)
        #expect(m.inputEnded() == .deliverFrames)
        #expect(m.deliveryStopped() == .none)
        #expect(m.outputWritten(20, now: 1) == .close(.peerClosed))
    }

    @Test func idleTimeoutClosesOnlyAQuietChannelWithNothingOwed() {
        var m = Self.machine(idleTimeout: 10, now: 100)
        #expect(m.idleCheck(now: 109) == .none)
        #expect(m.bytesRead(now: 105) == .deliverFrames)
        #expect(Self.deliver(1, to: &m) == .none)
        #expect(m.idleCheck(now: 200) == .none)  // a request is running
        m.outputQueued(5)
        #expect(m.frameCompleted() == .deliverFrames)
        #expect(m.deliveryStopped() == .none)
        #expect(m.idleCheck(now: 200) == .none)  // its answer is unwritten
        #expect(m.outputWritten(5, now: 201) == .none)
        #expect(m.idleCheck(now: 210.5) == .none)  // writing counts as activity
        #expect(m.idleCheck(now: 211) == .close(.idleTimeout))
        #expect(m.idleCheck(now: 300) == .none)
    }

    @Test func withoutAnIdleTimeoutAChannelNeverIdlesOut() {
        var m = Self.machine(idleTimeout: nil)
        #expect(m.idleCheck(now: 1e9) == .none)
        #expect(!m.isClosed)
    }

    @Test func hangUpClosesEvenWithRequestsInFlight() {
        var m = Self.machine()
        #expect(m.bytesRead(now: 1) == .deliverFrames)
        #expect(Self.deliver(2, to: &m) == .none)
        #expect(m.inputEnded() == .none)
        #expect(m.hangUp() == .close(.peerClosed))
        #expect(m.state == .closed(.peerClosed))
    }

    @Test(arguments: [ChannelCloseReason.readError, .writeError, .loopStopped, .closedByClient, .clientReleased])
    func errorsAndCloseRequestsCloseAtOnce(reason: ChannelCloseReason) {
        var m = Self.machine()
        m.outputQueued(10)
        #expect(m.bytesRead(now: 1) == .deliverFrames)
        m.frameStarted()
        let action: Machine.Action
        switch reason {
        case .readError: action = m.readFailed()
        case .writeError: action = m.writeFailed()
        default: action = m.closeRequested(reason)
        }
        #expect(action == .close(reason))
        // Delivery ends at once (the loop checks canDeliverFrame), and nothing happens twice.
        #expect(!m.canDeliverFrame && !m.wantsRead && !m.wantsWrite && !m.acceptsOutput)
        #expect(m.deliveryStopped() == .none)
    }

    @Test func aClosedChannelIgnoresEveryLaterEvent() {
        var m = Self.machine(idleTimeout: 1)
        #expect(m.closeRequested(.closedByClient) == .close(.closedByClient))
        #expect(m.bytesRead(now: 5) == .none)
        #expect(m.inputEnded() == .none)
        #expect(m.frameCompleted() == .none)
        m.frameStarted()
        m.outputQueued(5)
        #expect(m.inFlight == 0 && m.pendingOutput == 0)
        #expect(m.outputWritten(0, now: 6) == .none)
        #expect(m.finishWritingRequested() == .none)
        #expect(m.drainRequested() == .none)
        #expect(m.idleCheck(now: 100) == .none)
        #expect(m.hangUp() == .none)
        #expect(m.readFailed() == .none)
        #expect(m.writeFailed() == .none)
        #expect(m.closeRequested(.loopStopped) == .none)
        #expect(m.state == .closed(.closedByClient))
    }

    @Test func limitsAreSane() {
        let m = Machine(limits: .init(maxInFlight: 0, highWater: 10, lowWater: 50), now: 0)
        #expect(m.limits.maxInFlight == 1)
        #expect(m.limits.lowWater == 10)
    }

    @Test func closeReasonsKeepTheirLogWords() {
        #expect(ChannelCloseReason.peerClosed.rawValue == "peer_closed")
        #expect(ChannelCloseReason.drained.rawValue == "drained")
        #expect(ChannelCloseReason.idleTimeout.rawValue == "idle_timeout")
        #expect(ChannelCloseReason.loopStopped.rawValue == "loop_stopped")
    }
}
