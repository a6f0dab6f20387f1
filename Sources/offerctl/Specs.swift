// The command line of offerctl: nouns (tenant, key, catalog, campaign, db) then verbs. Every verb carries the
// connection options, because CLIKit reads options after the last subcommand word.
import CLIKit

/// How to reach the gateway, and how to authenticate: shared by every verb that talks JSON-RPC.
let connectionOptions: [OptionSpec] = [
    .option(
        "connect", "ADDR",
        "The gateway: unix:PATH or tcp:HOST:PORT (else offerctl starts offergate --stdio).",
        environment: "OFFERGATE_CONNECT"),
    .option(
        "database-url", "URL", "For the gateway offerctl starts: its database (else embedded).",
        environment: "DATABASE_URL"),
    .option(
        "data-dir", "DIR", "For the gateway offerctl starts: the embedded cluster's directory.",
        environment: "OFFERGATE_DATA_DIR"),
    .option("admin-key-file", "FILE", "Read the admin API key from FILE instead of OFFERGATE_ADMIN_KEY."),
    .option("timeout", "SECONDS", "Seconds to wait for each answer of the gateway.", default: "60"),
]

/// Verbs whose output can be JSON.
let outputOptions: [OptionSpec] = [.flag("json", "Print the gateway's result as JSON on stdout (for scripts).")]

let commonOptions = connectionOptions + outputOptions

let tenantSpec = CommandSpec(
    "tenant", abstract: "Create, list, update and re-key tenants (one tenant is one app).",
    subcommands: [
        CommandSpec(
            "create", abstract: "Create a tenant and print its API key (shown once).",
            options: [
                .option("bundle-id", "ID", "The app's bundle identifier (required)."),
                .option("name", "NAME", "A display name."),
            ] + commonOptions,
            arguments: [ArgumentSpec("slug", "The tenant's slug: [a-z0-9-]{2,40}.")]),
        CommandSpec("list", abstract: "List tenants.", options: commonOptions),
        CommandSpec(
            "rotate-key", abstract: "Replace a tenant's API key and print the new one (shown once).",
            options: commonOptions, arguments: [ArgumentSpec("slug", "The tenant's slug.")]),
        CommandSpec(
            "update", abstract: "Set a tenant's name, app Apple ID, and the App Store environments it accepts.",
            options: [
                .option("name", "NAME", "A display name."),
                .option(
                    "app-apple-id", "ID",
                    "The app's Apple ID (App Store Connect, App Information); needed for Production notifications."),
                .option("allow-sandbox", "yes|no", "Accept Sandbox data (kept apart from Production data)."),
                .option(
                    "allow-xcode", "yes|no",
                    "Accept Xcode and LocalTesting data, which Apple does not sign (development tenants only)."),
            ] + commonOptions,
            arguments: [ArgumentSpec("slug", "The tenant's slug.")]),
    ])

let keySpec = CommandSpec(
    "key", abstract: "Manage a tenant's App Store Connect In-App Purchase keys.",
    subcommands: [
        CommandSpec(
            "import", abstract: "Import a .p8 key (stored encrypted; never printed).",
            options: [
                .option("key-id", "ID", "The key's ID in App Store Connect (required)."),
                .option("issuer-id", "UUID", "The issuer ID (needed for JWS signatures)."),
                .option("p8", "FILE", "The .p8 file (PKCS#8 PEM, P-256) (required)."),
            ] + commonOptions,
            arguments: [ArgumentSpec("tenant", "The tenant's slug.")]),
        CommandSpec(
            "list", abstract: "List a tenant's keys.", options: commonOptions,
            arguments: [ArgumentSpec("tenant", "The tenant's slug.")]),
        CommandSpec(
            "retire", abstract: "Retire a key: it signs nothing any more.", options: commonOptions,
            arguments: [ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("key-id", "The key's ID.")]),
    ])

let catalogSpec = CommandSpec(
    "catalog", abstract: "Import and show a tenant's subscriptions and offers.",
    subcommands: [
        CommandSpec(
            "import", abstract: "Import an Xcode .storekit file and print what was imported and skipped.",
            options: [
                .option("currency", "CUR", "The currency of the file's prices (ISO 4217; default: its storefront's).")
            ]
                + commonOptions,
            arguments: [ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("file", "The .storekit file.")]),
        CommandSpec(
            "show", abstract: "Show a tenant's groups, products and offers.", options: commonOptions,
            arguments: [ArgumentSpec("tenant", "The tenant's slug.")]),
    ])

let customerSpec = CommandSpec(
    "customer", abstract: "Show what the gateway knows of a customer, and where each fact came from.",
    subcommands: [
        CommandSpec(
            "show",
            abstract:
                "Show a customer's state in every group, with its source (apple, recorded, mixed) and environment.",
            options: [.option("at", "TIME", "The instant to show (RFC 3339; default: now).")] + commonOptions,
            arguments: [
                ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("customer-id", "The customer's ID."),
            ])
    ])

