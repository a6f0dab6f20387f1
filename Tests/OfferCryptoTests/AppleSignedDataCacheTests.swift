import Foundation
import Synchronization
import Testing

@testable import OfferCrypto

/// A clock tests move by hand.
final class ManualClock: Sendable {
    private let now: Mutex<Date>
    init(_ start: Date) { now = Mutex(start) }
    func advance(by seconds: TimeInterval) { now.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var read: @Sendable () -> Date { { [self] in now.withLock { $0 } } }
}

@Suite("Apple signed data: the verified-chain cache")
struct AppleSignedDataCacheTests {
    typealias Cache = VerifiedChainCache<Int>
    static let t0 = Date(timeIntervalSince1970: 1_764_547_200)

    static func key(_ n: UInt8) -> Cache.Key { Cache.Key(leaf: [n], intermediate: [n, n]) }

    @Test("An entry lives exactly `lifetime`; an expired one is removed when looked up")
    func lifetime() {
        var cache = Cache(capacity: 4, lifetime: 300)
        cache.insert(1, for: Self.key(1), now: Self.t0)
        #expect(cache.value(for: Self.key(1), now: Self.t0.addingTimeInterval(299.999)) == 1)
        #expect(cache.value(for: Self.key(1), now: Self.t0.addingTimeInterval(300)) == nil)
        #expect(cache.count == 0)
        #expect(cache.value(for: Self.key(2), now: Self.t0) == nil)
    }

    @Test("Keys are the exact bytes of both certificates")
    func exactKeys() {
        var cache = Cache(capacity: 4, lifetime: 300)
        cache.insert(1, for: Cache.Key(leaf: [1, 2], intermediate: [3]), now: Self.t0)
        #expect(cache.value(for: Cache.Key(leaf: [1], intermediate: [2, 3]), now: Self.t0) == nil)
        #expect(cache.value(for: Cache.Key(leaf: [1, 2], intermediate: [3]), now: Self.t0) == 1)
    }

    @Test("Bounded: when full, expired entries go first, then the oldest; re-inserting a key evicts nothing")
    func bounded() {
        var cache = Cache(capacity: 2, lifetime: 300)
        cache.insert(1, for: Self.key(1), now: Self.t0)
        cache.insert(2, for: Self.key(2), now: Self.t0.addingTimeInterval(10))
        cache.insert(22, for: Self.key(2), now: Self.t0.addingTimeInterval(20))
        #expect(cache.count == 2)
        cache.insert(3, for: Self.key(3), now: Self.t0.addingTimeInterval(30))
        #expect(cache.count == 2)
        #expect(cache.value(for: Self.key(1), now: Self.t0.addingTimeInterval(30)) == nil)
        #expect(cache.value(for: Self.key(2), now: Self.t0.addingTimeInterval(30)) == 22)
        // Key 2 (stored at t0+20) has expired by t0+321; key 3 (t0+30) has not: 2 goes, 3 stays.
        cache.insert(4, for: Self.key(4), now: Self.t0.addingTimeInterval(321))
        #expect(cache.value(for: Self.key(3), now: Self.t0.addingTimeInterval(321)) == 3)
        #expect(cache.value(for: Self.key(4), now: Self.t0.addingTimeInterval(321)) == 4)
        #expect(cache.count == 2)
        for n in 5...100 { cache.insert(Int(n), for: Self.key(UInt8(n)), now: Self.t0.addingTimeInterval(400)) }
        #expect(cache.count == 2)
    }

    @Test("Capacity or lifetime 0 disables the cache")
    func disabled() {
        for (capacity, lifetime) in [(0, 300.0), (4, 0.0)] {
            var cache = Cache(capacity: capacity, lifetime: lifetime)
            cache.insert(1, for: Self.key(1), now: Self.t0)
            #expect(cache.count == 0)
        }
    }

    @Test("A cached chain still needs the signature, validity at the new signedDate, and x5c[2] = its root")
    func cachedChainIsNotATrustedPayload() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let clock = ManualClock(Self.t0)
        let verifier = try ca.verifier(clock: clock.read)
        let expectation = AppleSignedDataExpectation(bundleId: "com.example.offergate")
        func payload(signedDate: Int64, price: Int = 9990) -> [UInt8] {
            Array(
                """
                {"bundleId":"com.example.offergate","environment":"Production","price":\(price),\
                "signedDate":\(signedDate),"transactionId":"1"}
                """.utf8)
        }
        let good = try ca.sign(payload: payload(signedDate: 1_748_736_000_000))
        func outcome(_ jws: String) -> Outcome {
            Outcome { () throws(AppleSignedDataError) in
                try verifier.verify(jws, as: .transaction, expecting: expectation)
            }
        }

