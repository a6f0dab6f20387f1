// offergate: the gateway executable. It parses its command line and wires the modules together; everything else
// lives in OfferGateway, OfferStore, Postgres, OfferCrypto and JSONRPC.
import CLIKit
import Dispatch
import Foundation
import HTTPServer
import JSONRPC
import OfferCrypto
import OfferGateway
import OfferStore
import Postgres

#if canImport(Glibc)
    import Glibc
#endif

let databaseOptions: [OptionSpec] = [
    .option(
        "database-url", "URL", "PostgreSQL connection string or URI; without it an embedded cluster is used.",
        environment: "DATABASE_URL"),
    .option(
        "data-dir", "DIR",
        "Embedded mode: where the cluster, its socket and the generated keys live (default: /var/lib/offergate for root, else ~/.local/share/offergate).",
        environment: "OFFERGATE_DATA_DIR"),
]

let serveSpec = CommandSpec(
    "serve", abstract: "Run the gateway.",
    discussion: """
        Serves newline-delimited JSON-RPC 2.0 on stdin/stdout (--stdio) and/or on sockets (--listen, repeatable),
        and HTTP/1.1 (--http, repeatable: /livez, /readyz, /metrics, /v1/rpc, /v1/apple/{tenant}/...; see docs/http.md).
        Logs go to stderr as JSON lines. SIGTERM/SIGINT stop accepting, finish requests in flight (bounded by
        --shutdown-grace) and exit 0. The schema is migrated at start unless --no-migrate is given.
        Secrets come from the environment or files, never from flags: OFFERGATE_ADMIN_KEY (the operators' API key)
        and OFFERGATE_MASTER_KEY (32 bytes, base64: seals tenants' signing keys). In embedded mode both are created
        once under the data directory (admin.key, master.key, mode 0600) when not given; with --database-url and no
        master key, master.key under the default data directory is used (with a warning).
        """,
    options: databaseOptions + [
        .flag("stdio", "Serve JSON-RPC on stdin/stdout."),
        .option(
            "listen", "ADDR", "Listen on unix:PATH or tcp:HOST:PORT (TCP defaults to 127.0.0.1).", repeatable: true),
        .option(
            "http", "ADDR", "Serve HTTP/1.1 on tcp:HOST:PORT (TCP defaults to 127.0.0.1) or unix:PATH.",
            repeatable: true),
        .option(
            "http-idle-timeout", "SECONDS", "Close HTTP connections without traffic this long (whole seconds).",
            default: "15"),
        .option(
            "http-request-timeout", "SECONDS",
            "An HTTP request's headers and body must arrive within this time, else the connection is closed.",
            default: "20"),
        .option("admin-key-file", "FILE", "Read the admin API key from FILE instead of OFFERGATE_ADMIN_KEY."),
        .option(
            "master-key-file", "FILE",
            "Read (or create, mode 0600) the master key in FILE instead of OFFERGATE_MASTER_KEY."),
        .option("max-connections", "N", "Connections accepted at once.", default: "10000"),
        .option("idle-timeout", "SECONDS", "Close connections idle this long (0: never).", default: "300"),
        .option("max-in-flight", "N", "Requests in flight per connection before reading pauses.", default: "128"),
        .option(
            "event-loops", "N",
            "Threads serving --listen connections' IO and at-once answers; each connection stays on one (default: one fewer than the cores, at least 1)."
        ),
        .option("frame-limit", "BYTES", "Longest request line accepted.", default: "1048576"),
        .option("rate-limit", "PER_SECOND", "Requests a second per tenant (0: unlimited).", default: "0"),
        .option("rate-burst", "N", "Requests a tenant may send at once after a pause (default: the rate)."),
        .option("pool-size", "N", "PostgreSQL connections in the pool.", default: "16"),
        .option(
            "statement-timeout", "MS",
            "Longest a database statement may run before the server stops it, in milliseconds (0: no limit).",
            default: "30000"),
        .option(
            "apple-root-cert", "FILE",
            "Also trust this root (PEM or DER) for Apple's signed data, besides the built-in Apple Root CA - G3.",
            repeatable: true),
        .option("shutdown-grace", "SECONDS", "How long in-flight requests may take at shutdown.", default: "10"),
        .option(
            "funnel-flush-ms", "MS",
            "How often offers.best's in-memory funnel counts (offered) are stored, in milliseconds: what a crash can lose (0: do not count).",
            default: "1000"),
        .option(
            "log-level", "LEVEL", "debug, info, warning or error.", environment: "OFFERGATE_LOG_LEVEL", default: "info"),
        .flag("quiet-requests", "Log each request at debug instead of info level."),
        .flag("no-migrate", "Do not apply pending schema migrations at start."),
    ])

