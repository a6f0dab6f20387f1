import Foundation

/// The JWS headers whose chain and signature verified lately, by their exact base64url bytes, with what was read from
/// them: a bounded memo of a pure function, so that the next JWS with the same header skips decoding it.
///
/// Why: Apple signs with a few leaf certificates at a time, and every JWS under one carries the same ~5.5 KB header
/// (`alg` and the three certificates of `x5c`). Decoding it (base64url, Foundation's `JSONDecoder`, base64 of each
/// certificate) was ~7 % of a Retention Messaging answer's CPU (docs/perf/b9-retention.md, round 3). The same bytes
/// always decode to the same header, so a hit changes nothing a full decoding would decide; the chain is still looked
/// up and checked at the payload's `signedDate`, and the signature verified, on every use.
///
/// Only headers of JWS that verified are remembered, so input that fails cannot displace them. Pure state (no lock):
/// the verifier keeps it in a `Mutex`.
struct VerifiedHeaders {
    struct Entry: Sendable {
        let segment: [UInt8]
        let certificates: [[UInt8]]
    }

    /// Most headers kept (replaced in turn when full).
    let capacity: Int
    private var entries: [Entry] = []
    private var next = 0
    /// Lookups answered from memory, for tests.
    private(set) var hits = 0

    init(capacity: Int) { self.capacity = max(0, capacity) }

    var count: Int { entries.count }

    /// The certificates remembered for the segment that is byte for byte `segment`, if any.
    mutating func certificates(for segment: ArraySlice<UInt8>) -> [[UInt8]]? {
        guard let index = index(of: segment) else { return nil }
        hits += 1
        return entries[index].certificates
    }

    /// Remembers `entry` (unless its segment is held already), replacing the oldest when full.
    mutating func remember(_ entry: Entry) {
        guard capacity > 0, index(of: entry.segment[...]) == nil else { return }
        if entries.count < capacity {
            entries.append(entry)
        } else {
            entries[next] = entry
            next = (next + 1) % capacity
        }
    }

    private func index(of segment: ArraySlice<UInt8>) -> Int? {
        entries.firstIndex { entry in
            entry.segment.count == segment.count
                && entry.segment.withUnsafeBytes { a in
                    segment.withUnsafeBytes { b in
                        guard let a = a.baseAddress, let b = b.baseAddress else { return true }  // both empty
                        return memcmp(a, b, segment.count) == 0
                    }
                }
        }
    }
}