let campaignSpec = CommandSpec(
    "campaign", abstract: "Manage offer-code campaigns and their codes.",
    subcommands: [
        CommandSpec(
            "create", abstract: "Create a campaign (prints the gateway's warnings, e.g. Apple's caps).",
            options: [
                .option("offer", "ID", "The offer the codes redeem (required)."),
                .option("product", "ID", "The offer's product, when several products have an offer with that ID."),
                .option(
                    "kind", "KIND",
                    "oneTime (generated codes, one use each), custom (one shared code) or appleOneTime (codes from App "
                        + "Store Connect, handed out by codes.claim) (required)."),
                .option(
                    "apple-reference-name", "NAME",
                    "appleOneTime: the offer code's reference name in App Store Connect (attributes purchases)."),
                .option("code", "CODE", "The custom code."),
                .option("limit", "N", "Redemptions in total (default: unlimited)."),
                .option("per-customer", "N", "Redemptions per customer (default: 1)."),
                .option("starts", "RFC3339", "When codes start to work."),
                .option("expires", "RFC3339", "When codes stop working."),
                .option("eligibility", "LIST", "Who may redeem: comma-separated new,existing,expired (default: all)."),
            ] + commonOptions,
            arguments: [
                ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("campaign-id", "The campaign's ID."),
            ]),
        CommandSpec(
            "list", abstract: "List a tenant's campaigns.", options: commonOptions,
            arguments: [ArgumentSpec("tenant", "The tenant's slug.")]),
        CommandSpec(
            "show", abstract: "Show a campaign and its counters.", options: commonOptions,
            arguments: [
                ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("campaign-id", "The campaign's ID."),
            ]),
        CommandSpec(
            "stats", abstract: "Show a campaign's counters.", options: commonOptions,
            arguments: [
                ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("campaign-id", "The campaign's ID."),
            ]),
        CommandSpec(
            "deactivate", abstract: "Stop a campaign: its codes no longer redeem.", options: commonOptions,
            arguments: [
                ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("campaign-id", "The campaign's ID."),
            ]),
        CommandSpec(
            "generate", abstract: "Generate one-time codes (progress on stderr when it is a terminal).",
            options: [
                .option("count", "N", "How many codes (required)."),
                .option("pattern", "PATTERN", "The codes' shape, as the gateway understands it."),
            ] + commonOptions,
            arguments: [
                ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("campaign-id", "The campaign's ID."),
            ]),
        CommandSpec(
            "import",
            abstract: "Import App Store Connect's one-time codes file into an appleOneTime campaign.",
            discussion: """
                FILE is the file App Store Connect lets you download: one code per line, with or without a header \
                line, or CSV with the code in the first column. Duplicates and invalid lines are reported by line \
                number (never the code); codes the tenant holds already count as duplicates. Importing the same \
                file again adds nothing.
                """,
            options: [
                .option("batch-size", "N", "Codes sent per request (1-10000).", default: "10000")
            ] + commonOptions,
            arguments: [
                ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("campaign-id", "The campaign's ID."),
                ArgumentSpec("file", "The codes file."),
            ]),
        CommandSpec(
            "export", abstract: "Write a campaign's codes as CSV (code,state,redeemed_at), page by page.",
            options: [
                .option("output", "FILE", "Write to FILE (created with mode 0600) instead of stdout."),
                .option("page-size", "N", "Codes fetched per request (1-1000).", default: "1000"),
            ] + connectionOptions,
            arguments: [
                ArgumentSpec("tenant", "The tenant's slug."), ArgumentSpec("campaign-id", "The campaign's ID."),
            ]),
    ])

let reportSpec = CommandSpec(
    "report", abstract: "Reports for product teams.",
    subcommands: [
        CommandSpec(
            "funnel",
            abstract: "The offer funnel (offered, impressions, taps, signed, redeemed, claimed, purchased, renewed).",
            discussion: """
                Prints one row per UTC day (or hour) and the totals, then each stage against the first and the
                previous one. --html FILE writes a self-contained page (inline CSS and SVG, nothing fetched) with
                the funnel as bars and the stages over time as lines, for people who do not read tables.
                """,
            options: [
                .option("offer", "ID", "The funnel of one offer."),
                .option("campaign", "ID", "The funnel of a campaign's offer, with the campaign's own redemptions."),
                .option("product", "ID", "All offers of one product together (default: every offer)."),
                .option("from", "TIME", "Start (RFC 3339 or a day; default: 30 days, or 48 hours, before --to)."),
                .option("to", "TIME", "End, exclusive (RFC 3339 or a day; default: now)."),
                .option("bucket", "day|hour", "Row width (UTC).", default: "day"),
                .option("html", "FILE", "Also write the report as a self-contained HTML page to FILE."),
            ] + commonOptions,
            arguments: [ArgumentSpec("tenant", "The tenant's slug.")])
    ])

let dbSpec = CommandSpec(
    "db", abstract: "Database administration.",
    subcommands: [
        CommandSpec(
            "migrate", abstract: "Apply pending schema migrations (runs 'offergate migrate').",
            options: [
                .option(
                    "database-url", "URL", "PostgreSQL connection string or URI; else the embedded cluster.",
                    environment: "DATABASE_URL"),
                .option("data-dir", "DIR", "The embedded cluster's directory.", environment: "OFFERGATE_DATA_DIR"),
            ])
    ])

let rootSpec = CommandSpec(
    "offerctl", abstract: "Operate an OfferGate gateway: tenants, keys, catalogs and offer-code campaigns.",
    discussion: """
        offerctl speaks JSON-RPC to a running gateway (--connect, or OFFERGATE_CONNECT), or starts
        'offergate serve --stdio' itself (found next to offerctl, else on PATH) with the same database options.
        The admin key comes from OFFERGATE_ADMIN_KEY or --admin-key-file, never from a flag's value.
        Exit status: 0 success, 1 runtime failure (incl. errors the gateway returns), 64 usage error.
        """,
    subcommands: [tenantSpec, keySpec, catalogSpec, customerSpec, campaignSpec, retentionSpec, reportSpec, dbSpec])
