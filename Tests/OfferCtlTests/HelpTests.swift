// --help snapshots: the generated help of the root, every noun and one verb per noun, compared exactly.
import Testing

@Suite struct HelpTests {
    static let snapshots: [(arguments: [String], text: String)] = [
        (
            [],
            """
            OVERVIEW: Operate an OfferGate gateway: tenants, keys, catalogs and offer-code campaigns.

            offerctl speaks JSON-RPC to a running gateway (--connect, or OFFERGATE_CONNECT), or starts
            'offergate serve --stdio' itself (found next to offerctl, else on PATH) with the same database options.
            The admin key comes from OFFERGATE_ADMIN_KEY or --admin-key-file, never from a flag's value.
            Exit status: 0 success, 1 runtime failure (incl. errors the gateway returns), 64 usage error.

            USAGE: offerctl <command>

            COMMANDS:
              tenant     Create, list, update and re-key tenants (one tenant is one app).
              key        Manage a tenant's App Store Connect In-App Purchase keys.
              catalog    Import and show a tenant's subscriptions and offers.
              customer   Show what the gateway knows of a customer, and where each fact came from.
              campaign   Manage offer-code campaigns and their codes.
              retention  Configure what Apple shows at a subscriber's cancel page (Retention Messaging).
              report     Reports for product teams.
              db         Database administration.

              See 'offerctl <command> --help' for details.

            OPTIONS:
              -h, --help  Show help information.

            """
        ),
        (
            ["tenant"],
            """
            OVERVIEW: Create, list, update and re-key tenants (one tenant is one app).

            USAGE: offerctl tenant <command>

            COMMANDS:
              create      Create a tenant and print its API key (shown once).
              list        List tenants.
              rotate-key  Replace a tenant's API key and print the new one (shown once).
              update      Set a tenant's name, app Apple ID, and the App Store environments it accepts.

              See 'offerctl tenant <command> --help' for details.

            OPTIONS:
              -h, --help  Show help information.

            """
        ),
        (
            ["key"],
            """
            OVERVIEW: Manage a tenant's App Store Connect In-App Purchase keys.

            USAGE: offerctl key <command>

            COMMANDS:
              import  Import a .p8 key (stored encrypted; never printed).
              list    List a tenant's keys.
              retire  Retire a key: it signs nothing any more.

              See 'offerctl key <command> --help' for details.

            OPTIONS:
              -h, --help  Show help information.

            """
        ),
        (
            ["catalog"],
            """
            OVERVIEW: Import and show a tenant's subscriptions and offers.

            USAGE: offerctl catalog <command>

            COMMANDS:
              import  Import an Xcode .storekit file and print what was imported and skipped.
              show    Show a tenant's groups, products and offers.

              See 'offerctl catalog <command> --help' for details.

            OPTIONS:
              -h, --help  Show help information.

            """
        ),
        (
            ["campaign"],
            """
            OVERVIEW: Manage offer-code campaigns and their codes.

            USAGE: offerctl campaign <command>

            COMMANDS:
              create      Create a campaign (prints the gateway's warnings, e.g. Apple's caps).
              list        List a tenant's campaigns.
              show        Show a campaign and its counters.
              stats       Show a campaign's counters.
              deactivate  Stop a campaign: its codes no longer redeem.
              generate    Generate one-time codes (progress on stderr when it is a terminal).
              import      Import App Store Connect's one-time codes file into an appleOneTime campaign.
              export      Write a campaign's codes as CSV (code,state,redeemed_at), page by page.

              See 'offerctl campaign <command> --help' for details.

            OPTIONS:
              -h, --help  Show help information.

            """
        ),
        (
            ["db"],
            """
            OVERVIEW: Database administration.

            USAGE: offerctl db <command>

            COMMANDS:
              migrate  Apply pending schema migrations (runs 'offergate migrate').

              See 'offerctl db <command> --help' for details.

            OPTIONS:
              -h, --help  Show help information.

            """
        ),
        (
            ["tenant", "create"],
            """
            OVERVIEW: Create a tenant and print its API key (shown once).

            USAGE: offerctl tenant create [options] <slug>

            ARGUMENTS:
              <slug>  The tenant's slug: [a-z0-9-]{2,40}.

            OPTIONS:
              --bundle-id <ID>         The app's bundle identifier (required).
              --name <NAME>            A display name.
              --connect <ADDR>         The gateway: unix:PATH or tcp:HOST:PORT (else offerctl starts offergate --stdio). (env: OFFERGATE_CONNECT)
              --database-url <URL>     For the gateway offerctl starts: its database (else embedded). (env: DATABASE_URL)
              --data-dir <DIR>         For the gateway offerctl starts: the embedded cluster's directory. (env: OFFERGATE_DATA_DIR)
              --admin-key-file <FILE>  Read the admin API key from FILE instead of OFFERGATE_ADMIN_KEY.
              --timeout <SECONDS>      Seconds to wait for each answer of the gateway. (default: 60)
              --json                   Print the gateway's result as JSON on stdout (for scripts).
              -h, --help               Show help information.

            """
        ),
        (
            ["key", "import"],
            """
            OVERVIEW: Import a .p8 key (stored encrypted; never printed).

            USAGE: offerctl key import [options] <tenant>

            ARGUMENTS:
              <tenant>  The tenant's slug.

            OPTIONS:
              --key-id <ID>            The key's ID in App Store Connect (required).
              --issuer-id <UUID>       The issuer ID (needed for JWS signatures).
              --p8 <FILE>              The .p8 file (PKCS#8 PEM, P-256) (required).
              --connect <ADDR>         The gateway: unix:PATH or tcp:HOST:PORT (else offerctl starts offergate --stdio). (env: OFFERGATE_CONNECT)
              --database-url <URL>     For the gateway offerctl starts: its database (else embedded). (env: DATABASE_URL)
              --data-dir <DIR>         For the gateway offerctl starts: the embedded cluster's directory. (env: OFFERGATE_DATA_DIR)
              --admin-key-file <FILE>  Read the admin API key from FILE instead of OFFERGATE_ADMIN_KEY.
              --timeout <SECONDS>      Seconds to wait for each answer of the gateway. (default: 60)
              --json                   Print the gateway's result as JSON on stdout (for scripts).
              -h, --help               Show help information.

            """
        ),
        (
            ["catalog", "import"],
            """
            OVERVIEW: Import an Xcode .storekit file and print what was imported and skipped.

            USAGE: offerctl catalog import [options] <tenant> <file>

            ARGUMENTS:
              <tenant>  The tenant's slug.
              <file>    The .storekit file.

            OPTIONS:
              --currency <CUR>         The currency of the file's prices (ISO 4217; default: its storefront's).
              --connect <ADDR>         The gateway: unix:PATH or tcp:HOST:PORT (else offerctl starts offergate --stdio). (env: OFFERGATE_CONNECT)
              --database-url <URL>     For the gateway offerctl starts: its database (else embedded). (env: DATABASE_URL)
              --data-dir <DIR>         For the gateway offerctl starts: the embedded cluster's directory. (env: OFFERGATE_DATA_DIR)
              --admin-key-file <FILE>  Read the admin API key from FILE instead of OFFERGATE_ADMIN_KEY.
              --timeout <SECONDS>      Seconds to wait for each answer of the gateway. (default: 60)
              --json                   Print the gateway's result as JSON on stdout (for scripts).
              -h, --help               Show help information.

            """
        ),
        (
            ["campaign", "create"],
            """
            OVERVIEW: Create a campaign (prints the gateway's warnings, e.g. Apple's caps).

            USAGE: offerctl campaign create [options] <tenant> <campaign-id>

            ARGUMENTS:
              <tenant>       The tenant's slug.
              <campaign-id>  The campaign's ID.

            OPTIONS:
              --offer <ID>                   The offer the codes redeem (required).
              --product <ID>                 The offer's product, when several products have an offer with that ID.
              --kind <KIND>                  oneTime (generated codes, one use each), custom (one shared code) or appleOneTime (codes from App Store Connect, handed out by codes.claim) (required).
              --apple-reference-name <NAME>  appleOneTime: the offer code's reference name in App Store Connect (attributes purchases).
              --code <CODE>                  The custom code.
              --limit <N>                    Redemptions in total (default: unlimited).
              --per-customer <N>             Redemptions per customer (default: 1).
              --starts <RFC3339>             When codes start to work.
              --expires <RFC3339>            When codes stop working.
              --eligibility <LIST>           Who may redeem: comma-separated new,existing,expired (default: all).
              --connect <ADDR>               The gateway: unix:PATH or tcp:HOST:PORT (else offerctl starts offergate --stdio). (env: OFFERGATE_CONNECT)
              --database-url <URL>           For the gateway offerctl starts: its database (else embedded). (env: DATABASE_URL)
              --data-dir <DIR>               For the gateway offerctl starts: the embedded cluster's directory. (env: OFFERGATE_DATA_DIR)
              --admin-key-file <FILE>        Read the admin API key from FILE instead of OFFERGATE_ADMIN_KEY.
              --timeout <SECONDS>            Seconds to wait for each answer of the gateway. (default: 60)
              --json                         Print the gateway's result as JSON on stdout (for scripts).
              -h, --help                     Show help information.

            """
        ),
        (
            ["db", "migrate"],
            """
            OVERVIEW: Apply pending schema migrations (runs 'offergate migrate').

            USAGE: offerctl db migrate [options]

            OPTIONS:
              --database-url <URL>  PostgreSQL connection string or URI; else the embedded cluster. (env: DATABASE_URL)
              --data-dir <DIR>      The embedded cluster's directory. (env: OFFERGATE_DATA_DIR)
              -h, --help            Show help information.

            """
        ),
        (
            ["retention"],
            """
            OVERVIEW: Configure what Apple shows at a subscriber's cancel page (Retention Messaging).

            USAGE: offerctl retention <command>

            COMMANDS:
              configure  Set the default message, the offers and alternate products with their approved messages.
              show       Show a tenant's Retention Messaging configuration.

              See 'offerctl retention <command> --help' for details.

            OPTIONS:
              -h, --help  Show help information.

            """
        ),
        (
            ["retention", "configure"],
            """
            OVERVIEW: Set the default message, the offers and alternate products with their approved messages.

            USAGE: offerctl retention configure [options] <tenant>

            ARGUMENTS:
              <tenant>  The tenant's slug.

            OPTIONS:
              --default-message <ID>         The approved message shown when nothing better applies (required).
              --offer <OFFER=MESSAGE>        A promotional offer and its approved message. (repeatable)
              --alternate <PRODUCT=MESSAGE>  Another product of the group to suggest, with its approved message. (repeatable)
              --budget-ms <MS>               How long an answer may take, in milliseconds (default: 500).
              --connect <ADDR>               The gateway: unix:PATH or tcp:HOST:PORT (else offerctl starts offergate --stdio). (env: OFFERGATE_CONNECT)
              --database-url <URL>           For the gateway offerctl starts: its database (else embedded). (env: DATABASE_URL)
              --data-dir <DIR>               For the gateway offerctl starts: the embedded cluster's directory. (env: OFFERGATE_DATA_DIR)
              --admin-key-file <FILE>        Read the admin API key from FILE instead of OFFERGATE_ADMIN_KEY.
              --timeout <SECONDS>            Seconds to wait for each answer of the gateway. (default: 60)
              --json                         Print the gateway's result as JSON on stdout (for scripts).
              -h, --help                     Show help information.

            """
        ),
    ]

    @Test(arguments: 0..<snapshots.count)
    func helpMatchesSnapshot(index: Int) async throws {
        let (arguments, expected) = Self.snapshots[index]
        let outcome = try await Spawn.offerctl(arguments + ["--help"])
        #expect(outcome.status == 0, "\(outcome)")
        #expect(outcome.stderr == "")
        #expect(
            outcome.stdout == expected,
            "offerctl \(arguments.joined(separator: " ")) --help changed:\n\(outcome.stdout)")
    }

    @Test func noArgumentsPrintsRootHelp() async throws {
        let outcome = try await Spawn.offerctl([])
        #expect(outcome.status == 0)
        #expect(outcome.stdout == Self.snapshots[0].text)
    }

    @Test func helpAfterOptionsAndVerbsStillWorks() async throws {
        let outcome = try await Spawn.offerctl(["tenant", "create", "acme", "--bundle-id", "x", "-h"])
        #expect(outcome.status == 0)
        #expect(outcome.stdout == Self.snapshots[6].text)
    }
}
