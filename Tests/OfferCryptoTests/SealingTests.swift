import Foundation
import Testing

@testable import OfferCrypto

@Suite("Sealed keys and master keys")
struct SealingTests {
    @Test("Round trip: a sealed signing key opens to the same key, and signs")
    func roundTrip() throws {
        let sealer = try KeySealer(masterKey: .generate())
        let key = try SigningKey.generate()
        let sealed = try sealer.seal(key, tenant: "tenant-1", keyId: "ABC123")
        #expect(sealed.version == 1)
        #expect(sealed.masterKeyId == sealer.keyring.current.id)
        let pem = try key.exportPKCS8PEM()
        #expect(sealed.bytes.count == 1 + 8 + 12 + pem.utf8.count + 16)
        #expect(!String(decoding: sealed.bytes, as: UTF8.self).contains("PRIVATE KEY"))
        let opened = try sealer.openSigningKey(sealed, tenant: "tenant-1", keyId: "ABC123")
        #expect(opened.publicKeyPEM == key.publicKeyPEM)
        // Fresh nonce each time: sealing twice gives different blobs.
        #expect(try sealer.seal(key, tenant: "tenant-1", keyId: "ABC123") != sealed)
        // Stored bytes re-wrap.
        #expect(try SealedKey(bytes: sealed.bytes) == sealed)
    }

    @Test("Every flipped bit, a wrong tenant, a wrong key id and a wrong master key are rejected")
    func rejections() throws {
        let master = try MasterKey.generate()
        let sealer = KeySealer(masterKey: master)
        let plaintext = Array("secret".utf8)
        let sealed = try sealer.seal(plaintext, tenant: "t", keyId: "k")
        #expect(try sealer.open(sealed, tenant: "t", keyId: "k") == plaintext)

        for bit in 0..<(sealed.bytes.count * 8) {
            var bytes = sealed.bytes
            bytes[bit / 8] ^= UInt8(1 << (bit % 8))
            do {
                let tampered = try SealedKey(bytes: bytes)
                _ = try sealer.open(tampered, tenant: "t", keyId: "k")
                Issue.record("flipped bit \(bit) was accepted")
            } catch {
                // Version byte → malformed; master key id → unknown key; anything else → authentication failure.
                let expected: CryptoError.Code =
                    bit < 8 ? .malformedSealedKey : bit < 72 ? .unknownMasterKey : .sealedKeyRejected
                #expect(error.code == expected, "bit \(bit)")
            }
        }
        for (tenant, keyId) in [("u", "k"), ("t", "K"), ("", "k"), ("tk", ""), ("t\0", "k")] {
            do {
                _ = try sealer.open(sealed, tenant: tenant, keyId: keyId)
                Issue.record("opened under tenant \(tenant) key \(keyId)")
            } catch {
                #expect(error.code == .sealedKeyRejected)
                #expect(!error.openSSLErrors.isEmpty || error.context.contains("authentication"))
            }
        }
        do {
            _ = try KeySealer(masterKey: .generate()).open(sealed, tenant: "t", keyId: "k")
            Issue.record("opened under another master key")
        } catch {
            #expect(error.code == .unknownMasterKey)
        }
        // Another master key that claims the same id (forged header) still fails authentication.
        let impostor = try MasterKey(bytes: SecureRandom.bytes(count: 32))
        var forged = sealed.bytes
        forged.replaceSubrange(1..<9, with: impostor.id)
        do {
            _ = try KeySealer(masterKey: impostor).open(SealedKey(bytes: forged), tenant: "t", keyId: "k")
            Issue.record("opened under a wrong master key")
        } catch {
            #expect(error.code == .sealedKeyRejected)
        }
        #expect(throws: CryptoError.self) { try SealedKey(bytes: Array(sealed.bytes.prefix(36))) }
    }

