import Foundation
import OfferCrypto
import OfferGateway
import Testing

/// `StartupPlan`: what `offergate serve` decides from its arguments and environment (pure), and what performing the
/// key decisions does on disk (in a scratch directory).
@Suite("Start-up plan: database and key placement")
struct StartupPlanTests {
    static let home = URL(fileURLWithPath: "/home/op/.local/share/offergate")
    static let masterKey = Data(repeating: 7, count: 32).base64EncodedString()
    static let externalWarning =
        "no OFFERGATE_MASTER_KEY: sealing signing keys with the key file /home/op/.local/share/offergate/master.key; "
        + "set OFFERGATE_MASTER_KEY in production (all gateways sharing a database need the same key)"
    static let noAdmin = StartupPlan.Notice.warning("no OFFERGATE_ADMIN_KEY: admin methods are unavailable")

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var arguments = StartupPlan.Arguments()
        var environment: [String: String] = [:]
        var database: StartupPlan.Database
        var masterKeyFile: String?
        var masterKeyNotice: StartupPlan.Notice? = nil
        var adminKey: StartupPlan.AdminKeySource
        var adminKeyNotice: StartupPlan.Notice? = nil
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "nothing given: embedded in the default directory, both keys created beside it",
            database: .embedded(baseDirectory: home), masterKeyFile: home.path + "/master.key",
            adminKey: .createdOnce(path: home.path + "/admin.key"),
            adminKeyNotice: .info("admin key (embedded mode) is in \(home.path)/admin.key")),
        Case(
            name: "--data-dir: embedded there, keys there",
            arguments: .init(dataDirectory: "/srv/og"),
            database: .embedded(baseDirectory: URL(fileURLWithPath: "/srv/og")),
            masterKeyFile: "/srv/og/master.key", adminKey: .createdOnce(path: "/srv/og/admin.key"),
            adminKeyNotice: .info("admin key (embedded mode) is in /srv/og/admin.key")),
        Case(
            name: "--data-dir is standardised as the cluster keeps it",
            arguments: .init(dataDirectory: "/srv/og/../og2"),
            database: .embedded(baseDirectory: URL(fileURLWithPath: "/srv/og2")), masterKeyFile: "/srv/og2/master.key",
            adminKey: .createdOnce(path: "/srv/og2/admin.key"),
            adminKeyNotice: .info("admin key (embedded mode) is in /srv/og2/admin.key")),
        Case(
            name: "external, no keys: master key file in the default directory with a warning; admin off",
            arguments: .init(databaseURL: "postgresql://db/og"), database: .external(url: "postgresql://db/og"),
            masterKeyFile: home.path + "/master.key", masterKeyNotice: .warning(externalWarning), adminKey: .none,
            adminKeyNotice: noAdmin),
        Case(
            name: "external, empty OFFERGATE_MASTER_KEY counts as not set",
            arguments: .init(databaseURL: "postgresql://db/og"), environment: ["OFFERGATE_MASTER_KEY": ""],
            database: .external(url: "postgresql://db/og"), masterKeyFile: home.path + "/master.key",
            masterKeyNotice: .warning(externalWarning), adminKey: .none, adminKeyNotice: noAdmin),
        Case(
            name: "external with OFFERGATE_MASTER_KEY: no file, no warning",
            arguments: .init(databaseURL: "host=/run/postgresql"), environment: ["OFFERGATE_MASTER_KEY": masterKey],
            database: .external(url: "host=/run/postgresql"), masterKeyFile: nil, adminKey: .none,
            adminKeyNotice: noAdmin),
        Case(
            name: "external with both keys in the environment",
            arguments: .init(databaseURL: "postgresql://db/og"),
            environment: ["OFFERGATE_MASTER_KEY": masterKey, "OFFERGATE_ADMIN_KEY": "adm"],
            database: .external(url: "postgresql://db/og"), masterKeyFile: nil, adminKey: .environment),
        Case(
            name: "external with --master-key-file: that file, no warning",
            arguments: .init(databaseURL: "postgresql://db/og", masterKeyFile: "/etc/og/master.key"),
            database: .external(url: "postgresql://db/og"), masterKeyFile: "/etc/og/master.key", adminKey: .none,
            adminKeyNotice: noAdmin),
        Case(
            name: "--master-key-file and OFFERGATE_MASTER_KEY: the file is still named (the variable wins at load)",
            arguments: .init(masterKeyFile: "/etc/og/master.key"), environment: ["OFFERGATE_MASTER_KEY": masterKey],
            database: .embedded(baseDirectory: home), masterKeyFile: "/etc/og/master.key",
            adminKey: .createdOnce(path: home.path + "/admin.key"),
            adminKeyNotice: .info("admin key (embedded mode) is in \(home.path)/admin.key")),
        Case(
            name: "embedded with OFFERGATE_MASTER_KEY: no master key file",
            environment: ["OFFERGATE_MASTER_KEY": masterKey], database: .embedded(baseDirectory: home),
            masterKeyFile: nil, adminKey: .createdOnce(path: home.path + "/admin.key"),
            adminKeyNotice: .info("admin key (embedded mode) is in \(home.path)/admin.key")),
        Case(
            name: "embedded with --admin-key-file: that file must exist, nothing is created",
            arguments: .init(adminKeyFile: "/etc/og/admin.key"), database: .embedded(baseDirectory: home),
            masterKeyFile: home.path + "/master.key", adminKey: .file(path: "/etc/og/admin.key")),
        Case(
            name: "external with --admin-key-file",
            arguments: .init(databaseURL: "postgresql://db/og", adminKeyFile: "/etc/og/admin.key"),
            environment: ["OFFERGATE_MASTER_KEY": masterKey], database: .external(url: "postgresql://db/og"),
            masterKeyFile: nil, adminKey: .file(path: "/etc/og/admin.key")),
        Case(
            name: "OFFERGATE_ADMIN_KEY wins over --admin-key-file",
            arguments: .init(adminKeyFile: "/etc/og/admin.key"), environment: ["OFFERGATE_ADMIN_KEY": "adm"],
            database: .embedded(baseDirectory: home), masterKeyFile: home.path + "/master.key",
            adminKey: .environment),
        Case(
            name: "an empty OFFERGATE_ADMIN_KEY counts as not set",
            environment: ["OFFERGATE_ADMIN_KEY": ""], database: .embedded(baseDirectory: home),
            masterKeyFile: home.path + "/master.key", adminKey: .createdOnce(path: home.path + "/admin.key"),
            adminKeyNotice: .info("admin key (embedded mode) is in \(home.path)/admin.key")),
    ]

    @Test("decisions", arguments: cases)
    func decisions(_ row: Case) {
        let plan = StartupPlan(arguments: row.arguments, environment: row.environment, defaultDataDirectory: Self.home)
        #expect(plan.database == row.database)
        #expect(plan.masterKey.file == row.masterKeyFile)
        #expect(
            plan.masterKey.directory?.path
                == row.masterKeyFile.map { URL(fileURLWithPath: $0).deletingLastPathComponent().path })
        #expect(plan.masterKeyNotice == row.masterKeyNotice)
        #expect(plan.adminKey == row.adminKey)
        #expect(plan.adminKeyNotice == row.adminKeyNotice)
        // `offergate migrate` decides the database the same way.
        #expect(StartupPlan.Database.decide(row.arguments, defaultDataDirectory: Self.home) == row.database)
    }

    static func scratch() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("og-startup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func mode(_ path: String) throws -> Int {
        try ((FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue) ?? -1
    }

    @Test("embedded mode creates both key files once (0600, in a directory made for them) and reuses them")
    func embeddedCreatesKeysOnce() throws {
        let scratch = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let base = scratch.appendingPathComponent("data/offergate")
        let plan = StartupPlan(
            arguments: .init(dataDirectory: base.path), environment: [:], defaultDataDirectory: Self.home)
        let sink = MemoryLogSink()
        let first = try plan.loadKeys(environment: [:], logger: Logger(sink: sink))
        let admin = try #require(first.adminKey)
        #expect(admin.hasPrefix("og_admin_"))
        #expect(!first.resealsSigningKeys)
        #expect(try Self.mode(base.appendingPathComponent("admin.key").path) == 0o600)
        #expect(try Self.mode(base.appendingPathComponent("master.key").path) == 0o600)
        #expect(sink.all.count == 1)
        #expect(sink.all.first?.contains("admin key (embedded mode) is in \(base.path)/admin.key") == true)

        let second = try plan.loadKeys(environment: [:], logger: Logger(sink: MemoryLogSink()))
        #expect(second.adminKey == admin)
        #expect(second.keyring.current.id == first.keyring.current.id)
    }

    @Test("external without a master key: the key file in the default directory, after the warning")
    func externalWarnsAndUsesDefaultDirectory() throws {
        let scratch = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let home = scratch.appendingPathComponent("home/offergate")
        let plan = StartupPlan(
            arguments: .init(databaseURL: "postgresql://db/og"), environment: [:], defaultDataDirectory: home)
        let sink = MemoryLogSink()
        let keys = try plan.loadKeys(environment: [:], logger: Logger(sink: sink))
        #expect(keys.adminKey == nil)
        #expect(FileManager.default.fileExists(atPath: home.appendingPathComponent("master.key").path))
        #expect(sink.all.count == 2)
        #expect(sink.all.first?.contains("no OFFERGATE_MASTER_KEY: sealing signing keys with the key file") == true)
        #expect(sink.all.last?.contains("no OFFERGATE_ADMIN_KEY: admin methods are unavailable") == true)
    }

    @Test("keys from the environment; earlier master keys ask for re-sealing")
    func environmentKeys() throws {
        let previous = Data(repeating: 9, count: 32).base64EncodedString()
        let environment = [
            "OFFERGATE_MASTER_KEY": Self.masterKey, "OFFERGATE_ADMIN_KEY": "adm-key",
            "OFFERGATE_PREVIOUS_MASTER_KEYS": previous,
        ]
        let plan = StartupPlan(
            arguments: .init(databaseURL: "postgresql://db/og"), environment: environment,
            defaultDataDirectory: Self.home)
        let sink = MemoryLogSink()
        let keys = try plan.loadKeys(environment: environment, logger: Logger(sink: sink))
        #expect(keys.adminKey == "adm-key")
        #expect(keys.resealsSigningKeys)
        #expect(keys.keyring.previous.count == 1)
        #expect(sink.all.isEmpty)
    }

    @Test("--admin-key-file: missing or empty is an error naming the file; a key is read trimmed")
    func adminKeyFile() throws {
        let scratch = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let file = scratch.appendingPathComponent("admin.key").path
        let environment = ["OFFERGATE_MASTER_KEY": Self.masterKey]
        let plan = StartupPlan(
            arguments: .init(databaseURL: "postgresql://db/og", adminKeyFile: file), environment: environment,
            defaultDataDirectory: Self.home)
        let logger = Logger(sink: MemoryLogSink())
        #expect(throws: StartupError("cannot read \(file)")) {
            try plan.loadKeys(environment: environment, logger: logger)
        }
        #expect(!FileManager.default.fileExists(atPath: file))
        try Data("  \n".utf8).write(to: URL(fileURLWithPath: file))
        #expect(throws: StartupError("\(file) is empty")) {
            try plan.loadKeys(environment: environment, logger: logger)
        }
        try Data(" secret-admin\n".utf8).write(to: URL(fileURLWithPath: file))
        #expect(try plan.loadKeys(environment: environment, logger: logger).adminKey == "secret-admin")
    }
}
