// Newline-delimited framing as a small state machine (no IO).
#if canImport(Glibc)
    import Glibc
#endif

/// Splits a byte stream into `\n`-terminated frames with a size limit.
///
/// - A trailing `\r` is stripped; empty (or whitespace-only `\r`) lines are skipped.
/// - A line longer than `limit` bytes yields `.tooLarge` once, as soon as the limit is exceeded, and its bytes
///   are then discarded up to and including its newline without being buffered. The stream continues after it.
public struct LineFramer: Sendable {
    /// An event produced by `next()`.
    public enum Event: Sendable, Hashable {
        /// One complete line (without `\n`/`\r\n`).
        case frame([UInt8])
        /// A line exceeded the limit; its bytes are being discarded.
        case tooLarge
    }

    /// The maximum frame length in bytes (excluding the line terminator).
    public let limit: Int
    var buffer: [UInt8] = []
    var start = 0
    var scanned = 0
    var discarding = false

    /// Creates a framer with the given frame limit (default 1 MiB).
    public init(limit: Int = 1 << 20) {
        self.limit = max(limit, 1)
    }

    /// Bytes buffered but not yet returned (bounded by `limit` + one read).
    public var bufferedCount: Int { buffer.count - start }

    /// Feeds bytes read from the stream.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        var input = bytes[...]
        if discarding {
            guard let newline = input.firstIndex(of: 0x0A) else { return }
            discarding = false
            input = input[(newline + 1)...]
        }
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            scanned -= start
            start = 0
        }
        buffer.append(contentsOf: input)
    }

    /// Feeds bytes read from the stream.
    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The next frame or event, or `nil` when more bytes are needed.
    public mutating func next() -> Event? {
        while true {
            let newline: Int? = buffer.withUnsafeBufferPointer { b in
                guard scanned < b.count, let base = b.baseAddress,
                    let hit = memchr(base + scanned, 0x0A, b.count - scanned)
                else { return nil }
                return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
            }
            guard let newline else {
                if start == buffer.count {
                    // Everything consumed: drop big buffers so idle connections stay small.
                    buffer.removeAll(keepingCapacity: buffer.capacity <= 4096)
                    start = 0
                }
                scanned = buffer.count
                if buffer.count - start > limit {
                    // Too large and no end in sight: drop what we have, discard the rest of the line later.
                    buffer.removeAll(keepingCapacity: false)
                    start = 0
                    scanned = 0
                    discarding = true
                    return .tooLarge
                }
                return nil
            }
            var end = newline
            if end > start && buffer[end - 1] == 0x0D { end -= 1 }
            let length = end - start
            let frameStart = start
            start = newline + 1
            scanned = start
            if length > limit { return .tooLarge }
            if length == 0 { continue }
            return .frame(Array(buffer[frameStart..<end]))
        }
    }
}
