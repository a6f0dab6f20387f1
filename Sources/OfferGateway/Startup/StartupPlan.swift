import Foundation
import OfferCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// What `offergate` decides at start, as a value: which database (embedded or external) and where the master key
/// and the admin key come from, computed from the command line, the environment and one file-system fact (the
/// default data directory) with no IO. `loadKeys(logger:)` then performs the decisions (creates directories,
/// reads or creates key files) and logs what the plan says.
///
/// The rules (README "Configuration"):
/// - **Database**: `--database-url` / `DATABASE_URL` is external; otherwise the embedded cluster under
///   `--data-dir` / `OFFERGATE_DATA_DIR`, or the default data directory.
/// - **Master key**: `OFFERGATE_MASTER_KEY` wins when set; `--master-key-file FILE` names the file to read or create
///   (0600); with neither, `master.key` beside the data (the embedded cluster's directory, or the default data
///   directory with a warning when the database is external: every gateway sharing a database needs the same key).
///   The file's directory is created first. Earlier keys come from `OFFERGATE_PREVIOUS_MASTER_KEYS`; with any,
///   the gateway service re-seals the signing keys still sealed under them as part of its lifetime
///   (`StartupKeys.resealsSigningKeys`).
/// - **Admin key**: `OFFERGATE_ADMIN_KEY` when set; else `--admin-key-file FILE` (must exist, not be empty); else in
///   embedded mode `admin.key` in the data directory, created once (0600); else admin methods are off (a warning).
public struct StartupPlan: Sendable, Equatable {
    /// The command-line values that bear on the plan, each already resolved against its environment fallback by the
    /// command-line parser (`DATABASE_URL`, `OFFERGATE_DATA_DIR`).
    public struct Arguments: Sendable, Equatable {
        /// `--database-url` / `DATABASE_URL`.
        public var databaseURL: String?
        /// `--data-dir` / `OFFERGATE_DATA_DIR`.
        public var dataDirectory: String?
        /// `--master-key-file`.
        public var masterKeyFile: String?
        /// `--admin-key-file`.
        public var adminKeyFile: String?

        /// The values, `nil` when not given.
        public init(
            databaseURL: String? = nil, dataDirectory: String? = nil, masterKeyFile: String? = nil,
            adminKeyFile: String? = nil
        ) {
            self.databaseURL = databaseURL
            self.dataDirectory = dataDirectory
            self.masterKeyFile = masterKeyFile
            self.adminKeyFile = adminKeyFile
        }
    }

    /// Which PostgreSQL the gateway uses.
    public enum Database: Sendable, Equatable {
        /// A database somebody else runs, by libpq connection string or URI.
        case external(url: String)
        /// The embedded cluster under this directory (started by the executable, stopped at exit).
        case embedded(baseDirectory: URL)

        /// The database for these arguments: external with a URL, else embedded under the data directory.
        public static func decide(_ arguments: Arguments, defaultDataDirectory: URL) -> Database {
            if let url = arguments.databaseURL { return .external(url: url) }
            let base = arguments.dataDirectory.map { URL(fileURLWithPath: $0) } ?? defaultDataDirectory
            // As `EmbeddedPostgres` keeps it, so key files land where the cluster is.
            return .embedded(baseDirectory: base.standardizedFileURL)
        }

        /// The embedded cluster's directory, `nil` for an external database.
        public var embeddedDirectory: URL? {
            if case .embedded(let directory) = self { return directory }
            return nil
        }
    }

    /// Where the admin API key comes from.
    public enum AdminKeySource: Sendable, Equatable {
        /// `OFFERGATE_ADMIN_KEY`.
        case environment
        /// A file that must exist and hold a key (`--admin-key-file`).
        case file(path: String)
        /// A file read when present, else created once with a fresh key (mode 0600): embedded mode's `admin.key`.
        case createdOnce(path: String)
        /// No admin key: admin methods are unavailable.
        case none
    }

    /// Where the master key (which seals tenants' signing keys) comes from.
    public struct MasterKeySource: Sendable, Equatable {
        /// The key file for `MasterKeyring.load` (read, or created with 0600 when missing), `nil` when
        /// `OFFERGATE_MASTER_KEY` is the only source. `OFFERGATE_MASTER_KEY` wins over the file when both are given.
        public var file: String?
        /// The directory to create (with intermediates) before the file is read or created.
        public var directory: URL?
    }

    /// A line to log at start.
    public enum Notice: Sendable, Equatable {
        case info(String)
        case warning(String)
    }

    /// The database to use.
    public var database: Database
    /// Where the master key comes from.
    public var masterKey: MasterKeySource
    /// Where the admin key comes from.
    public var adminKey: AdminKeySource
    /// Logged before the master key is loaded.
    public var masterKeyNotice: Notice?
    /// Logged once the admin key is settled.
    public var adminKeyNotice: Notice?

