import Foundation
import Testing

@testable import JSONRPC

#if canImport(Glibc)
    import Glibc
#endif

/// The stdio writer: what is handed over arrives whole and in order, however the hand-overs and the writes
/// interleave, and a buffer handed over by swapping comes back empty and reusable.
@Suite struct BlockingWriterTests {
    /// Reads `fd` to EOF on a thread of its own (the writer blocks when the pipe is full).
    final class Drain: @unchecked Sendable {
        var bytes: [UInt8] = []
        let done = DispatchSemaphore(value: 0)
        init(fd: Int32) {
            Thread { [self] in
                var chunk = [UInt8](repeating: 0, count: 1 << 16)
                while true {
                    let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    bytes += chunk[0..<n]
                }
                close(fd)
                done.signal()
            }.start()
        }
    }

    /// Runs `body` against a writer into a pipe, finishes the writer, and returns every byte that came out.
    func written(_ body: (BlockingWriter) -> Void) throws -> [UInt8] {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        let drain = Drain(fd: fds[0])
        let writer = BlockingWriter(fd: fds[1], name: "test-writer")
        body(writer)
        let finished = DispatchSemaphore(value: 0)
        writer.finish { finished.signal() }
        finished.wait()
        close(fds[1])
        drain.done.wait()
        return drain.bytes
    }

    @Test func swappedAndCopiedHandOversArriveWholeAndInOrder() throws {
        var expected: [UInt8] = []
        let bytes = try written { writer in
            var held: [UInt8] = []
            for i in 0..<3_000 {
                // Lines of varying length, some hand-overs far above a pipe's buffer, some of one line.
                let line = Array("\(i):\(String(repeating: "x", count: (i * 37) % 900))\n".utf8)
                held += line
                expected += line
                if i % 7 == 0 || held.count > 20_000 {
                    writer.enqueue(taking: &held)
                    #expect(held.isEmpty)
                }
                if i % 101 == 0 {
                    // As the reader does before an error frame: what is held goes first.
                    writer.enqueue(taking: &held)
                    let frame = Array("copied \(i)\n".utf8)
                    writer.enqueue(frame)
                    expected += frame
                }
            }
            writer.enqueue(taking: &held)
        }
        #expect(bytes.count == expected.count)
        // The first difference, not two megabytes of bytes, when they differ.
        let firstDifference = bytes.indices.first { $0 >= expected.count || bytes[$0] != expected[$0] }
        #expect(firstDifference == nil)
    }

    @Test func aBufferAboveTheKeptLimitIsNotHandedBack() throws {
        let bytes = try written { writer in
            // Fill the queue first so the big buffer is appended (copied), then check what the caller keeps.
            var first = [UInt8](repeating: 0x61, count: 10)
            writer.enqueue(taking: &first)
            var big = [UInt8](repeating: 0x62, count: BlockingWriter.keptCapacityLimit + 1)
            writer.enqueue(taking: &big)
            #expect(big.isEmpty)
            #expect(big.capacity <= BlockingWriter.keptCapacityLimit)
        }
        #expect(bytes.count == 10 + BlockingWriter.keptCapacityLimit + 1)
    }
}
