// offer-load: the load harness. It parses its command line and wires OfferLoadKit together: setup through the admin
// API, the load engine over JSON-RPC, the invariant check through the admin API and the database, and the reports.
import CLIKit
import Foundation
import OfferLoadKit

#if canImport(Glibc)
    import Glibc
#endif

let offerLoadCommand = CommandSpec(
    "offer-load",
    abstract: "Load an OfferGate deployment with one scenario and check its invariants.",
    discussion: """
        Scenarios: ping, best, sign, redeem-hot, redeem-onetime, claim, mixed (with --mix), retention.
        Without --rate the load is a closed loop: --connections × --depth requests in flight.
        With --rate it is an open loop: request i is intended at start + i/rate and its latency is measured from
        that moment, so a stalled gateway shows in the figures (no coordinated omission).
        The scenario's data (tenant, catalog, signing key, campaign, customers with histories) is created through
        the admin API (OFFERGATE_ADMIN_KEY) under a fresh tenant per run, unless --reuse FILE points at a fixture
        saved earlier with --save-fixture. After a redemption scenario the invariants are checked through the
        admin API and, with --database-url, read-only SQL: successes acknowledged == redemptions recorded, never
        above a limit, no one-time code redeemed twice, no idempotency key with two redemptions (and, with
        --replay-check, every acknowledged redemption replays). After sign with --database-url, every answered
        signature must be in the issued-signature ledger.
        retention reproduces Apple's Retention Messaging performance test: requests signed under --apple-ca (a test
        CA the gateway trusts through --apple-root-cert), each for its own subscriber, POSTed to
        --http URL/v1/apple/{tenant}/retention; --connections is the concurrency, --requests the total; it reports
        Apple's figures (success rate, p50/p90/p95/p99 against --threshold-ms) and fails (exit 3) below
        --success-rate.
        Exit status: 0 done, 1 runtime failure (connect, setup, database), 2 invariant breach, 3 retention
        performance test failed, 64 usage error.
        stdout carries the summary (or the JSON report with --json) and nothing else; progress goes to stderr.
        """,
    options: [
        .option(
            "connect", "ADDR",
            "Gateway address, unix:/path or tcp:host:port; connections are spread round-robin over all of them",
            repeatable: true),
        .option(
            "http", "URL",
            "Send the scenario's requests over HTTP, POST URL/v1/rpc (http://HOST:PORT, or unix:/path), with keep-alive "
                + "and a Bearer key; repeatable (round-robin); --connect still serves setup and checks",
            repeatable: true),
        .option("connections", "N", "Connections to open (default: 16)"),
        .option("depth", "N", "Requests in flight per connection, closed loop (default: 1)"),
        .option("rate", "R", "Target requests per second in total: open loop"),
        .option("max-in-flight", "N", "Open loop: most requests outstanding per connection (default: 10000)"),
        .option("duration", "S", "Seconds to measure after the warm-up (default: 10 unless --requests)"),
        .option("requests", "N", "Requests to measure instead of a duration"),
        .option("warmup", "S", "Seconds at the start excluded from the figures (default: 0)"),
        .option("mix", "WEIGHTS", "Weights of the mixed scenario, e.g. best=70,sign=20,redeem-hot=10"),
        .option("timeout", "S", "Seconds one call may take before it counts as a transport error", default: "60"),
        .option(
            "retry-unavailable", "S",
            "Closed loop: send a request answered -32050 again, unchanged (same idempotency key), for up to S seconds "
                + "after its first send (riding out a database failover)"),
        .option(
            "gateway-pid", "PID",
            "A gateway process whose CPU per request the report shows (default: traced from the local addresses: "
                + "the Unix socket's peer, the process listening on a loopback TCP port); repeatable",
            repeatable: true),
        .option("admin-key", "KEY", "Admin API key for the setup and the checks", environment: "OFFERGATE_ADMIN_KEY"),
        .option("tenant", "SLUG", "Slug of the tenant to create (default: load-<run tag>)"),
        .option("products", "N", "Products in the synthetic catalog", default: "20"),
        .option("offers", "N", "Offers per product (intro, code, win-back, promotional)", default: "10"),
        .option("customers", "N", "Customers seeded with subscription histories", default: "1000"),
        .option("codes", "N", "One-time codes generated for redeem-onetime (imported for claim)", default: "10000"),
        .option("sign-format", "FORMAT", "Signature formats of sign: v1, jws or both (alternating)", default: "both"),
        .option("code-limit", "N", "Total limit of the redeem-hot campaign (default: unlimited)"),
        .option("preload-tenants", "N", "Also create N extra tenants with the same catalog (memory benchmarks)"),
        .option("save-fixture", "FILE", "Write the tenant, its API key (mode 0600) and the fixture to FILE"),
        .option("reuse", "FILE", "Reuse the tenant and data of a fixture saved with --save-fixture; no setup"),
        .option(
            "database-url", "URL", "libpq conninfo or URI for the invariant check's read-only SQL",
            environment: "DATABASE_URL"),
        .option("report", "FILE", "Also write a self-contained HTML report (charts as inline SVG)"),
        .option("apple-ca", "FILE", "retention: the test CA's leaf key and x5c, as JSON {leafKeyPKCS8, x5c}"),
        .option("threshold-ms", "MS", "retention: Apple's response time threshold", default: "700"),
        .option("success-rate", "PERCENT", "retention: Apple's success rate threshold", default: "100"),
        .option("subscribers", "N", "retention: distinct subscribers asked about (default: all seeded)"),
        .flag("json", "Print the report as JSON on stdout instead of the summary"),
        .flag(
            "replay-check",
            "After a redemption run, send every acknowledged redemption again with its idempotency key: each must "
                + "answer the same redemption, replayed"),
        .flag("setup-only", "Set the data up (and save it with --save-fixture), then exit without load"),
        .flag("quiet", "No progress messages on stderr"),
    ],
    arguments: [
        ArgumentSpec("scenario", "ping | best | sign | redeem-hot | redeem-onetime | claim | mixed | retention")
    ]
)

