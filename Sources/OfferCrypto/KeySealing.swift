import CCrypto
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A 256-bit master key that seals tenant signing keys at rest.
///
/// Identified by `id`, the first 8 bytes of SHA-256 over a domain label and the key (safe to store and show).
/// `description` shows only the id.
public struct MasterKey: Sendable, Equatable, CustomStringConvertible {
    /// Length of a master key in bytes.
    public static let byteCount = 32
    /// Environment variable holding a base64 master key.
    public static let environmentVariable = "OFFERGATE_MASTER_KEY"

    let secret: [UInt8]
    /// The key's 8-byte fingerprint, stored in every blob it seals.
    public let id: [UInt8]

    /// A master key from 32 raw bytes.
    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == MasterKey.byteCount else {
            throw CryptoError(.invalidMasterKey, "master key must be \(MasterKey.byteCount) bytes, got \(bytes.count)")
        }
        secret = bytes
        id = Array(SHA256.hash(Array("offergate master key id v1".utf8) + [0] + bytes).prefix(8))
    }

    /// A master key from standard base64 of 32 bytes (surrounding whitespace ignored), e.g. `OFFERGATE_MASTER_KEY`.
    public init(base64: String) throws(CryptoError) {
        let trimmed = base64.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let data = Data(base64Encoded: trimmed) else {
            throw CryptoError(.invalidMasterKey, "master key is not valid base64")
        }
        try self.init(bytes: Array(data))
    }

    /// A fresh random master key.
    public static func generate() throws(CryptoError) -> MasterKey {
        try MasterKey(bytes: SecureRandom.bytes(count: byteCount))
    }

    /// The key from `OFFERGATE_MASTER_KEY` in `environment`, or `nil` if the variable is unset or empty.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(CryptoError) -> MasterKey? {
        guard let value = environment[environmentVariable], !value.isEmpty else { return nil }
        return try MasterKey(base64: value)
    }

    /// Standard base64 of the key (the `OFFERGATE_MASTER_KEY` / key-file format). Secret.
    public func exportBase64() -> String { Data(secret).base64EncodedString() }

    /// The id as 16 lowercase hex digits.
    public var idHex: String { Hex.encode(id) }

    /// Redacted: the id only.
    public var description: String { "MasterKey(id: \(idHex))" }

    /// Same key bytes, compared in constant time.
    public static func == (lhs: MasterKey, rhs: MasterKey) -> Bool { ConstantTime.equals(lhs.secret, rhs.secret) }

    /// Loads the master key file at `path`, creating it with a fresh random key if it does not exist.
    ///
    /// The file holds the key as base64 text and a newline (32 raw bytes are also accepted). It is created with
    /// mode 0600 atomically: written and fsynced under a temporary name made with `O_CREAT|O_EXCL`, then
    /// hard-linked into place, so a concurrent reader never sees a partial file and a concurrent creator loses
    /// cleanly to the first. An existing file must be a regular file, not a symlink, with no group or other
    /// permission bits, holding exactly one key. Blocking file IO: call at startup, not on a hot path.
    public static func loadOrCreate(file path: String) throws(CryptoError) -> MasterKey {
        if let existing = try read(path: path) { return existing }
        let key = try generate()
        let temp = path + ".tmp-\(getpid())-\(Hex.encode(try SecureRandom.bytes(count: 6)))"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw fileError("cannot create master key file", path: path) }
        let contents = Array((key.exportBase64() + "\n").utf8)
        let written = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        guard written == contents.count, synced == 0 else {
            unlink(temp)
            throw fileError("cannot write master key file", path: path)
        }
        let linked = link(temp, path)
        let linkErrno = errno
        unlink(temp)
        if linked != 0 {
            // Someone else created it first: use theirs.
            if linkErrno == EEXIST, let existing = try read(path: path) { return existing }
            throw CryptoError(
                .masterKeyFile, "cannot install master key file \(path): \(String(cString: strerror(linkErrno)))")
        }
        return key
    }

    /// The key in `path`, or `nil` if it does not exist.
    static func read(path: String) throws(CryptoError) -> MasterKey? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw fileError("cannot open master key file", path: path)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw fileError("cannot stat master key file", path: path) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw CryptoError(.masterKeyFile, "master key file \(path) is not a regular file")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw CryptoError(
                .masterKeyFile,
                "master key file \(path) has mode \(String(mode, radix: 8)); it must be 0600 or stricter")
        }
        guard info.st_size <= 256 else {
            throw CryptoError(.invalidMasterKey, "master key file \(path) has the wrong length (\(info.st_size) bytes)")
        }
        var buffer = [UInt8](repeating: 0, count: 257)
        let count = buffer.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress, $0.count) }
        guard count >= 0 else { throw fileError("cannot read master key file", path: path) }
        let contents = Array(buffer.prefix(count))
        if contents.count == byteCount { return try MasterKey(bytes: contents) }
        let text = String(decoding: contents, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let data = Data(base64Encoded: text), data.count == byteCount else {
            throw CryptoError(
                .invalidMasterKey,
                "master key file \(path) has the wrong length or encoding (want 32 bytes, base64 or raw)")
        }
        return try MasterKey(bytes: Array(data))
    }

    private static func fileError(_ what: String, path: String) -> CryptoError {
        CryptoError(.masterKeyFile, "\(what) \(path): \(String(cString: strerror(errno)))")
    }
}