    @Test("Rotation: old blobs open with old or new keyring; reseal moves every key to the new master key")
    func rotation() throws {
        let old = try MasterKey.generate()
        let new = try MasterKey.generate()
        let before = KeySealer(masterKey: old)
        let keys = try (0..<5).map { _ in try SigningKey.generate() }
        let sealed = try keys.enumerated().map { index, key in
            try before.seal(key, tenant: "tenant-\(index % 2)", keyId: "key-\(index)")
        }
        let during = KeySealer(keyring: MasterKeyring(current: new, previous: [old]))
        var resealed: [SealedKey] = []
        for (index, blob) in sealed.enumerated() {
            #expect(during.needsReseal(blob))
            // Readable by both during the rotation.
            #expect(
                try before.openSigningKey(blob, tenant: "tenant-\(index % 2)", keyId: "key-\(index)")
                    .publicKeyPEM == keys[index].publicKeyPEM)
            #expect(
                try during.openSigningKey(blob, tenant: "tenant-\(index % 2)", keyId: "key-\(index)")
                    .publicKeyPEM == keys[index].publicKeyPEM)
            let moved = try during.reseal(blob, tenant: "tenant-\(index % 2)", keyId: "key-\(index)")
            #expect(moved.masterKeyId == new.id)
            #expect(!during.needsReseal(moved))
            resealed.append(moved)
        }
        // After the rotation the old master key is dropped: every key still opens and signs.
        let after = KeySealer(masterKey: new)
        for (index, blob) in resealed.enumerated() {
            let key = try after.openSigningKey(blob, tenant: "tenant-\(index % 2)", keyId: "key-\(index)")
            #expect(key.publicKeyPEM == keys[index].publicKeyPEM)
            let message = Array("after rotation".utf8)
            #expect(try keys[index].publicKey.verify(derSignature: key.signatureDER(for: message), message: message))
        }
        // Old blobs without the old key in the ring are refused clearly.
        do {
            _ = try after.open(sealed[0], tenant: "tenant-0", keyId: "key-0")
            Issue.record("old blob opened without the old master key")
        } catch {
            #expect(error.code == .unknownMasterKey)
        }
    }

    @Test("MasterKey(base64:) and the environment: exactly 32 bytes")
    func masterKeyParsing() throws {
        let key = try MasterKey.generate()
        #expect(try MasterKey(base64: key.exportBase64()) == key)
        #expect(try MasterKey(base64: " \(key.exportBase64())\n") == key)
        #expect(key.description == "MasterKey(id: \(key.idHex))")
        #expect(!key.description.contains(key.exportBase64()))
        for bad in [
            "", "not base64!", Data(repeating: 1, count: 31).base64EncodedString(),
            Data(repeating: 1, count: 33).base64EncodedString(),
        ] {
            do {
                _ = try MasterKey(base64: bad)
                Issue.record("accepted master key \(bad)")
            } catch {
                #expect(error.code == .invalidMasterKey)
            }
        }
        #expect(try MasterKey.fromEnvironment([:]) == nil)
        #expect(try MasterKey.fromEnvironment(["OFFERGATE_MASTER_KEY": key.exportBase64()]) == key)
        #expect(throws: CryptoError.self) { try MasterKey.fromEnvironment(["OFFERGATE_MASTER_KEY": "short"]) }
    }

    @Test("loadOrCreate: creates 0600, reloads the same key, refuses wider permissions and wrong lengths")
    func masterKeyFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("offercrypto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("master.key").path

        let created = try MasterKey.loadOrCreate(file: path)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["master.key"])
        #expect(try MasterKey.loadOrCreate(file: path) == created)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == created.exportBase64() + "\n")

        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        do {
            _ = try MasterKey.loadOrCreate(file: path)
            Issue.record("accepted a 0644 master key file")
        } catch {
            #expect(error.code == .masterKeyFile)
        }

        let raw = dir.appendingPathComponent("raw.key").path
        let rawKey = try SecureRandom.bytes(count: 32)
        #expect(
            FileManager.default.createFile(atPath: raw, contents: Data(rawKey), attributes: [.posixPermissions: 0o600]))
        #expect(try MasterKey.loadOrCreate(file: raw) == MasterKey(bytes: rawKey))

        let short = dir.appendingPathComponent("short.key").path
        #expect(
            FileManager.default.createFile(
                atPath: short, contents: Data(repeating: 7, count: 31),
                attributes: [.posixPermissions: 0o600]))
        do {
            _ = try MasterKey.loadOrCreate(file: short)
            Issue.record("accepted a 31-byte master key file")
        } catch {
            #expect(error.code == .invalidMasterKey)
        }
        #expect(throws: CryptoError.self) {
            try MasterKey.loadOrCreate(file: dir.appendingPathComponent("no/such/dir").path)
        }
    }

    @Test("MasterKeyring.load: environment wins over the file; previous keys come from the environment")
    func keyringLoading() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("offercrypto-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("master.key").path
        #expect(try MasterKeyring.load(environment: [:], keyFile: nil) == nil)
        let fromFile = try #require(try MasterKeyring.load(environment: [:], keyFile: file))
        #expect(fromFile.current == (try MasterKey.loadOrCreate(file: file)))
        #expect(fromFile.previous.isEmpty)
        let current = try MasterKey.generate()
        let old1 = try MasterKey.generate()
        let old2 = try MasterKey.generate()
        let environment = [
            "OFFERGATE_MASTER_KEY": current.exportBase64(),
            "OFFERGATE_PREVIOUS_MASTER_KEYS": "\(old1.exportBase64()), \(old2.exportBase64())",
        ]
        let ring = try #require(try MasterKeyring.load(environment: environment, keyFile: file))
        #expect(ring.current == current)
        #expect(ring.previous == [old1, old2])
        #expect(ring.key(id: old2.id) == old2)
        #expect(throws: CryptoError.self) {
            try MasterKeyring.load(
                environment: [
                    "OFFERGATE_MASTER_KEY": current.exportBase64(),
                    "OFFERGATE_PREVIOUS_MASTER_KEYS": "bogus",
                ], keyFile: nil)
        }
    }
}