let migrateSpec = CommandSpec(
    "migrate", abstract: "Apply pending schema migrations and exit.",
    discussion: "Idempotent, and safe when several processes migrate at once (an advisory lock serialises them).",
    options: databaseOptions)

let rootSpec = CommandSpec(
    "offergate", abstract: "OfferGate: a multi-tenant gateway for App Store subscription offers.",
    subcommands: [serveSpec, migrateSpec])

/// The database the gateway uses: a given URL, or the embedded cluster (started here, stopped at exit).
struct DatabaseChoice {
    let url: String
    let embedded: EmbeddedPostgres?
    let startedEmbedded: Bool

    static func resolve(_ database: StartupPlan.Database) throws -> DatabaseChoice {
        switch database {
        case .external(let url):
            return DatabaseChoice(url: url, embedded: nil, startedEmbedded: false)
        case .embedded(let base):
            do {
                let cluster = try EmbeddedPostgres(baseDirectory: base)
                let started = try cluster.start()
                return DatabaseChoice(url: cluster.connectionString, embedded: cluster, startedEmbedded: started)
            } catch {
                throw Failure("embedded PostgreSQL: \(error)")
            }
        }
    }

    func stop(_ logger: Logger) {
        guard let embedded, startedEmbedded else { return }
        do {
            try embedded.stop()
        } catch {
            logger.error("could not stop the embedded PostgreSQL: \(error)")
        }
    }
}

/// The start-up arguments `StartupPlan` decides from (each option already resolved against its environment variable).
func startupArguments(_ command: ParsedCommand) -> StartupPlan.Arguments {
    StartupPlan.Arguments(
        databaseURL: command.value("database-url"), dataDirectory: command.value("data-dir"),
        masterKeyFile: command.value("master-key-file"), adminKeyFile: command.value("admin-key-file"))
}

func makeLogger(_ command: ParsedCommand) throws -> Logger {
    guard let level = LogLevel(name: command.value("log-level") ?? "info") else {
        throw UsageError("--log-level takes debug, info, warning or error", command: command.path)
    }
    return Logger(level: level, metadata: ["service": "offergate", "pid": String(getpid())])
}

func runMigrate(_ command: ParsedCommand) async throws -> Int32 {
    let logger = Logger(level: .info, metadata: ["service": "offergate"])
    let plan = StartupPlan.Database.decide(
        startupArguments(command), defaultDataDirectory: EmbeddedPostgres.defaultBaseDirectory())
    let choice = try DatabaseChoice.resolve(plan)
    defer { choice.stop(logger) }
    let database = try OfferDatabase.connect(url: choice.url, maxConnections: 2)
    let applied = try await database.migrate()
    await database.close()
    logger.info(
        "migrations applied",
        ["applied": applied.map(String.init).joined(separator: ","), "count": String(applied.count)])
    Console.out(
        applied.isEmpty
            ? "schema is up to date\n" : "applied migrations: \(applied.map(String.init).joined(separator: ", "))\n")
    return ExitStatus.success.rawValue
}