        #expect(outcome(good) == .accepted(.verifiedChain))
        #expect(verifier.cacheStatistics == .init(hits: 0, misses: 1))
        #expect(outcome(good) == .accepted(.verifiedChain))
        #expect(verifier.cacheStatistics == .init(hits: 1, misses: 1))

        // Hit, but the signature is over other bytes.
        let parts = good.split(separator: ".")
        let otherPayload = Base64URL.encode(payload(signedDate: 1_748_736_000_000, price: 1))
        #expect(outcome("\(parts[0]).\(otherPayload).\(parts[2])") == .rejected(.invalidSignature))
        #expect(verifier.cacheStatistics == .init(hits: 2, misses: 1))

        // Same chain, signedDate after the leaf expired (2034): the cached validity does not cover it, the full
        // verification runs again and refuses.
        let late = try ca.sign(payload: payload(signedDate: 2_051_222_400_000))  // 2035-01-01
        #expect(outcome(late) == .rejected(.invalidCertificateChain))
        #expect(verifier.cacheStatistics == .init(hits: 2, misses: 2))

        // Same (leaf, intermediate), x5c[2] not the root.
        let header = try TestCertificateAuthority.header(alg: "ES256", x5c: [ca.x5c[0], ca.x5c[1], ca.x5c[1]])
        let wrongLast = try ca.sign(payload: payload(signedDate: 1_748_736_000_000), header: header)
        #expect(outcome(wrongLast) == .rejected(.invalidCertificateChain))

        // Entries age with the injected clock only.
        clock.advance(by: 299)
        let before = verifier.cacheStatistics
        #expect(outcome(good) == .accepted(.verifiedChain))
        #expect(verifier.cacheStatistics.hits == before.hits + 1)
        clock.advance(by: 301)
        #expect(outcome(good) == .accepted(.verifiedChain))
        #expect(verifier.cacheStatistics.misses == before.misses + 1)
        #expect(verifier.cachedChainCount == 1)
    }

    @Test(
        "A header is remembered once its JWS verified; a JWS with the same header still needs its own signature, validity and root"
    )
    func rememberedHeaderIsNotATrustedPayload() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let verifier = try ca.verifier()
        let expectation = AppleSignedDataExpectation(bundleId: "com.example.offergate")
        func payload(signedDate: Int64 = 1_748_736_000_000, price: Int = 9990) -> [UInt8] {
            Array(
                """
                {"bundleId":"com.example.offergate","environment":"Production","price":\(price),\
                "signedDate":\(signedDate),"transactionId":"1"}
                """.utf8)
        }
        func outcome(_ jws: String) -> Outcome {
            Outcome { () throws(AppleSignedDataError) in
                try verifier.verify(jws, as: .transaction, expecting: expectation)
            }
        }
        // Failures are not remembered: a bad signature under the usual header, a wrong x5c[2], another algorithm.
        let good = try ca.sign(payload: payload())
        let parts = good.split(separator: ".")
        let forged = "\(parts[0]).\(Base64URL.encode(payload(price: 1))).\(parts[2])"
        #expect(outcome(forged) == .rejected(.invalidSignature))
        let wrongRoot = try TestCertificateAuthority.header(alg: "ES256", x5c: [ca.x5c[0], ca.x5c[1], ca.x5c[1]])
        #expect(outcome(try ca.sign(payload: payload(), header: wrongRoot)) == .rejected(.invalidCertificateChain))
        let es384 = try TestCertificateAuthority.header(alg: "ES384", x5c: ca.x5c)
        #expect(outcome(try ca.sign(payload: payload(), header: es384)) == .rejected(.unsupportedAlgorithm))
        #expect(verifier.rememberedHeaders.count == 0)

        #expect(outcome(good) == .accepted(.verifiedChain))
        #expect(verifier.rememberedHeaders == (1, 0))
        #expect(outcome(try ca.sign(payload: payload(price: 2))) == .accepted(.verifiedChain))
        #expect(verifier.rememberedHeaders == (1, 1))

