import Foundation
import Testing

@testable import OfferCrypto

/// Thousands of malformed and forged JWS, made deterministically (seeded): every one is rejected with an
/// `AppleSignedDataError` (typed throws guarantee nothing else escapes) and none traps the process.
@Suite("Apple signed data: hostile input")
struct AppleSignedDataHostileTests {
    static let expectation = AppleSignedDataExpectation(
        bundleId: "com.example.offergate", appAppleId: 1_234_567_890, allowSandbox: true)

    /// Runs every input through the verifier; returns how many were accepted and the reasons seen. Thousands of
    /// inputs are a second or more of CPU: the loop yields the test process's cooperative pool (a thread per core)
    /// every 50, so other tests' awaits are not queued behind it.
    static func run(_ inputs: [(String, AppleSignedDataKind)], on verifier: AppleSignedDataVerifier) async -> (
        accepted: [Int], reasons: Set<AppleSignedDataError.Reason>
    ) {
        var accepted: [Int] = []
        var reasons: Set<AppleSignedDataError.Reason> = []
        for (index, (jws, kind)) in inputs.enumerated() {
            if index % 50 == 0 { await Task.yield() }
            do throws(AppleSignedDataError) {
                _ = try verifier.verify(jws, as: kind, expecting: expectation)
                accepted.append(index)
            } catch {
                reasons.insert(error.reason)
            }
        }
        return (accepted, reasons)
    }

    @Test("Mutations of good tokens: truncations, byte changes, splices, re-encodings, junk: all rejected")
    func mutations() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let verifier = try ca.verifier()
        let real = try RealAppleFixture.manifest().filter { $0.expected == "verify" }.prefix(3)
        var seeds: [(String, AppleSignedDataKind)] = [
            (try #require(ca.cases.first { $0.name == "good_transaction_production" }).jws, .transaction),
            (try #require(ca.cases.first { $0.name == "good_notification_production" }).jws, .notification),
        ]
        for entry in real { seeds.append((try entry.jws, entry.dataKind)) }
        // Each seed verifies as it is (for its own tenant), so every rejection below is the mutation's doing.
        let seedsAccepted = await Self.run(Array(seeds.prefix(2)), on: verifier).accepted
        #expect(seedsAccepted.count == 2, "the test CA seeds must verify")

        var rng = SeededGenerator(seed: 0x0FFE_46A7)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ \n\"{}\\".utf8)
        var inputs: [(String, AppleSignedDataKind)] = []
        for (seed, kind) in seeds {
            let bytes = Array(seed.utf8)
            // Truncations (every 23rd length) and suffixes.
            for cut in stride(from: 1, to: bytes.count, by: 23) {
                inputs.append((String(decoding: bytes[..<cut], as: UTF8.self), kind))
                inputs.append((String(decoding: bytes[cut...], as: UTF8.self), kind))
            }
            // One byte changed to another character (never the same one).
            for _ in 0..<150 {
                var copy = bytes
                let at = Int.random(in: 0..<copy.count, using: &rng)
                var replacement = alphabet.randomElement(using: &rng)!
                while replacement == copy[at] { replacement = alphabet.randomElement(using: &rng)! }
                copy[at] = replacement
                inputs.append((String(decoding: copy, as: UTF8.self), kind))
            }
            // Random bytes inserted or removed.
            for _ in 0..<40 {
                var copy = bytes
                let at = Int.random(in: 0..<copy.count, using: &rng)
                if Bool.random(using: &rng) {
                    copy.insert(alphabet.randomElement(using: &rng)!, at: at)
                } else {
                    copy.remove(at: at)
                }
                inputs.append((String(decoding: copy, as: UTF8.self), kind))
            }
            // Parts swapped, duplicated, padded, doubled.
            let parts = seed.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            for variant in [
                "\(parts[1]).\(parts[0]).\(parts[2])", "\(parts[0]).\(parts[0]).\(parts[2])",
                "\(parts[0]).\(parts[1])", "\(parts[0]).\(parts[1]).\(parts[2]).\(parts[2])",
                "\(parts[0])=.\(parts[1]).\(parts[2])", "\(parts[0]).\(parts[1])==.\(parts[2])",
                "\(parts[0]).\(parts[1]).\(parts[2])==", " \(seed)", "\(seed)\n", "\(seed).",
                "\(parts[0]).\(parts[1]).", "..", ".", "", "\(parts[0])..\(parts[2])",
                seed.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/"),
                "\(parts[0]).\(parts[1]).\(parts[2])\(parts[2])",
            ] where variant != seed {
                // A variant can equal the seed: JSON text base64url-encodes to no '-' or '_' at all (no sextet of
                // printable ASCII is 62 or 63 save '>', '?', '~'), so only the 86-character signature can hold them,
                // and about one signature in 15 holds none; then the '-'→'+' re-encoding is the token itself.
                inputs.append((variant, kind))
            }
            // The token as another kind (claims in the wrong place). Not a transaction as renewal info: its
            // `environment` and `signedDate` are all renewal info is checked for, so that verifies (in Apple's
            // library too); which kind a JWS is comes from the field it arrived in, never from the JWS.
            for other in AppleSignedDataKind.allCases where other != kind && other != .renewalInfo {
                inputs.append((seed, other))
            }
        }
        // Pure junk of assorted lengths.
        for _ in 0..<200 {
            let length = Int.random(in: 0..<600, using: &rng)
            let junk = (0..<length).map { _ in alphabet.randomElement(using: &rng)! }
            inputs.append((String(decoding: junk, as: UTF8.self), .transaction))
        }
        #expect(inputs.count > 4_000)
        let result = await Self.run(inputs, on: verifier)
        #expect(result.accepted.isEmpty, "accepted: \(result.accepted.prefix(5).map { inputs[$0].0.prefix(80) })")
        #expect(result.reasons.contains(.malformedJWS) && result.reasons.contains(.invalidSignature))
    }