/// The process's one verifier of Apple's signed data: the built-in root plus every `--apple-root-cert` file. A file
/// that cannot be read or holds no certificate is a usage error (exit 64), so a typo never starts a gateway that
/// silently rejects every notification.
func appleVerifier(rootFiles: [String], command: ParsedCommand) throws -> AppleSignedDataVerifier {
    var roots: [[UInt8]] = []
    for path in rootFiles {
        guard let contents = FileManager.default.contents(atPath: path) else {
            throw UsageError("--apple-root-cert: cannot read \(path)", command: command.path)
        }
        do {
            roots += try AppleRootCertificateFile.certificates(fromFileContents: [UInt8](contents))
        } catch {
            throw UsageError("--apple-root-cert: \(path) holds no usable certificate (\(error))", command: command.path)
        }
    }
    do {
        return try AppleSignedDataVerifier(additionalRoots: roots)
    } catch {
        throw UsageError("--apple-root-cert: \(error)", command: command.path)
    }
}

func runServe(_ command: ParsedCommand) async throws -> Int32 {
    let stdio = command.flag("stdio")
    let addresses = try command.values("listen").map { text in
        do {
            return try ListenAddress(parsing: text)
        } catch {
            throw UsageError("--listen: \(error)", command: command.path)
        }
    }
    let httpAddresses = try command.values("http").map { text in
        do {
            return try ListenAddress(parsing: text)
        } catch {
            throw UsageError("--http: \(error)", command: command.path)
        }
    }
    guard stdio || !addresses.isEmpty || !httpAddresses.isEmpty else {
        throw UsageError("say where to serve: --stdio, --listen ADDR and/or --http ADDR", command: command.path)
    }
    var rpc = RPCServerConfiguration()
    rpc.maxConnections = try command.integer("max-connections", in: 1...1_000_000) ?? rpc.maxConnections
    let idle = try command.seconds("idle-timeout") ?? 300
    rpc.idleTimeout = idle > 0 ? idle : nil
    rpc.maxInFlightPerConnection = try command.integer("max-in-flight", in: 1...65_536) ?? rpc.maxInFlightPerConnection
    rpc.maxFrameBytes = try command.integer("frame-limit", in: 1_024...(256 << 20)) ?? rpc.maxFrameBytes
    // One core is left to the rest of the gateway (the database connections' threads decode rows, decide first
    // answers and commit batches); on two cores, two loops measured mixed (docs/decisions/013-several-event-loops.md).
    rpc.eventLoops =
        try command.integer("event-loops", in: 1...256) ?? max(1, ProcessInfo.processInfo.activeProcessorCount - 1)
    var http = HTTPServerConfiguration()
    http.maxBodyBytes = rpc.maxFrameBytes
    http.maxConnections = rpc.maxConnections
    http.idleTimeoutSeconds = try command.integer("http-idle-timeout", in: 1...86_400) ?? http.idleTimeoutSeconds
    http.requestTimeout = .milliseconds(Int((try command.seconds("http-request-timeout") ?? 20) * 1000))
    guard http.requestTimeout > .zero else {
        throw UsageError("--http-request-timeout must be more than 0", command: command.path)
    }
    let poolSize = try command.integer("pool-size", in: 1...1_000) ?? 16
    let statementTimeout = Duration.milliseconds(try command.integer("statement-timeout", in: 0...86_400_000) ?? 30_000)
    let grace = try command.seconds("shutdown-grace") ?? 10
    var options = GatewayOptions()
    options.rateLimit = Double(try command.integer("rate-limit", in: 0...10_000_000) ?? 0)
    options.rateBurst = Double(try command.integer("rate-burst", in: 1...10_000_000) ?? Int(options.rateLimit))
    options.logRequests = !command.flag("quiet-requests")
    options.appleVerifier = try appleVerifier(rootFiles: command.values("apple-root-cert"), command: command)
    let funnelFlush = try command.integer("funnel-flush-ms", in: 0...3_600_000) ?? 1_000
    options.funnelFlushInterval = funnelFlush > 0 ? .milliseconds(funnelFlush) : nil
    let logger = try makeLogger(command)

    // Which database, and where the keys come from: decided by StartupPlan, performed here.
    let environment = ProcessInfo.processInfo.environment
    let plan = StartupPlan(
        arguments: startupArguments(command), environment: environment,
        defaultDataDirectory: EmbeddedPostgres.defaultBaseDirectory())
    let choice = try DatabaseChoice.resolve(plan.database)
    defer { choice.stop(logger) }
    let keys = try plan.loadKeys(environment: environment, logger: logger)
    let keyring = keys.keyring
    options.adminKey = keys.adminKey

    let database = try OfferDatabase.connect(
        url: choice.url, maxConnections: poolSize, statementTimeout: statementTimeout)
    if !command.flag("no-migrate") {
        let applied = try await database.migrate()
        if !applied.isEmpty {
            logger.info("migrations applied", ["applied": applied.map(String.init).joined(separator: ",")])
        }
    }
    let service = try GatewayService(
        database: database, sealer: KeySealer(keyring: keyring), options: options, rpc: rpc, logger: logger,
        http: http)
    let bound = try await service.start(listen: addresses, http: httpAddresses)
    // Signing keys still sealed under a previous master key are re-sealed by the service as part of its lifetime.
    logger.info(
        "offergate started",
        [
            "version": OfferGateVersion.current, "listen": bound.map { "\($0)" }.joined(separator: " "),
            "stdio": String(stdio), "database": choice.embedded == nil ? "external" : "embedded",
        ])

    // SIGTERM/SIGINT: stop accepting, finish in flight (bounded), exit 0.
    let signals = SignalWatcher([SIGTERM, SIGINT])
    let gracePeriod = Duration.milliseconds(Int(grace * 1000))
    let stopped = Task {
        let signal = await signals.next()
        guard !Task.isCancelled else { return }
        logger.info("signal received; shutting down", ["signal": String(signal)])
        await service.shutdown(gracePeriod: gracePeriod)
    }
    if stdio {
        await service.serveStdio()
        if addresses.isEmpty && httpAddresses.isEmpty {
            // EOF on stdin: in-flight requests are finished; stop the rest.
            stopped.cancel()
            await service.shutdown(gracePeriod: gracePeriod)
            return ExitStatus.success.rawValue
        }
    }
    await service.run()
    _ = await stopped.result
    return ExitStatus.success.rawValue
}