    /// The plan for `offergate serve` with these arguments and this environment. `defaultDataDirectory` is
    /// `EmbeddedPostgres.defaultBaseDirectory()` (which depends on the user running the process).
    public init(arguments: Arguments, environment: [String: String], defaultDataDirectory: URL) {
        database = Database.decide(arguments, defaultDataDirectory: defaultDataDirectory)
        let base = database.embeddedDirectory

        var keyFile = arguments.masterKeyFile
        masterKeyNotice = nil
        if keyFile == nil && (environment[MasterKey.environmentVariable] ?? "").isEmpty {
            // No key given: keep one beside the (embedded or default) data directory. With an external database this
            // only suits a single host, so say so: every gateway sharing a database must share the master key.
            let file = (base ?? defaultDataDirectory).appendingPathComponent("master.key").path
            keyFile = file
            if base == nil {
                masterKeyNotice = .warning(
                    "no OFFERGATE_MASTER_KEY: sealing signing keys with the key file \(file); "
                        + "set OFFERGATE_MASTER_KEY in production (all gateways sharing a database need the same key)")
            }
        }
        masterKey = MasterKeySource(
            file: keyFile, directory: keyFile.map { URL(fileURLWithPath: $0).deletingLastPathComponent() })

        if let adminKey = environment[Self.adminKeyEnvironmentVariable], !adminKey.isEmpty {
            self.adminKey = .environment
            adminKeyNotice = nil
        } else if let file = arguments.adminKeyFile {
            self.adminKey = .file(path: file)
            adminKeyNotice = nil
        } else if let base {
            let file = base.appendingPathComponent("admin.key").path
            self.adminKey = .createdOnce(path: file)
            adminKeyNotice = .info("admin key (embedded mode) is in \(file)")
        } else {
            self.adminKey = .none
            adminKeyNotice = .warning("no OFFERGATE_ADMIN_KEY: admin methods are unavailable")
        }
    }

    /// The environment variable holding the admin API key.
    public static let adminKeyEnvironmentVariable = "OFFERGATE_ADMIN_KEY"
}

/// The keys a plan yields once performed.
public struct StartupKeys: Sendable {
    /// The master keyring (current key, and earlier ones to re-seal from).
    public let keyring: MasterKeyring
    /// The admin API key, `nil` when admin methods are off.
    public let adminKey: String?

    /// Whether earlier master keys were given, so the signing keys should be re-sealed under the current one.
    public var resealsSigningKeys: Bool { !keyring.previous.isEmpty }
}

/// A start-up decision that could not be carried out (a key file that is empty, unreadable or not creatable). Its
/// description is the message `offergate` prints.
public struct StartupError: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String
    public init(_ message: String) { description = message }
}

extension StartupPlan {
    /// Performs the key decisions: logs `masterKeyNotice`, creates the master key's directory, loads the keyring
    /// (`MasterKeyring.load`, which reads or creates the file), reads or creates the admin key, logs
    /// `adminKeyNotice`. Blocking file IO: call at start-up.
    public func loadKeys(environment: [String: String], logger: Logger) throws -> StartupKeys {
        if let masterKeyNotice { logger.note(masterKeyNotice) }
        if let directory = masterKey.directory {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        guard let keyring = try MasterKeyring.load(environment: environment, keyFile: masterKey.file) else {
            throw StartupError(
                "no master key: set OFFERGATE_MASTER_KEY (32 random bytes, base64) or pass --master-key-file")
        }
        let admin: String?
        switch adminKey {
        case .environment: admin = environment[Self.adminKeyEnvironmentVariable]
        case .file(let path): admin = try SecretFile.read(path, create: false)
        case .createdOnce(let path): admin = try SecretFile.read(path, create: true)
        case .none: admin = nil
        }
        if let adminKeyNotice { logger.note(adminKeyNotice) }
        return StartupKeys(keyring: keyring, adminKey: admin)
    }
}

extension Logger {
    fileprivate func note(_ notice: StartupPlan.Notice) {
        switch notice {
        case .info(let message): info(message)
        case .warning(let message): warning(message)
        }
    }
}

/// A one-line secret in a file: the admin key.
enum SecretFile {
    /// The trimmed contents of `path`; when it does not exist and `create` is set, a fresh `og_admin_…` key written
    /// there first (`O_EXCL`, mode 0600).
    static func read(_ path: String, create: Bool) throws -> String {
        if let data = FileManager.default.contents(atPath: path) {
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !text.isEmpty else { throw StartupError("\(path) is empty") }
            return text
        }
        guard create else { throw StartupError("cannot read \(path)") }
        let key = "og_admin_" + Base64URL.encode(try SecureRandom.bytes(count: 32))
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw StartupError("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let line = Array((key + "\n").utf8)
        guard line.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == line.count else {
            throw StartupError("cannot write \(path)")
        }
        return key
    }
}