    @Test("Validly signed payloads with a wrong type in every checked claim, and headers of every wrong shape")
    func wrongTypesAndShapes() async throws {
        let ca = try await TestCertificateAuthority.shared()
        let verifier = try ca.verifier()
        let wrongValues = [
            "\"1748736000000\"", "1.5", "-1", "true", "null", "[]", "{}", "\"\"", "1e400", "99999999999999999999",
            "[\"Production\"]", "{\"a\":1}", "0", "\"Production\\u0000\"",
        ]
        var inputs: [(String, AppleSignedDataKind)] = []
        var mustBeMalformed: [Int] = []
        let base: [String: String] = [
            "signedDate": "1748736000000", "environment": "\"Production\"", "bundleId": "\"com.example.offergate\"",
            "transactionId": "\"1\"",
        ]
        func object(_ members: [String: String]) -> String {
            "{" + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
        }
        for claim in ["signedDate", "environment", "bundleId"] {
            for value in wrongValues {
                var members = base
                members[claim] = value
                inputs.append((try ca.sign(payload: Array(object(members).utf8)), .transaction))
            }
        }
        // Notifications: data of every wrong type, and every wrong type inside data.
        let data: [String: String] = [
            "bundleId": "\"com.example.offergate\"", "environment": "\"Production\"", "appAppleId": "1234567890",
        ]
        for value in wrongValues {
            inputs.append(
                (
                    try ca.sign(payload: Array(object(["signedDate": "1748736000000", "data": value]).utf8)),
                    .notification
                ))
            for claim in data.keys {
                var inner = data
                inner[claim] = value
                let payload = object(["signedDate": "1748736000000", "data": object(inner)])
                inputs.append((try ca.sign(payload: Array(payload.utf8)), .notification))
            }
        }
        // Payloads that are not a JSON object, or not JSON, or not UTF-8.
        let notObjects: [[UInt8]] = [
            Array("null".utf8), Array("[]".utf8), Array("\"x\"".utf8), Array("1".utf8), Array("".utf8),
            Array("{".utf8), Array("{\"signedDate\":1}x".utf8), [0xFF, 0xFE, 0x7B, 0x7D],
            [0xEF, 0xBB, 0xBF] + Array("{}".utf8),
            Array(String(repeating: "[", count: 100_000).utf8),
            Array(
                ("{\"a\":" + String(repeating: "[", count: 50_000) + String(repeating: "]", count: 50_000) + "}").utf8),
            Array(("{\"signedDate\":1748736000000,\"x\":\"" + String(repeating: "\\u", count: 1000) + "\"}").utf8),
        ]
        for payload in notObjects {
            mustBeMalformed.append(inputs.count)
            inputs.append((try ca.sign(payload: payload), .transaction))
        }
        // Headers: not objects, algorithms, x5c shapes, sizes.
        let payload = Array(object(base).utf8)
        let x5c = ca.x5c
        func quoted(_ list: [String]) -> String { "[" + list.map { "\"\($0)\"" }.joined(separator: ",") + "]" }
        var headers: [String] = [
            "null", "[]", "\"ES256\"", "1", "{", "", String(repeating: "{\"a\":", count: 3_000),
            String(repeating: "[", count: 12_000),
        ]
        for alg in [
            "\"es256\"", "\"ES256 \"", "\"ES384\"", "\"EdDSA\"", "\"none\"", "256", "null", "[\"ES256\"]", "{}",
        ] {
            headers.append("{\"alg\":\(alg),\"x5c\":\(quoted(x5c))}")
        }
        headers.append("{\"x5c\":\(quoted(x5c))}")
        let derOfLeaf = Data(base64Encoded: x5c[0]) ?? Data()
        // A certificate in the base64url alphabet (x5c is standard base64). The test CA's keys are new each run and
        // a certificate's text may have no '+' or '/' to change (a leaf had none in about one run of 25), so the
        // first of the three that has one is the one rewritten: the chance that none has is about 1 in 10^9.
        let rewritable = try #require(x5c.firstIndex { $0.contains("+") || $0.contains("/") })
        var urlAlphabet = x5c
        urlAlphabet[rewritable] = x5c[rewritable].replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
        let badCertificates: [[String]] = [
            [], [x5c[0]], [x5c[0], x5c[1]], x5c + [x5c[2]], Array(repeating: x5c[0], count: 100), urlAlphabet,
            [String(x5c[0].dropLast(4)), x5c[1], x5c[2]], [x5c[0] + "====", x5c[1], x5c[2]],
            [String(x5c[0].prefix(64)) + "\n" + String(x5c[0].dropFirst(64)), x5c[1], x5c[2]],
            [Data(derOfLeaf.prefix(derOfLeaf.count - 1)).base64EncodedString(), x5c[1], x5c[2]],
            [(derOfLeaf + Data([0])).base64EncodedString(), x5c[1], x5c[2]],
            [Data(repeating: 0x30, count: 700).base64EncodedString(), x5c[1], x5c[2]],
            ["", "", ""], [x5c[1], x5c[1], x5c[2]], [x5c[0], x5c[0], x5c[2]], [x5c[2], x5c[2], x5c[2]],
            [String(repeating: "A", count: 12_000), x5c[1], x5c[2]],
        ]
        for certificates in badCertificates {
            headers.append("{\"alg\":\"ES256\",\"x5c\":\(quoted(certificates))}")
        }
        for x5cValue in ["\"\(x5c[0])\"", "null", "{}", "[1,2,3]", "[null,null,null]", "[[],[],[]]"] {
            headers.append("{\"alg\":\"ES256\",\"x5c\":\(x5cValue)}")
        }
        // A 1 MiB header, and one just over the header limit.
        headers.append(
            "{\"alg\":\"ES256\",\"x5c\":\(quoted(x5c)),\"pad\":\"\(String(repeating: "a", count: 1 << 20))\"}")
        headers.append(
            "{\"alg\":\"ES256\",\"x5c\":\(quoted(x5c)),\"pad\":\"\(String(repeating: "a", count: 12_000))\"}")
        for header in headers {
            inputs.append((try ca.sign(payload: payload, header: Array(header.utf8)), .transaction))
        }
        // A payload over the total limit.
        let huge = object(base.merging(["pad": "\"" + String(repeating: "b", count: 300_000) + "\""]) { $1 })
        mustBeMalformed.append(inputs.count)
        inputs.append((try ca.sign(payload: Array(huge.utf8)), .transaction))

        #expect(inputs.count > 150)
        let result = await Self.run(inputs, on: verifier)
        #expect(result.accepted.isEmpty, "accepted: \(result.accepted.map { inputs[$0].0.prefix(120) })")
        for index in mustBeMalformed {
            let (jws, kind) = inputs[index]
            #expect(
                Outcome { () throws(AppleSignedDataError) in
                    try verifier.verify(jws, as: kind, expecting: Self.expectation)
                } == .rejected(.malformedJWS), "input \(index)")
        }
        #expect(
            result.reasons
                == [
                    .malformedJWS, .unsupportedAlgorithm, .invalidCertificateChain, .environmentNotAllowed,
                    .wrongBundleId,
                    .wrongAppAppleId,
                ], "\(result.reasons)")
    }

    @Test("Forged signatures under the real chain: random 64-byte r||s, zeros, the curve order, all refused")
    func forgedSignatures() throws {
        let verifier = try AppleSignedDataVerifier(clock: { Date(timeIntervalSince1970: 1_764_547_200) })
        let entry = try #require(try RealAppleFixture.manifest().first { $0.file == "01_notification.jws" })
        let expectation = AppleSignedDataRealFixtureTests.expectation(for: entry)
        let jws = try entry.jws
        let parts = jws.split(separator: ".")
        var rng = SeededGenerator(seed: 42)
        var signatures: [[UInt8]] = [
            [UInt8](repeating: 0, count: 64), [UInt8](repeating: 0xFF, count: 64),
            Hex.decode("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")!
                + [UInt8](repeating: 1, count: 32),
            [UInt8](repeating: 1, count: 63), [UInt8](repeating: 1, count: 65), [],
        ]
        for _ in 0..<500 { signatures.append((0..<64).map { _ in UInt8.random(in: 0...255, using: &rng) }) }
        let real = try #require(Base64URL.decode(parts[2]))
        for bit in 0..<512 {
            var flipped = real
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            signatures.append(flipped)
        }
        var accepted = 0
        for signature in signatures {
            let forged = "\(parts[0]).\(parts[1]).\(Base64URL.encode(signature))"
            do throws(AppleSignedDataError) {
                _ = try verifier.verify(forged, as: .notification, expecting: expectation)
                accepted += 1
            } catch {
                #expect(error.reason == .invalidSignature)
            }
        }
        #expect(accepted == 0)
        #expect(signatures.count > 1_000)
        #expect(throws: Never.self) { try verifier.verify(jws, as: .notification, expecting: expectation) }
    }
}