/// `read(2)` (the name is shadowed inside `MasterKey` by `MasterKey.read(path:)`).
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}

/// The current master key plus earlier ones, so blobs sealed before a rotation still open.
public struct MasterKeyring: Sendable {
    /// The key new blobs are sealed with.
    public let current: MasterKey
    /// Earlier keys, used only to open (and re-seal) old blobs.
    public let previous: [MasterKey]

    /// A keyring; `previous` keys whose id equals `current`'s are ignored.
    public init(current: MasterKey, previous: [MasterKey] = []) {
        self.current = current
        self.previous = previous.filter { $0.id != current.id }
    }

    /// Environment variable with earlier master keys (comma-separated base64), kept during a rotation.
    public static let previousKeysEnvironmentVariable = "OFFERGATE_PREVIOUS_MASTER_KEYS"

    /// The keyring for a process: the current key from `OFFERGATE_MASTER_KEY` if set, else from `keyFile`
    /// (`--master-key-file`, or the embedded default beside the data directory: created with 0600 if missing),
    /// plus earlier keys from `OFFERGATE_PREVIOUS_MASTER_KEYS`. `nil` if neither a variable nor a file is given.
    public static func load(
        environment: [String: String] = ProcessInfo.processInfo.environment, keyFile: String?
    ) throws(CryptoError) -> MasterKeyring? {
        let current: MasterKey
        if let fromEnvironment = try MasterKey.fromEnvironment(environment) {
            current = fromEnvironment
        } else if let keyFile {
            current = try MasterKey.loadOrCreate(file: keyFile)
        } else {
            return nil
        }
        var previous: [MasterKey] = []
        for item in (environment[previousKeysEnvironmentVariable] ?? "").split(separator: ",") {
            let text = item.trimmingCharacters(in: .whitespaces)
            if !text.isEmpty { previous.append(try MasterKey(base64: text)) }
        }
        return MasterKeyring(current: current, previous: previous)
    }

    /// The key with this id, if present.
    public func key(id: [UInt8]) -> MasterKey? {
        if current.id == id { return current }
        return previous.first { $0.id == id }
    }
}

/// A sealed private key blob: `version(1) ‖ masterKeyId(8) ‖ nonce(12) ‖ ciphertext ‖ tag(16)`.
public struct SealedKey: Sendable, Equatable {
    /// The format version this build writes.
    public static let currentVersion: UInt8 = 1
    static let headerCount = 1 + 8
    static let nonceCount = 12
    static let tagCount = 16

    /// The whole blob, as stored.
    public let bytes: [UInt8]

    /// Wraps stored bytes, checking length and version.
    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count >= SealedKey.headerCount + SealedKey.nonceCount + SealedKey.tagCount else {
            throw CryptoError(.malformedSealedKey, "sealed key is too short (\(bytes.count) bytes)")
        }
        guard bytes[0] == SealedKey.currentVersion else {
            throw CryptoError(.malformedSealedKey, "unknown sealed key version \(bytes[0])")
        }
        self.bytes = bytes
    }

    /// The format version.
    public var version: UInt8 { bytes[0] }
    /// The id of the master key that sealed it.
    public var masterKeyId: [UInt8] { Array(bytes[1..<SealedKey.headerCount]) }
}