/// Everything the command line says, checked.
struct Invocation {
    let scenario: Scenario
    let plan: LoadPlan
    let parsed: ParsedCommand
    let setupOptions: SetupOptions
    let callTimeout: Double
    /// The formats `sign` alternates between.
    let signFormats: [String]
    /// `--gateway-pid`, if given: the processes whose CPU the report shows.
    let gatewayPIDs: [Int32]

    /// The gateway processes to sample while loading `targets`: `--gateway-pid`, else those traced from them.
    func gatewayPIDs(serving targets: [String]) -> [Int32] {
        gatewayPIDs.isEmpty ? ProcessCPU.serverPIDs(of: targets) : gatewayPIDs
    }
}

func parseInvocation(_ parsed: ParsedCommand) throws -> Invocation {
    let kind = try ScenarioKind.named(parsed.arguments[0])
    let mix = try parsed.value("mix").map { text throws(OfferLoadError) in try MixSpec.parse(text) }
    let scenario = try Scenario(kind: kind, mix: mix)
    var rate: Double?
    if let text = parsed.value("rate") {
        guard let value = Double(text), value.isFinite, value > 0 else {
            throw UsageError("--rate takes a number of requests per second above 0", command: [])
        }
        rate = value
    }
    let plan = try LoadPlan.fromOptions(
        targets: parsed.values("connect"), connections: try parsed.integer("connections", in: 1...100_000),
        depth: try parsed.integer("depth", in: 1...100_000), rate: rate, duration: try parsed.seconds("duration"),
        requests: try parsed.integer("requests", in: 1...Int.max), warmup: try parsed.seconds("warmup"),
        maxInFlight: try parsed.integer("max-in-flight", in: 1...1_000_000),
        retryUnavailable: try parsed.seconds("retry-unavailable"))
    if let slug = parsed.value("tenant"),
        !(2...40).contains(slug.utf8.count)
            || !slug.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D })
    {
        throw UsageError("--tenant must match [a-z0-9-]{2,40}", command: [])
    }
    let options = SetupOptions(
        runTag: SetupOptions.freshRunTag(), tenant: parsed.value("tenant"),
        products: try parsed.integer("products", in: 1...10_000) ?? 20,
        offersPerProduct: try parsed.integer("offers", in: 2...100) ?? 10,
        customers: try parsed.integer("customers", in: 1...10_000_000) ?? 1_000,
        oneTimeCodes: try parsed.integer("codes", in: 1...10_000_000) ?? 10_000,
        hotLimit: try parsed.integer("code-limit", in: 1...Int.max))
    guard let timeout = try parsed.seconds("timeout"), timeout > 0 else {
        throw UsageError("--timeout takes a number of seconds above 0", command: [])
    }
    if parsed.value("reuse") != nil && (parsed.value("tenant") != nil || parsed.value("preload-tenants") != nil) {
        throw UsageError("--reuse sets nothing up: drop --tenant / --preload-tenants", command: [])
    }
    // Checked here, before any setup: a typo must not cost a tenant's worth of admin calls.
    let signFormats: [String]
    switch parsed.value("sign-format") ?? "both" {
    case "both": signFormats = ["v1", "jws"]
    case "v1": signFormats = ["v1"]
    case "jws": signFormats = ["jws"]
    default: throw UsageError("--sign-format takes v1, jws or both", command: [])
    }
    if kind == .retention {
        guard !parsed.values("http").isEmpty, parsed.value("apple-ca") != nil else {
            throw UsageError("retention needs --http and --apple-ca", command: [])
        }
        _ = try parsed.integer("threshold-ms", in: 1...60_000)
        _ = try parsed.integer("success-rate", in: 0...100)
        _ = try parsed.integer("subscribers", in: 1...10_000_000)
    }
    var gatewayPIDs: [Int32] = []
    for text in parsed.values("gateway-pid") {
        guard let pid = Int32(text), pid > 0 else {
            throw UsageError("--gateway-pid takes a process id above 0", command: [])
        }
        gatewayPIDs.append(pid)
    }
    return Invocation(
        scenario: scenario, plan: plan, parsed: parsed, setupOptions: options, callTimeout: timeout,
        signFormats: signFormats, gatewayPIDs: gatewayPIDs)
}

