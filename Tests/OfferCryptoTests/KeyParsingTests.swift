import Foundation
import Testing

@testable import OfferCrypto

@Suite("Private key parsing")
struct KeyParsingTests {
    /// The base64 body of a PEM (what must never appear in an error).
    private func body(of pem: String) -> String {
        pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    }

    private func code(_ text: String) -> CryptoError.Code? {
        do {
            _ = try SigningKey(pkcs8PEM: text)
            return nil
        } catch {
            return error.code
        }
    }

    private func expectRejected(
        _ text: String, _ expected: CryptoError.Code, secret: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            _ = try SigningKey(pkcs8PEM: text)
            Issue.record("accepted a key that must be rejected (\(expected))", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == expected, sourceLocation: sourceLocation)
            #expect(!error.context.isEmpty, sourceLocation: sourceLocation)
            if let secret {
                for chunk in stride(from: 0, to: max(secret.count - 16, 1), by: 16).map({ offset in
                    String(secret.dropFirst(offset).prefix(16))
                }) where chunk.count == 16 {
                    #expect(!error.description.contains(chunk), sourceLocation: sourceLocation)
                    #expect(!error.debugDescription.contains(chunk), sourceLocation: sourceLocation)
                }
            }
        }
    }

    @Test("A P-256 PKCS#8 key from the openssl CLI parses and yields the CLI's public key")
    func opensslKeyParses() async throws {
        let pem = try await openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let key = try SigningKey(pkcs8PEM: pem)
        let expected = try await openssl(["pkey", "-pubout"], stdin: Data(pem.utf8))
        #expect(key.publicKeyPEM == expected)
        // And signatures made with it verify under the CLI-derived public key.
        let message = Array("hello".utf8)
        #expect(try PublicKey(pem: expected).verify(derSignature: key.signatureDER(for: message), message: message))
    }

    @Test("Mangled line breaks are tolerated: CRLF, no final newline, one line, spaces, literal \\n, short lines")
    func mangledPEMIsNormalised() throws {
        let original = try SigningKey.generate()
        let pem = try original.exportPKCS8PEM()
        let lines = pem.split(separator: "\n").map(String.init)
        let b64 = body(of: pem)
        let shortLines: String = stride(from: 0, to: b64.count, by: 20)
            .map { (offset: Int) -> String in String(b64.dropFirst(offset).prefix(20)) }
            .joined(separator: "\n")
        var variants: [String] = [pem]
        variants.append(pem.replacingOccurrences(of: "\n", with: "\r\n"))
        variants.append(String(pem.dropLast()))
        variants.append(lines.joined(separator: " "))
        variants.append(lines.joined())
        variants.append(lines.joined(separator: "\\n"))
        variants.append("  \n\t" + pem + "\n\n  ")
        variants.append("\u{FEFF}" + pem)
        variants.append("-----BEGIN PRIVATE KEY-----\n" + shortLines + "\n-----END PRIVATE KEY-----")
        for variant in variants {
            let parsed = try SigningKey(pkcs8PEM: variant)
            #expect(parsed.publicKeyPEM == original.publicKeyPEM)
        }
    }

    @Test("Empty and garbage input is rejected")
    func garbage() {
        expectRejected("", .emptyKey)
        expectRejected("  \r\n\t ", .emptyKey)
        expectRejected("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----", .emptyKey)
        expectRejected("hello world", .malformedPEM)
        expectRejected("-----BEGIN PRIVATE KEY-----\nAAAA", .malformedPEM)
        expectRejected("-----BEGIN PRIVATE KEY-----\nAA$A\n-----END PRIVATE KEY-----", .malformedPEM)
        expectRejected("-----BEGIN PRIVATE KEY-----\nAAAAA\n-----END PRIVATE KEY-----", .malformedPEM)
        expectRejected("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", .keyParseFailed)
        expectRejected("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----", .malformedPEM)
    }

    @Test("A truncated key body is rejected with OpenSSL's reason kept and no key material in the error")
    func truncated() throws {
        let pem = try SigningKey.generate().exportPKCS8PEM()
        let b64 = body(of: pem)
        let cut = String(b64.prefix(b64.count - 8))
        let text = "-----BEGIN PRIVATE KEY-----\n\(cut)\n-----END PRIVATE KEY-----\n"
        do {
            _ = try SigningKey(pkcs8PEM: text)
            Issue.record("accepted a truncated key")
        } catch {
            #expect(error.code == .keyParseFailed)
            #expect(!error.openSSLErrors.isEmpty)
            #expect(!error.debugDescription.contains(String(cut.prefix(24))))
        }
    }

    @Test("P-384, RSA, encrypted PKCS#8 and SEC1 keys are rejected with precise codes")
    func otherKeyKinds() async throws {
        let p384 = try await openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"])
        expectRejected(p384, .unsupportedCurve, secret: body(of: p384))

        let rsa = try await openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"])
        #expect(rsa.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        expectRejected(rsa, .unsupportedKeyType, secret: body(of: rsa))

        let p256 = try await openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"])
        let encrypted = try await openssl(
            ["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout", "pass:test-only"], stdin: Data(p256.utf8))
        #expect(encrypted.contains("BEGIN ENCRYPTED PRIVATE KEY"))
        expectRejected(encrypted, .encryptedKey, secret: body(of: encrypted))

        let sec1 = try await openssl(["ec", "-outform", "PEM"], stdin: Data(p256.utf8))
        #expect(sec1.contains("BEGIN EC PRIVATE KEY"))
        expectRejected(sec1, .unsupportedKeyFormat, secret: body(of: sec1))

        let rsaTraditional = try await openssl(["rsa", "-traditional"], stdin: Data(rsa.utf8))
        expectRejected(rsaTraditional, .unsupportedKeyFormat, secret: body(of: rsaTraditional))
    }

    @Test("Public keys: P-256 SPKI parses, other input is rejected")
    func publicKeys() async throws {
        let key = try SigningKey.generate()
        let publicKey = try PublicKey(pem: key.publicKeyPEM)
        #expect(try publicKey.pem == key.publicKeyPEM)
        #expect(throws: CryptoError.self) { try PublicKey(pem: "nonsense") }
        let p384 = try await openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"])
        let p384Public = try await openssl(["pkey", "-pubout"], stdin: Data(p384.utf8))
        do {
            _ = try PublicKey(pem: p384Public)
            Issue.record("accepted a P-384 public key")
        } catch {
            #expect(error.code == .unsupportedCurve)
        }
    }

    @Test("Error descriptions carry code and context; OpenSSL text only in debugDescription")
    func errorRendering() {
        let error = CryptoError(.keyParseFailed, "context here", openSSLErrors: ["error:1:lib::reason"])
        #expect(error.description == "CryptoError.keyParseFailed: context here")
        #expect(error.debugDescription.contains("error:1:lib::reason"))
        #expect(code("x") == .malformedPEM)
    }
}
