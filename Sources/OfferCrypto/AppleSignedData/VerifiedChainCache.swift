import Foundation

/// A bounded, time-limited map from a (leaf, intermediate) certificate pair to what verifying it established.
///
/// Pure state (no clock, no lock): the caller passes `now` and guards it (the verifier keeps it in a `Mutex`), so every
/// transition is reproducible in tests. Keyed by the exact DER bytes of both certificates: a hit means byte-identical
/// certificates, never "a certificate with the same hash".
///
/// Apple's Python library (app-store-server-library 3.1) caches the x5c list for 15 minutes (aiming at 32 entries,
/// though it only ever evicts expired ones), and only when it makes online revocation checks; offline it re-verifies
/// every chain. We cache offline too, and keep the bound, because what the cache stands for is
/// time-independent: the signatures linking leaf → intermediate → root, the extensions and constraints RFC 5280
/// checks, and Apple's OIDs do not depend on the validation time. What does depend on it (each certificate's validity
/// at the payload's `signedDate`) and what depends on the payload (its ES256 signature with the leaf key) are checked
/// on every use by the verifier, hit or not. The lifetime therefore does not make anything accepted that a full
/// verification would reject; it bounds how long a chain stays trusted without being re-validated, which is what
/// would bound a revocation if online checks were ever added.
struct VerifiedChainCache<Value> {
    struct Key: Hashable {
        let leaf: [UInt8]
        let intermediate: [UInt8]

        /// Hashes the lengths and the last 32 bytes of each certificate (inside its signature, so they differ between
        /// any two certificates) instead of all ~2.5 KB; equality still compares every byte, so a collision only
        /// costs a comparison.
        func hash(into hasher: inout Hasher) {
            hasher.combine(leaf.count)
            hasher.combine(intermediate.count)
            for byte in leaf.suffix(32) { hasher.combine(byte) }
            for byte in intermediate.suffix(32) { hasher.combine(byte) }
        }
    }

    private struct Entry {
        let value: Value
        let expires: Date
    }

    /// Most entries kept at once.
    let capacity: Int
    /// How long an entry is used after it was verified.
    let lifetime: TimeInterval
    private var entries: [Key: Entry] = [:]

    init(capacity: Int, lifetime: TimeInterval) {
        self.capacity = max(0, capacity)
        self.lifetime = max(0, lifetime)
    }

    /// Number of entries held (expired ones included until they are looked up or evicted).
    var count: Int { entries.count }

    /// The value for `key` if it was stored less than `lifetime` ago; an expired entry is removed.
    mutating func value(for key: Key, now: Date) -> Value? {
        guard let entry = entries[key] else { return nil }
        guard now < entry.expires else {
            entries[key] = nil
            return nil
        }
        return entry.value
    }

    /// Stores `value` for `key` until `now + lifetime`. When full: drops expired entries, then the one that expires
    /// first (the oldest), so the cache never holds more than `capacity` entries.
    mutating func insert(_ value: Value, for key: Key, now: Date) {
        guard capacity > 0, lifetime > 0 else { return }
        if entries[key] == nil, entries.count >= capacity {
            entries = entries.filter { now < $0.value.expires }
            while entries.count >= capacity, let oldest = entries.min(by: { $0.value.expires < $1.value.expires }) {
                entries[oldest.key] = nil
            }
        }
        entries[key] = Entry(value: value, expires: now.addingTimeInterval(lifetime))
    }
}
