import Foundation
import Testing

@testable import OfferCrypto

/// Known-answer vectors copied from Apple-format reference data (Fixtures/apple_signatures.json).
struct AppleVectors: Decodable {
    struct V1: Decodable {
        let bundleId: String
        let keyId: String
        let productId: String
        let offerId: String
        let appAccountTokenInput: String
        let nonceInput: String
        let timestamp: Int64
        let payloadUtf8Hex: String
        let payloadByteLength: Int
        let signatureBase64DER: String
    }

    struct JWSVector: Decodable {
        let aud: String
        let header: [String: String]
        let compactJWS: String
    }

    let publicKeyPEM: String
    let v1: [V1]
    let jws: [JWSVector]

    static func load() throws -> AppleVectors {
        let url = try #require(
            Bundle.module.url(
                forResource: "apple_signatures", withExtension: "json",
                subdirectory: "Fixtures"))
        return try JSONDecoder().decode(AppleVectors.self, from: Data(contentsOf: url))
    }

    /// The claims of a vector token, parsed.
    static func claims(of compact: String) throws -> [String: Any] {
        let jws = try CompactJWS(compact: compact)
        return try #require(try JSONSerialization.jsonObject(with: Data(jws.payload)) as? [String: Any])
    }
}

/// The package root, from this file's location (Tests/OfferCryptoTests/Support.swift).
let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

struct ProcessResult {
    let status: Int32
    let stdout: Data
    let stderr: String
}

/// Writing to a pipe whose reader has exited raises SIGPIPE, which would end the whole test process.
let ignoreSIGPIPE: Void = { signal(SIGPIPE, SIG_IGN) }()

/// Runs a process on a dedicated thread (never blocking the cooperative pool) and collects its output.
///
/// stderr goes to a temporary file (no second reader thread to synchronise with); stdin is written by its own
/// thread so a large request cannot deadlock against the child's output.
func runProcess(_ executable: String, _ arguments: [String], stdin: Data = Data()) async throws -> ProcessResult {
    _ = ignoreSIGPIPE
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ProcessResult, any Error>) in
        let thread = Thread {
            let errorURL = FileManager.default.temporaryDirectory
                .appendingPathComponent("offercrypto-stderr-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: errorURL) }
            do {
                guard FileManager.default.createFile(atPath: errorURL.path, contents: nil) else {
                    throw PythonHelperError.failed("cannot create \(errorURL.path)")
                }
                let errors = try FileHandle(forWritingTo: errorURL)
                defer { try? errors.close() }
                let process = Process()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = arguments
                let input = Pipe()
                let output = Pipe()
                process.standardInput = input
                process.standardOutput = output
                process.standardError = errors
                try process.run()
                let writer = Thread {
                    // A child that exits early (bad interpreter, import error) must fail the test, not kill the
                    // runner with SIGPIPE: the signal is ignored and the write error dropped.
                    try? input.fileHandleForWriting.write(contentsOf: stdin)
                    try? input.fileHandleForWriting.close()
                }
                writer.start()
                let out = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                let errorText = (try? Data(contentsOf: errorURL)) ?? Data()
                continuation.resume(
                    returning: ProcessResult(
                        status: process.terminationStatus, stdout: out,
                        stderr: String(decoding: errorText, as: UTF8.self)))
            } catch {
                continuation.resume(throwing: error)
            }
        }
        thread.start()
    }
}

/// Runs the `openssl` CLI (for keys our own code must not produce: other curves, RSA, encrypted, SEC1).
func openssl(_ arguments: [String], stdin: Data = Data()) async throws -> String {
    let result = try await runProcess("/usr/bin/openssl", arguments, stdin: stdin)
    try #require(result.status == 0, "openssl \(arguments.joined(separator: " ")) failed: \(result.stderr)")
    return String(decoding: result.stdout, as: UTF8.self)
}

enum PythonHelperError: Error, CustomStringConvertible {
    case unavailable(String)
    case failed(String)
    var description: String {
        switch self {
        case .unavailable(let message), .failed(let message): message
        }
    }
}

/// The Python interpreter with app-store-server-library, cryptography and PyJWT: `OFFERGATE_PYTHON`, else the
/// venv `ops/pyenv` creates. Missing is a test failure (never a skip).
func pythonPath() throws -> String {
    if let configured = ProcessInfo.processInfo.environment["OFFERGATE_PYTHON"], !configured.isEmpty {
        guard FileManager.default.isExecutableFile(atPath: configured) else {
            throw PythonHelperError.unavailable("OFFERGATE_PYTHON=\(configured) is not executable; run ops/pyenv")
        }
        return configured
    }
    let venv = packageRoot.appendingPathComponent(".build/pyenv/bin/python3").path
    guard FileManager.default.isExecutableFile(atPath: venv) else {
        throw PythonHelperError.unavailable(
            "No Python for the cross-checks: run ops/pyenv (creates \(venv)) or set OFFERGATE_PYTHON")
    }
    return venv
}

/// Sends one request to tests/python/offer_crypto_check.py and returns its JSON response.
func pythonCheck(_ request: [String: Any]) async throws -> [String: Any] {
    let python = try pythonPath()
    let script = packageRoot.appendingPathComponent("tests/python/offer_crypto_check.py").path
    let body = try JSONSerialization.data(withJSONObject: request)
    let result = try await runProcess(python, [script], stdin: body)
    guard result.status == 0 else {
        throw PythonHelperError.failed(
            "python cross-check failed (status \(result.status)); "
                + "run ops/pyenv if modules are missing:\n\(result.stderr)")
    }
    guard let response = try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any] else {
        throw PythonHelperError.failed("python cross-check returned no JSON object")
    }
    return response
}

/// Parses JSON bytes into a dictionary.
func jsonObject(_ bytes: [UInt8]) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
}

/// A fixed-clock signer over a fresh key.
func makeSigner(
    keyId: String = "ABC123DEFG", issuerId: String = "57246542-96fe-1a63-e053-0824d011072a",
    bundleId: String = "com.example.offers"
) throws -> OfferSigner {
    try OfferSigner(
        key: SigningKey.generate(), keyId: keyId, issuerId: issuerId, bundleId: bundleId,
        clock: { Date(timeIntervalSince1970: 1_700_000_000.123) },
        nonces: { UUID(uuidString: "B2B0F5C6-1E0D-4A4B-9C2A-3F1E5D7C9A11")! })
}

/// A JSON scalar with its type kept (a boolean never equals 0/1), for field-by-field claim comparison.
enum JSONScalar: Decodable, Equatable, CustomStringConvertible {
    case string(String)
    case integer(Int64)
    case bool(Bool)
    case double(Double)
    case null

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Int64.self) {
            self = .integer(number)
        } else if let number = try? container.decode(Double.self) {
            self = .double(number)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    var description: String {
        switch self {
        case .string(let text): "\"\(text)\""
        case .integer(let number): "\(number)"
        case .bool(let flag): "\(flag)"
        case .double(let number): "\(number)"
        case .null: "null"
        }
    }
}

/// A flat JSON object (header or claims) decoded with types kept.
func flatJSON(_ bytes: [UInt8]) throws -> [String: JSONScalar] {
    try JSONDecoder().decode([String: JSONScalar].self, from: Data(bytes))
}

/// A flat JSON object from JSON text.
func flatJSON(_ text: String) throws -> [String: JSONScalar] { try flatJSON(Array(text.utf8)) }