/// The retention scenario: bodies signed before the run, one HTTP connection (libcurl, keep-alive) per load
/// connection, and Apple's performance-test report beside the usual one.
func runRetention(_ inv: Invocation, setup: SetupResult, say: @escaping @Sendable (String) -> Void) async throws
    -> Int32
{
    let parsed = inv.parsed
    let threshold = try parsed.integer("threshold-ms", in: 1...60_000) ?? 700
    let successRate = try parsed.integer("success-rate", in: 0...100) ?? 100
    let subscribers = setup.fixture.retentionSubscribers
    let distinct = min(try parsed.integer("subscribers", in: 1...10_000_000) ?? subscribers.count, subscribers.count)
    let signer = try RetentionRequestSigner.load(
        path: parsed.value("apple-ca") ?? "", appAppleId: ScenarioSetup.retentionAppAppleId)
    // One body per subscriber, signed now (no signing under load); request i asks about subscriber i % distinct.
    say("signing \(distinct) retention requests, one per subscriber")
    let bodies = try signer.bodies(Array(subscribers.prefix(distinct)), count: distinct)
    let tally = RetentionTally()
    let connector = RetentionLoadConnector.overHTTP(
        tenant: setup.tenant, bodies: bodies, tally: tally, threshold: .milliseconds(threshold),
        timeout: .milliseconds(Int64(inv.callTimeout * 1000)))
    // The requests go to the HTTP listener(s); the setup stayed on --connect.
    var plan = inv.plan
    plan.targets = parsed.values("http")
    let request = try inv.scenario.requests(setup.fixture)
    say("running retention: \(ModelSummary(plan).text) against \(plan.targets.joined(separator: ", "))")
    let result = try await LoadRunner(connector: connector, gatewayPIDs: inv.gatewayPIDs(serving: plan.targets))
        .run(plan, request: request)
    let report = RunReport(scenario: inv.scenario.name, plan: plan, result: result, invariants: nil)
    let concurrency: Int
    switch inv.plan.model {
    case .closed(let connections, let depth): concurrency = connections * depth
    case .open(let connections, _, let maxInFlight): concurrency = connections * maxInFlight
    }
    let apple = RetentionReport(
        result: result, tally: tally.counts, concurrency: concurrency,
        distinctSubscribers: min(distinct, Int(result.measuredRequests + result.warmupRequests)),
        thresholdMs: threshold, successRateThreshold: successRate)
    if parsed.flag("json") {
        Console.out("{\"report\":\(report.json()),\"applePerformanceTest\":\(apple.json())}\n")
    } else {
        Console.out(SummaryRenderer.render(report) + "\n" + apple.text)
    }
    if let file = parsed.value("report") {
        do {
            try HTMLReport.render(report).write(toFile: file, atomically: true, encoding: .utf8)
            say("report written to \(file)")
        } catch {
            throw Failure("cannot write \(file): \(error)")
        }
    }
    return apple.result == "PASS" ? ExitStatus.success.rawValue : 3
}