/// Seals and opens tenant private keys with AES-256-GCM under a `MasterKeyring`.
///
/// Each seal uses a fresh random 12-byte nonce. The associated data binds the format version, the master key id,
/// the tenant and the key id, so a blob copied to another tenant or key id fails to open.
public struct KeySealer: Sendable {
    /// The master keys.
    public let keyring: MasterKeyring

    /// A sealer over `keyring`.
    public init(keyring: MasterKeyring) { self.keyring = keyring }

    /// A sealer with a single master key.
    public init(masterKey: MasterKey) { self.keyring = MasterKeyring(current: masterKey) }

    /// Seals `plaintext` (e.g. the `.p8` PEM bytes) for `tenant` and `keyId` under the current master key.
    public func seal(_ plaintext: [UInt8], tenant: String, keyId: String) throws(CryptoError) -> SealedKey {
        let master = keyring.current
        let header = [SealedKey.currentVersion] + master.id
        let nonce = try SecureRandom.bytes(count: SealedKey.nonceCount)
        let aad = KeySealer.associatedData(header: header, tenant: tenant, keyId: keyId)
        let (ciphertext, tag) = try AESGCM.seal(plaintext, key: master.secret, nonce: nonce, aad: aad)
        return try SealedKey(bytes: header + nonce + ciphertext + tag)
    }

    /// Opens a blob sealed for `tenant` and `keyId` under any key of the keyring.
    public func open(_ sealed: SealedKey, tenant: String, keyId: String) throws(CryptoError) -> [UInt8] {
        guard let master = keyring.key(id: sealed.masterKeyId) else {
            throw CryptoError(
                .unknownMasterKey, "no master key with id \(Hex.encode(sealed.masterKeyId)) in the keyring")
        }
        let bytes = sealed.bytes
        let header = Array(bytes[0..<SealedKey.headerCount])
        let nonceEnd = SealedKey.headerCount + SealedKey.nonceCount
        let nonce = Array(bytes[SealedKey.headerCount..<nonceEnd])
        let ciphertext = Array(bytes[nonceEnd..<(bytes.count - SealedKey.tagCount)])
        let tag = Array(bytes.suffix(SealedKey.tagCount))
        let aad = KeySealer.associatedData(header: header, tenant: tenant, keyId: keyId)
        return try AESGCM.open(ciphertext, tag: tag, key: master.secret, nonce: nonce, aad: aad)
    }

    /// `true` if the blob is sealed under an older master key and should be re-sealed.
    public func needsReseal(_ sealed: SealedKey) -> Bool { sealed.masterKeyId != keyring.current.id }

    /// Opens the blob and seals it again under the current master key (always a fresh nonce).
    public func reseal(_ sealed: SealedKey, tenant: String, keyId: String) throws(CryptoError) -> SealedKey {
        var plaintext = try open(sealed, tenant: tenant, keyId: keyId)
        defer { plaintext.withUnsafeMutableBytes { wipe($0) } }
        return try seal(plaintext, tenant: tenant, keyId: keyId)
    }

    /// Seals a signing key's PKCS#8 PEM.
    public func seal(_ key: SigningKey, tenant: String, keyId: String) throws(CryptoError) -> SealedKey {
        var pem = Array(try key.exportPKCS8PEM().utf8)
        defer { pem.withUnsafeMutableBytes { wipe($0) } }
        return try seal(pem, tenant: tenant, keyId: keyId)
    }

    /// Opens a sealed `.p8` PEM and parses it as a signing key.
    public func openSigningKey(_ sealed: SealedKey, tenant: String, keyId: String) throws(CryptoError) -> SigningKey {
        var pem = try open(sealed, tenant: tenant, keyId: keyId)
        defer { pem.withUnsafeMutableBytes { wipe($0) } }
        return try SigningKey(pkcs8PEM: String(decoding: pem, as: UTF8.self))
    }

    static func associatedData(header: [UInt8], tenant: String, keyId: String) -> [UInt8] {
        var aad = Array("offergate/sealed-key".utf8) + [0] + header
        for field in [tenant, keyId] {
            let bytes = Array(field.utf8)
            let length = UInt32(bytes.count)
            aad += [
                UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF),
            ]
            aad += bytes
        }
        return aad
    }
}

/// Overwrites a buffer with zeros in a way the optimiser keeps (`OPENSSL_cleanse`).
func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
    if let base = buffer.baseAddress, buffer.count > 0 { OPENSSL_cleanse(base, buffer.count) }
}

