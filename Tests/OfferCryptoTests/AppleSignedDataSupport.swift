import Foundation
import Testing

@testable import OfferCrypto

/// What `Fixtures/AppleSignedData/test_ca_referee.py` made: a test certificate authority shaped like Apple's, cases
/// signed under it, and Apple's library's verdict on each.
struct TestCertificateAuthority: Decodable, Sendable {
    struct Expectation: Decodable, Sendable {
        let bundleId: String
        let appAppleId: Int64?
        let allowSandbox: Bool
        let allowXcode: Bool

        var value: AppleSignedDataExpectation {
            AppleSignedDataExpectation(
                bundleId: bundleId, appAppleId: appAppleId, allowSandbox: allowSandbox, allowXcode: allowXcode)
        }
    }

    struct AppleVerdict: Decodable, Sendable {
        let accepted: Bool
        let results: [String: String]
    }

    struct Case: Decodable, Sendable {
        let name: String
        let kind: String
        let jws: String
        let expectation: Expectation
        let apple: AppleVerdict

        var dataKind: AppleSignedDataKind {
            get throws { try #require(AppleSignedDataKind(rawValue: kind), "unknown kind \(kind)") }
        }
    }

    let rootDER: String
    let strangerRootDER: String
    let leafKeyPKCS8: String
    let x5c: [String]
    let cases: [Case]

    var root: [UInt8] { Array(Data(base64Encoded: rootDER) ?? Data()) }
    var strangerRoot: [UInt8] { Array(Data(base64Encoded: strangerRootDER) ?? Data()) }

    /// A verifier pinning this CA's root (and Apple's), with a fixed clock unless one is given.
    func verifier(
        clock: @escaping @Sendable () -> Date = { Date(timeIntervalSince1970: 1_764_547_200) },
        capacity: Int = 32, lifetime: TimeInterval = 300
    ) throws -> AppleSignedDataVerifier {
        try AppleSignedDataVerifier(
            additionalRoots: [root], chainCacheCapacity: capacity, chainCacheLifetime: lifetime, clock: clock)
    }

    /// Signs `payload` (JSON bytes) under the good leaf with `header` (default: ES256 and the good chain).
    func sign(payload: [UInt8], header: [UInt8]? = nil) throws -> String {
        let key = try SigningKey(pkcs8PEM: leafKeyPKCS8)
        let headerBytes = try header ?? Self.header(alg: "ES256", x5c: x5c)
        let signingInput = Base64URL.encode(headerBytes) + "." + Base64URL.encode(payload)
        let signature = try key.signatureRaw(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Compact JSON of a header.
    static func header(alg: String, x5c: [String]) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: ["alg": alg, "x5c": x5c], options: [.sortedKeys]))
    }

    /// Made once per test process (the script runs Apple's library on every case: about two seconds).
    static func shared() async throws -> TestCertificateAuthority { try await Store.shared.get() }

    private actor Store {
        static let shared = Store()
        private var task: Task<TestCertificateAuthority, any Error>?

        func get() async throws -> TestCertificateAuthority {
            if let task { return try await task.value }
            let made = Task { try await TestCertificateAuthority.make() }
            task = made
            return try await made.value
        }
    }

    private static func make() async throws -> TestCertificateAuthority {
        let python = try pythonPath()
        let script = packageRoot.appendingPathComponent(
            "Tests/OfferCryptoTests/Fixtures/AppleSignedData/test_ca_referee.py"
        ).path
        let result = try await runProcess(python, [script])
        guard result.status == 0 else {
            throw PythonHelperError.failed(
                "test_ca_referee.py failed (status \(result.status)); run ops/pyenv if modules are missing:\n"
                    + result.stderr)
        }
        return try JSONDecoder().decode(TestCertificateAuthority.self, from: result.stdout)
    }
}

/// The outcome of one verification, for comparing with expectations.
enum Outcome: Equatable, CustomStringConvertible {
    case accepted(AppleSignedDataAuthenticity)
    case rejected(AppleSignedDataError.Reason)

    init(_ body: () throws(AppleSignedDataError) -> VerifiedAppleSignedData) {
        do throws(AppleSignedDataError) {
            self = .accepted(try body().authenticity)
        } catch {
            self = .rejected(error.reason)
        }
    }

    var isAccepted: Bool {
        if case .accepted = self { return true }
        return false
    }

    var description: String {
        switch self {
        case .accepted(let how): "accepted (\(how.rawValue))"
        case .rejected(let reason): "rejected (\(reason.rawValue))"
        }
    }
}

/// The real Apple-signed corpus copied from ../shared/fixtures/apple-signed (Fixtures/AppleSignedData/real).
struct RealAppleFixture: Decodable, Sendable {
    let file: String
    let expected: String
    let kind: String
    let environment: String?
    let bundleId: String?
    let appAppleId: Int64?
    let signedDate: Int64?
    /// The file a near miss was made from (`derived_from`).
    let derivedFrom: String?

    enum CodingKeys: String, CodingKey {
        case file, expected, kind, environment, bundleId, appAppleId, signedDate
        case derivedFrom = "derived_from"
    }

    static func manifest() throws -> [RealAppleFixture] {
        try JSONDecoder().decode([RealAppleFixture].self, from: Data(contentsOf: url("manifest.json")))
    }

    static func url(_ name: String) throws -> URL {
        let directory = try #require(
            Bundle.module.url(forResource: "real", withExtension: nil, subdirectory: "Fixtures/AppleSignedData"))
        return directory.appendingPathComponent(name)
    }

    var jws: String {
        get throws { try String(contentsOf: Self.url(file), encoding: .utf8) }
    }

    var dataKind: AppleSignedDataKind {
        switch kind {
        case "notification": .notification
        case "transaction": .transaction
        default: .renewalInfo
        }
    }
}

/// SplitMix64: a seeded generator, so the hostile corpus is the same on every run.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