        // Remembered header, but the signature is over other bytes; then a signedDate after the leaf expired.
        #expect(outcome(forged) == .rejected(.invalidSignature))
        let late = try ca.sign(payload: payload(signedDate: 2_051_222_400_000))  // 2035-01-01
        #expect(outcome(late) == .rejected(.invalidCertificateChain))
        #expect(verifier.rememberedHeaders == (1, 3))

        // The same certificates in other header bytes (members in another order) are decoded, then remembered too.
        let reordered = Array(
            #"{"x5c":["\#(ca.x5c[0])","\#(ca.x5c[1])","\#(ca.x5c[2])"],"alg":"ES256"}"#.utf8)
        #expect(outcome(try ca.sign(payload: payload(), header: reordered)) == .accepted(.verifiedChain))
        #expect(verifier.rememberedHeaders == (2, 3))
    }

    @Test("Remembered headers: exact bytes, bounded, replaced in turn")
    func rememberedHeadersBounded() throws {
        func entry(_ bytes: [UInt8]) -> VerifiedHeaders.Entry {
            VerifiedHeaders.Entry(segment: bytes, certificates: [bytes])
        }
        var headers = VerifiedHeaders(capacity: 2)
        headers.remember(entry([1, 2, 3]))
        #expect(headers.certificates(for: [1, 2, 4][...]) == nil)
        #expect(headers.certificates(for: [1, 2][...]) == nil)
        #expect(headers.certificates(for: [0, 1, 2, 3][1...]) == [[1, 2, 3]])
        headers.remember(entry([1, 2, 3]))
        headers.remember(entry([4]))
        #expect(headers.count == 2)
        headers.remember(entry([5]))  // replaces the first remembered
        #expect(headers.count == 2)
        #expect(headers.certificates(for: [1, 2, 3][...]) == nil)
        #expect(headers.certificates(for: [4][...]) != nil && headers.certificates(for: [5][...]) != nil)
        headers.remember(entry([6]))  // then the next
        #expect(headers.certificates(for: [4][...]) == nil && headers.certificates(for: [5][...]) != nil)
        #expect(headers.hits == 4)
        var none = VerifiedHeaders(capacity: 0)
        none.remember(entry([1]))
        #expect(none.count == 0)
    }

    @Test("Without a cache every verification runs X509_verify_cert")
    func noCache() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let verifier = try ca.verifier(capacity: 0)
        let item = try #require(ca.cases.first { $0.name == "good_transaction_production" })
        for _ in 0..<3 { _ = try verifier.verify(item.jws, as: .transaction, expecting: item.expectation.value) }
        #expect(verifier.cacheStatistics == .init(hits: 0, misses: 3))
    }

    @Test("One verifier, four tasks at once, real and test CA data: every verdict as alone")
    func concurrent() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let verifier = try ca.verifier()
        let real = try RealAppleFixture.manifest().filter { $0.expected == "verify" }
        struct Job: Sendable {
            let jws: String
            let kind: AppleSignedDataKind
            let expectation: AppleSignedDataExpectation
            let accept: Bool
        }
        var jobs: [Job] = try real.map {
            Job(
                jws: try $0.jws, kind: $0.dataKind, expectation: AppleSignedDataRealFixtureTests.expectation(for: $0),
                accept: true)
        }
        for item in ca.cases {
            let expected = try #require(AppleSignedDataRefereeTests.expected[item.name])
            let accept: Bool =
                switch expected {
                case .accept, .looserThanApple: true
                case .reject, .stricterThanApple: false
                }
            jobs.append(
                Job(jws: item.jws, kind: try item.dataKind, expectation: item.expectation.value, accept: accept))
        }
        let all = jobs
        let wrong = await withTaskGroup(of: Int.self) { group in
            for task in 0..<4 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<5 {
                        for (index, job) in all.enumerated() where (index + round + task) % 2 == 0 {
                            let accepted =
                                (try? verifier.verify(job.jws, as: job.kind, expecting: job.expectation)) != nil
                            if accepted != job.accept { wrong += 1 }
                        }
                    }
                    return wrong
                }
            }
            return await group.reduce(0, +)
        }
        #expect(wrong == 0)
        #expect(verifier.cacheStatistics.hits > verifier.cacheStatistics.misses)
    }
}