/// AES-256-GCM with a 12-byte nonce and 16-byte tag through `EVP_CIPHER_CTX`.
enum AESGCM {
    static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8]) throws(CryptoError)
        -> (ciphertext: [UInt8], tag: [UInt8])
    {
        guard let ctx = EVP_CIPHER_CTX_new() else {
            throw CryptoError.drainingQueue(.cipherFailed, "EVP_CIPHER_CTX_new")
        }
        defer { EVP_CIPHER_CTX_free(ctx) }
        guard EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key, nonce) == 1 else {
            throw CryptoError.drainingQueue(.cipherFailed, "EVP_EncryptInit_ex failed")
        }
        var outLength: Int32 = 0
        guard
            aad.withUnsafeBufferPointer({ EVP_EncryptUpdate(ctx, nil, &outLength, $0.baseAddress, Int32($0.count)) })
                == 1
        else { throw CryptoError.drainingQueue(.cipherFailed, "AAD update failed") }
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + 16)
        var total: Int32 = 0
        let updated = ciphertext.withUnsafeMutableBufferPointer { out in
            plaintext.withUnsafeBufferPointer { input in
                EVP_EncryptUpdate(ctx, out.baseAddress, &total, input.baseAddress, Int32(input.count))
            }
        }
        guard updated == 1 else { throw CryptoError.drainingQueue(.cipherFailed, "EVP_EncryptUpdate failed") }
        var finalLength: Int32 = 0
        let finished = ciphertext.withUnsafeMutableBufferPointer {
            EVP_EncryptFinal_ex(ctx, $0.baseAddress! + Int(total), &finalLength)
        }
        guard finished == 1 else { throw CryptoError.drainingQueue(.cipherFailed, "EVP_EncryptFinal_ex failed") }
        ciphertext.removeLast(ciphertext.count - Int(total + finalLength))
        var tag = [UInt8](repeating: 0, count: 16)
        guard tag.withUnsafeMutableBufferPointer({ ccrypto_gcm_get_tag(ctx, $0.baseAddress, 16) }) == 1 else {
            throw CryptoError.drainingQueue(.cipherFailed, "GCM tag retrieval failed")
        }
        return (ciphertext, tag)
    }

    static func open(_ ciphertext: [UInt8], tag: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8])
        throws(CryptoError) -> [UInt8]
    {
        guard let ctx = EVP_CIPHER_CTX_new() else {
            throw CryptoError.drainingQueue(.cipherFailed, "EVP_CIPHER_CTX_new")
        }
        defer { EVP_CIPHER_CTX_free(ctx) }
        guard EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key, nonce) == 1 else {
            throw CryptoError.drainingQueue(.cipherFailed, "EVP_DecryptInit_ex failed")
        }
        var outLength: Int32 = 0
        guard
            aad.withUnsafeBufferPointer({ EVP_DecryptUpdate(ctx, nil, &outLength, $0.baseAddress, Int32($0.count)) })
                == 1
        else { throw CryptoError.drainingQueue(.cipherFailed, "AAD update failed") }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var total: Int32 = 0
        let updated = plaintext.withUnsafeMutableBufferPointer { out in
            ciphertext.withUnsafeBufferPointer { input in
                EVP_DecryptUpdate(ctx, out.baseAddress, &total, input.baseAddress, Int32(input.count))
            }
        }
        guard updated == 1 else { throw CryptoError.drainingQueue(.cipherFailed, "EVP_DecryptUpdate failed") }
        var tagCopy = tag
        guard tagCopy.withUnsafeMutableBufferPointer({ ccrypto_gcm_set_tag(ctx, $0.baseAddress, Int32($0.count)) }) == 1
        else {
            throw CryptoError.drainingQueue(.cipherFailed, "GCM tag setup failed")
        }
        var finalLength: Int32 = 0
        let finished = plaintext.withUnsafeMutableBufferPointer {
            EVP_DecryptFinal_ex(ctx, $0.baseAddress! + Int(total), &finalLength)
        }
        guard finished == 1 else {
            plaintext.withUnsafeMutableBytes { wipe($0) }
            throw CryptoError.drainingQueue(
                .sealedKeyRejected, "sealed key failed authentication (wrong tenant, key id or master key, or tampered)"
            )
        }
        plaintext.removeLast(plaintext.count - Int(total + finalLength))
        return plaintext
    }
}