func progress(_ quiet: Bool) -> @Sendable (String) -> Void {
    if quiet { return { _ in } }
    return { message in Console.error("offer-load: \(message)") }
}

/// The tenant, key and fixture of the run: read from --reuse, or set up through the admin API.
func prepare(_ inv: Invocation, say: @escaping @Sendable (String) -> Void) async throws -> SetupResult? {
    let parsed = inv.parsed
    if let file = parsed.value("reuse") {
        var result = try SetupResult.read(from: file)
        // Fresh synthetic customers and idempotency keys for this run; the data itself is reused.
        result.fixture.runTag = inv.setupOptions.runTag
        say("reusing tenant \(result.tenant) from \(file)")
        return result
    }
    let preload = try parsed.integer("preload-tenants", in: 0...1_000_000) ?? 0
    let needs = inv.scenario.needs
    if needs.isEmpty && preload == 0 && parsed.value("save-fixture") == nil && !parsed.flag("setup-only") {
        return nil  // ping: nothing to set up, connections stay unauthenticated
    }
    guard let adminKey = parsed.value("admin-key") else {
        throw UsageError(
            "the setup needs the admin key: set OFFERGATE_ADMIN_KEY (or --admin-key), or use --reuse FILE", command: [])
    }
    let admin = try await AdminClient.connect(address: inv.plan.targets[0], adminKey: adminKey)
    defer { admin.close() }
    let started = Date()
    if preload > 0 {
        let o = inv.setupOptions
        say("preloading \(preload) tenants × \(o.products) products × \(o.offersPerProduct) offers")
        _ = try await ScenarioSetup.preloadTenants(
            count: preload, prefix: "load-\(inv.setupOptions.runTag)", products: inv.setupOptions.products,
            offers: inv.setupOptions.offersPerProduct, admin: admin, progress: say)
    }
    let result = try await ScenarioSetup.run(
        needs.union(.tenant), options: inv.setupOptions, admin: admin, progress: say)
    let took = String(format: "%.1f", Date().timeIntervalSince(started))
    say("setup done in \(took) s (run tag \(result.fixture.runTag))")
    if let file = parsed.value("save-fixture") {
        try result.write(to: file)
        say("fixture saved to \(file)")
    }
    return result
}

/// The campaigns a redemption run touches.
func campaigns(of fixture: ScenarioFixture, _ scenario: Scenario) -> [String] {
    var out: [String] = []
    if scenario.kinds.contains(.redeemHot), let c = fixture.hotCampaignId { out.append(c) }
    if scenario.kinds.contains(.redeemOneTime), let c = fixture.oneTimeCampaignId { out.append(c) }
    return out
}