/// Delivers the first of several signals to async code (the default handlers are turned off).
///
/// `@unchecked Sendable`: the dispatch sources (OS signal handles) are created and resumed in `init` and never
/// touched again; they are stored only to keep them alive. The stream is Sendable.
final class SignalWatcher: @unchecked Sendable {
    private let stream: AsyncStream<Int32>
    private let sources: [DispatchSourceSignal]

    init(_ numbers: [Int32]) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        let queue = DispatchQueue(label: "offergate.signals")
        var sources: [DispatchSourceSignal] = []
        for number in numbers {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            sources.append(source)
        }
        self.stream = stream
        self.sources = sources
    }

    func next() async -> Int32 {
        for await number in stream { return number }
        return 0
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
do {
    switch try rootSpec.parse(arguments) {
    case .help(let text):
        Console.out(text)
        status = ExitStatus.success.rawValue
    case .run(let command):
        switch command.path {
        case ["serve"]: status = try await runServe(command)
        case ["migrate"]: status = try await runMigrate(command)
        default: status = ExitStatus.usage.rawValue
        }
    }
} catch let error as UsageError {
    Console.error("offergate: \(error.message)")
    Console.error("See 'offergate \(error.command.joined(separator: " ")) --help'.")
    status = ExitStatus.usage.rawValue
} catch {
    Console.error("offergate: \(error)")
    status = ExitStatus.failure.rawValue
}
exit(status)
