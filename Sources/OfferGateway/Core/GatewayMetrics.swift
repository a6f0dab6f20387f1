import Foundation
import Metrics
import OfferStore

/// Every Prometheus metric of one gateway process, defined in this one place (names `offergate_…`, durations in
/// seconds, counters `_total`). A capability that wants a metric adds its family here and records into it from its
/// service; `/metrics` renders `registry`. Label values come from fixed sets only (method names of the method
/// table, outcomes, reasons, formats, route names, HTTP status codes), never from input: no customer ids, codes or
/// tenant-chosen strings. The registry also folds any label set beyond a family's cap into `_other`.
public final class GatewayMetrics: Sendable {
    public let registry = MetricsRegistry()

    // MARK: JSON-RPC (every transport, HTTP included)
    let rpcRequests: Counter
    /// Of those, the ones answered at once from memory (`Gateway.answerNow`).
    let rpcAnsweredAtOnce: Counter
    let rpcErrors: Counter
    let rpcDuration: Histogram

    // MARK: HTTP listener
    let httpRequests: Counter
    let httpDuration: Histogram

    // MARK: Capabilities
    /// `codes.redeem` by outcome: `redeemed`, `replayed`, or the refusal/error reason.
    let redemptions: Counter
    /// Signatures issued (and recorded in the ledger) by format: `v1`, `jws`, `introEligibility`.
    let signatures: Counter
    /// Apple's signed data by type (`notification`, `transaction`, `renewal_info`) and result (`applied`,
    /// `duplicate`, `unlinked`, `rejected_<reason>`, `failed`).
    let appleIngested: Counter
    /// Retention Messaging answers to Apple by kind (`promotionalOffer`, `alternateProduct`, `message`) and why
    /// it was not a promotional offer (`none` when it was; else `no_customer`, `no_offer`, `budget_exceeded`, ...:
    /// reasons of the code, never input).
    let retentionAnswers: Counter
    /// Time from the request's arrival to the answer, by kind.
    let retentionDuration: Histogram
    /// Answers that took longer than the tenant's budget.
    let retentionOutsideBudget: Counter

    // MARK: The signature ledger (every `offers.sign` is answered only after its batch committed)
    /// One batch's commit (its signatures and retention answers in one INSERT), from its start to the database's
    /// answer, by outcome (`committed`, `failed`): a signature's wait for durability, and the database's share of
    /// its latency.
    let ledgerCommitDuration: Histogram
    /// Rows committed to the ledger (divided by the histogram's committed `_count`: rows per commit).
    let ledgerRows: Counter

    // MARK: The change feed
    /// Announcements applied to the caches, by kind: `catalog` (a tenant's catalog, settings, keys), `customer` (one
    /// customer's history), `resync` (everything dropped: the feed started, reconnected, overflowed or read an
    /// unrecognised change). Applied in the order the database committed them.
    let changeFeedChanges: Counter