/// `campaigns.stats` of each campaign: live redemptions (`redeemed - rolledBack`) and the limit.
func apiStats(_ campaigns: [String], tenant: String, admin: AdminClient) async throws -> [CampaignFacts] {
    var out: [CampaignFacts] = []
    for campaign in campaigns {
        let stats = try await admin.call(
            "campaigns.stats", ["tenant": .string(tenant), "campaignId": .string(campaign)])
        let redeemed = Int(stats["redeemed"]?.int64Value ?? 0) - Int(stats["rolledBack"]?.int64Value ?? 0)
        let limit = stats["totalLimit"]?.int64Value.map { Int($0) }
        out.append(CampaignFacts(campaignId: campaign, totalLimit: limit, recordedAfter: redeemed))
    }
    return out
}

func run(_ inv: Invocation) async throws -> Int32 {
    let parsed = inv.parsed
    let say = progress(parsed.flag("quiet"))
    let setup = try await prepare(inv, say: say)
    if parsed.flag("setup-only") {
        if let setup {
            let f = setup.fixture
            Console.out(
                "tenant \(setup.tenant): \(f.products.count) products, \(f.promotionalOffers.count) promotional "
                    + "offers, \(f.customers.count) customers with histories, hot code campaign "
                    + "\(f.hotCampaignId ?? "-"), \(f.oneTimeCodes.count) one-time codes\n")
        }
        return ExitStatus.success.rawValue
    }
    if inv.scenario.kind == .retention, let setup { return try await runRetention(inv, setup: setup, say: say) }
    var fixture = setup?.fixture ?? ScenarioFixture(runTag: inv.setupOptions.runTag)
    fixture.signFormats = inv.signFormats
    let request = try inv.scenario.requests(fixture)
    let redeemCampaigns = inv.scenario.redeems ? campaigns(of: fixture, inv.scenario) : []
    let adminKey = parsed.value("admin-key")
    let ledgerReader = try parsed.value("database-url").map { url throws(OfferLoadError) in
        try LedgerReader(conninfo: url)
    }
    var before: [CampaignSnapshot]?
    var beforeAPI: [CampaignFacts] = []
    if let setup, !redeemCampaigns.isEmpty {
        if let ledgerReader {
            before = try await ledgerReader.snapshot(tenant: setup.tenant, campaigns: redeemCampaigns, withIds: false)
        } else if let adminKey {
            let admin = try await AdminClient.connect(address: inv.plan.targets[0], adminKey: adminKey)
            defer { admin.close() }
            beforeAPI = try await apiStats(redeemCampaigns, tenant: setup.tenant, admin: admin)
        }
    }
    let targets = (parsed.values("http").isEmpty ? inv.plan.targets : parsed.values("http")).joined(separator: ", ")
    say("running \(inv.scenario.name): \(ModelSummary(inv.plan).text) against \(targets)")
    let callTimeout = Duration.milliseconds(Int64(inv.callTimeout * 1000))
    let overHTTP = parsed.values("http")
    var plan = inv.plan
    let connector: any LoadConnector
    if overHTTP.isEmpty {
        connector = RPCLoadConnector(apiKey: setup?.apiKey, callTimeout: callTimeout)
    } else {
        // The load goes to the HTTP listener; setup and the invariant checks stay on --connect.
        plan.targets = overHTTP
        connector = HTTPLoadConnector(apiKey: setup?.apiKey, callTimeout: callTimeout)
    }
    let result = try await LoadRunner(connector: connector, gatewayPIDs: inv.gatewayPIDs(serving: plan.targets))
        .run(plan, request: request)

    var invariants: InvariantReport?
    if let setup, inv.scenario.redeems {
        let ledger: RedemptionLedger
        if let ledgerReader {
            ledger = try await ledgerReader.ledger(
                tenant: setup.tenant, runTag: fixture.runTag, campaigns: redeemCampaigns,
                acknowledged: result.redemptions, before: before)
            if let adminKey {
                // The admin API's view beside the database's: a disagreement is shown, the rows decide.
                let admin = try await AdminClient.connect(address: inv.plan.targets[0], adminKey: adminKey)
                defer { admin.close() }
                for facts in try await apiStats(redeemCampaigns, tenant: setup.tenant, admin: admin) {
                    let rows = ledger.campaigns.first { $0.campaignId == facts.campaignId }?.recordedAfter
                    if rows != facts.recordedAfter {
                        say(
                            "WARNING campaign \(facts.campaignId): campaigns.stats says \(facts.recordedAfter) live "
                                + "redemptions, the redemptions table \(rows.map(String.init) ?? "none")")
                    }
                }
            }
        } else if let adminKey {
            say(
                "no --database-url / DATABASE_URL: checking through the admin API only (no per-code, per-key or "
                    + "per-id checks)")
            let admin = try await AdminClient.connect(address: inv.plan.targets[0], adminKey: adminKey)
            defer { admin.close() }
            let after = try await apiStats(redeemCampaigns, tenant: setup.tenant, admin: admin)
            let facts = after.map { a in
                CampaignFacts(
                    campaignId: a.campaignId, totalLimit: a.totalLimit,
                    recordedBefore: beforeAPI.first { $0.campaignId == a.campaignId }?.recordedAfter ?? 0,
                    recordedAfter: a.recordedAfter)
            }
            ledger = RedemptionLedger(acknowledged: result.redemptions, campaigns: facts)
        } else {
            throw Failure("the invariant check needs --database-url (or DATABASE_URL) or the admin key")
        }
        invariants = ledger.check()
        if parsed.flag("replay-check") {
            say("replaying \(result.redemptions.count) acknowledged redemptions with their idempotency keys")
            let breaches = try await ReplayCheck.run(
                acknowledged: result.redemptions, request: request, connector: connector,
                address: inv.plan.targets[0])
            invariants = invariants?.adding(checked: [ReplayCheck.invariant], breaches: breaches)
        }
    }
    if let setup, inv.scenario.kinds.contains(.sign), let ledgerReader {
        let missing = try await ledgerReader.signaturesMissing(tenant: setup.tenant, nonces: result.signatureNonces)
        let base = invariants ?? InvariantReport(checked: [], breaches: [])
        invariants = base.adding(
            checked: ["every answered signature (\(result.signatureNonces.count)) in the issued-signature ledger"],
            breaches: missing == 0 ? [] : [.signatureNotRecorded(count: missing)])
    }
    let report = RunReport(scenario: inv.scenario.name, plan: plan, result: result, invariants: invariants)
    Console.out(parsed.flag("json") ? report.json() + "\n" : SummaryRenderer.render(report))
    if let file = parsed.value("report") {
        do {
            try HTMLReport.render(report).write(toFile: file, atomically: true, encoding: .utf8)
            say("report written to \(file)")
        } catch {
            throw Failure("cannot write \(file): \(error)")
        }
    }
    if report.exitStatus != 0 {
        Console.error("offer-load: INVARIANT BREACH — see the summary; exit status \(report.exitStatus)")
    }
    return report.exitStatus
}

signal(SIGPIPE, SIG_IGN)
let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
do {
    switch try offerLoadCommand.parse(arguments) {
    case .help(let text):
        Console.out(text)
        exit(ExitStatus.success.rawValue)
    case .run(let parsed):
        let invocation: Invocation
        do {
            invocation = try parseInvocation(parsed)
        } catch let error as UsageError {
            throw error
        } catch let error as OfferLoadError {
            throw UsageError(error.description, command: [])
        }
        status = await {
            do {
                return try await run(invocation)
            } catch let error as UsageError {
                Console.error("offer-load: \(error.message)")
                return ExitStatus.usage.rawValue
            } catch let error as OfferLoadError where error.code == .invalidPlan || error.code == .invalidMix {
                Console.error("offer-load: \(error)")
                return ExitStatus.usage.rawValue
            } catch {
                Console.error("offer-load: \(error)")
                return ExitStatus.failure.rawValue
            }
        }()
    }
} catch let error as UsageError {
    Console.error("offer-load: \(error.message)\nSee 'offer-load --help'.")
    exit(ExitStatus.usage.rawValue)
} catch {
    Console.error("offer-load: \(error)")
    exit(ExitStatus.failure.rawValue)
}
exit(status)