    public init() {
        rpcRequests = registry.counter(
            "offergate_rpc_requests_total", help: "JSON-RPC requests handled, by method.", labels: ["method"])
        rpcAnsweredAtOnce = registry.counter(
            "offergate_rpc_answered_at_once_total",
            help: "JSON-RPC requests answered from memory on the transport's thread (no task), by method.",
            labels: ["method"])
        rpcErrors = registry.counter(
            "offergate_rpc_errors_total", help: "JSON-RPC requests answered with an error, by method and code.",
            labels: ["method", "code"])
        rpcDuration = registry.histogram(
            "offergate_rpc_request_duration_seconds", help: "Time to handle a JSON-RPC request, by method.",
            labels: ["method"])
        httpRequests = registry.counter(
            "offergate_http_requests_total", help: "HTTP requests answered, by route and status code.",
            labels: ["route", "status"])
        httpDuration = registry.histogram(
            "offergate_http_request_duration_seconds", help: "Time to answer an HTTP request, by route.",
            labels: ["route"])
        redemptions = registry.counter(
            "offergate_code_redemptions_total", help: "Offer-code redemptions by outcome.", labels: ["outcome"])
        signatures = registry.counter(
            "offergate_signatures_total", help: "Offer signatures issued (and recorded in the ledger), by format.",
            labels: ["format"])
        appleIngested = registry.counter(
            "offergate_apple_data_ingested_total",
            help: "Apple signed data received, by type (notification, transaction, renewal_info) and result.",
            labels: ["type", "result"])
        retentionAnswers = registry.counter(
            "offergate_retention_answers_total",
            help: "Retention Messaging answers to Apple, by kind and by why it was not a promotional offer.",
            labels: ["kind", "reason"])
        retentionDuration = registry.histogram(
            "offergate_retention_answer_duration_seconds",
            help: "Time from Apple's retention request to the answer, by kind.", labels: ["kind"])
        retentionOutsideBudget = registry.counter(
            "offergate_retention_answers_outside_budget_total",
            help: "Retention Messaging answers given after the tenant's time budget.")
        ledgerCommitDuration = registry.histogram(
            "offergate_ledger_commit_duration_seconds",
            help: "Time to commit one batch of the signature ledger (offers.sign answers wait for it), by outcome.",
            labels: ["outcome"],
            // A commit is a statement and a flush: ~0.1-1 ms on a healthy disk, so finer than the request buckets.
            buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5])
        changeFeedChanges = registry.counter(
            "offergate_change_feed_changes_total",
            help: "Change-feed announcements applied to the caches, by kind (catalog, customer, resync).",
            labels: ["kind"])
        ledgerRows = registry.counter(
            "offergate_ledger_rows_total",
            help: "Rows committed to the signature ledger (signatures, retention answers).")
    }

    /// Adds the families sampled at each scrape: the database pool, the caches, the process.
    func attach(pool: @escaping @Sendable () -> PoolStats, caches: GatewayCaches) {
        registry.sampled(
            "offergate_db_pool_connections", help: "Database pool connections by state.", labels: ["state"]
        ) {
            let s = pool()
            return [
                (["idle"], Double(s.idle)), (["in_use"], Double(s.inUse)), (["connecting"], Double(s.connecting)),
            ]
        }
        registry.sampled("offergate_db_pool_max_connections", help: "Database pool size limit.") {
            [([], Double(pool().maxConnections))]
        }
        registry.sampled("offergate_db_pool_waiters", help: "Tasks waiting for a database connection.") {
            [([], Double(pool().waiters))]
        }
        registry.sampled(
            "offergate_cache_hits_total", help: "Lookups answered from memory, by cache.", type: .counter,
            labels: ["cache"]
        ) { caches.lookupCounts.map { ([$0.cache], Double($0.hits)) } }
        registry.sampled(
            "offergate_cache_misses_total", help: "Lookups that had to load, by cache.", type: .counter,
            labels: ["cache"]
        ) { caches.lookupCounts.map { ([$0.cache], Double($0.misses)) } }
        registry.sampled("offergate_cache_entries", help: "Entries held, by cache.", labels: ["cache"]) {
            caches.lookupCounts.map { ([$0.cache], Double($0.entries)) }
        }
        registry.sampled(
            "offergate_customer_reads_total",
            help: "Batched reads of customers' records from the database (one round trip each).", type: .counter
        ) { [([], Double(caches.customers.reads.roundTrips))] }
        registry.sampled(
            "offergate_customer_reads_customers_total",
            help: "Customers whose records those reads loaded (divided by the reads: customers per round trip).",
            type: .counter
        ) { [([], Double(caches.customers.reads.keys))] }
        ProcessMetrics.register(in: registry)
    }

    /// One ledger batch's commit: its time, and its rows once committed.
    func recordLedgerCommit(rows: Int, seconds: Double, committed: Bool) {
        ledgerCommitDuration.observe(seconds, [committed ? "committed" : "failed"])
        if committed { ledgerRows.increment(by: Double(rows)) }
    }
}

/// `process_*` metrics as Prometheus' client libraries name them, read from `/proc/self` at each scrape.
enum ProcessMetrics {
    static func register(in registry: MetricsRegistry) {
        registry.sampled(
            "process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds.", type: .counter
        ) {
            guard let stat = statFields() else { return [] }
            let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
            // Fields 14 and 15 (utime, stime), counted from 1, after the parenthesised command name.
            guard stat.count > 12, let user = Double(stat[11]), let system = Double(stat[12]), ticks > 0 else {
                return []
            }
            return [([], (user + system) / ticks)]
        }
        registry.sampled("process_resident_memory_bytes", help: "Resident memory size in bytes.") {
            guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return [] }
            let fields = statm.split(separator: " ")
            guard fields.count > 1, let pages = Double(fields[1]) else { return [] }
            return [([], pages * Double(sysconf(Int32(_SC_PAGESIZE))))]
        }
        registry.sampled("process_virtual_memory_bytes", help: "Virtual memory size in bytes.") {
            guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
                let pages = statm.split(separator: " ").first.flatMap({ Double($0) })
            else { return [] }
            return [([], pages * Double(sysconf(Int32(_SC_PAGESIZE))))]
        }
        registry.sampled("process_open_fds", help: "Number of open file descriptors.") {
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return [] }
            return [([], Double(entries.count))]
        }
        registry.sampled("process_max_fds", help: "Maximum number of open file descriptors.") {
            var limit = rlimit()
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return [] }
            return [([], Double(limit.rlim_cur))]
        }
        let started = Date().timeIntervalSince1970
        registry.sampled("process_start_time_seconds", help: "Start time of the process since the Unix epoch.") {
            [([], started.rounded())]
        }
    }

    /// `/proc/self/stat` after the command name (which may contain spaces): field 3 (state) first.
    private static func statFields() -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }
}
