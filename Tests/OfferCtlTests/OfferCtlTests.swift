// offerctl against a real gateway on a Unix socket (and once in stdio mode): happy paths, the main errors, exit
// statuses, the human output and --json.
import Foundation
import JSONRPC
import OfferTestSupport
import Testing

/// A P-256 key in PKCS#8 PEM made for these tests only (`openssl genpkey -algorithm EC -pkeyopt
/// ec_paramgen_curve:P-256`); it signs nothing real.
let testP8 = """
    -----BEGIN PRIVATE KEY-----
    MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgWLzlSZfwZPlljBRI
    PsxwialcHTJyyTyMCqKPxc8tTeahRANCAAQK9Q3k9dk6vxLLRQllOhAagMukHvnJ
    hfBc67XvFGW7L5LScSuzxf5lfWDBoGRz1zR7GEUrt4asYq4BOOXbmpIO
    -----END PRIVATE KEY-----

    """

/// An Xcode .storekit file: one group with two subscriptions and three offers, plus two entries the import skips.
let testStoreKit = """
    {
      "identifier": "ABCD",
      "nonRenewingSubscriptions": [{"productID": "com.acme.season", "type": "NonRenewingSubscription"}],
      "products": [{"productID": "com.acme.coins", "type": "Consumable", "displayPrice": "0.99"}],
      "settings": {"_storefront": "USA"},
      "subscriptionGroups": [{
        "id": "21000001", "name": "Acme Pro",
        "subscriptions": [
          {"productID": "com.acme.pro.monthly", "recurringSubscriptionPeriod": "P1M", "displayPrice": "4.99",
           "groupNumber": 2, "type": "RecurringSubscription",
           "introductoryOffer": {"internalID": "intro-m", "paymentMode": "free", "subscriptionPeriod": "P1W",
                                 "numberOfPeriods": 1},
           "adHocOffers": [{"offerID": "promo-m", "paymentMode": "payAsYouGo", "subscriptionPeriod": "P1M",
                            "numberOfPeriods": 3, "displayPrice": "0.99"}]},
          {"productID": "com.acme.pro.yearly", "recurringSubscriptionPeriod": "P1Y", "displayPrice": "39.99",
           "groupNumber": 1, "type": "RecurringSubscription",
           "codeOffers": [{"offerID": "code-y", "paymentMode": "payUpFront", "subscriptionPeriod": "P6M",
                           "numberOfPeriods": 1, "displayPrice": "9.99"}]}
        ]
      }],
      "version": {"major": 3, "minor": 0}
    }
    """

/// The API key in `api key  <key>` output.
func apiKey(in stdout: String) -> String? {
    for line in stdout.split(separator: "\n") where line.hasPrefix("api key") {
        return line.split(separator: " ").last.map(String.init)
    }
    return nil
}

@Suite(.serialized) struct GatewayCommandTests {
    @Test func tenantCreateListRotate() async throws {
        try await TestGateway.with { gateway in
            let created = try await gateway.ctl([
                "tenant", "create", "acme", "--bundle-id", "com.acme.app", "--name", "Acme Inc.",
            ])
            #expect(created.status == 0, "\(created)")
            let key = try #require(apiKey(in: created.stdout))
            #expect(created.stdout == "tenant     acme\nbundle id  com.acme.app\napi key    \(key)\n")
            #expect(created.stderr.contains("note: store this API key now"))
            #expect(!created.stderr.contains(key), "the key belongs on stdout only")
            #expect(!created.stdout.contains(gateway.adminKey) && !created.stderr.contains(gateway.adminKey))
            #expect(try await gateway.authenticate(apiKey: key)["tenant"]?.stringValue == "acme")

            let list = try await gateway.ctl(["tenant", "list"])
            #expect(list.status == 0, "\(list)")
            let lines = list.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(lines.count == 3, "\(list)")
            #expect(lines.first == "SLUG  NAME       BUNDLE ID     CREATED")
            #expect(lines.dropFirst().first?.hasPrefix("acme  Acme Inc.  com.acme.app  20") == true, "\(list)")

            let json = try await gateway.ctl(["tenant", "list", "--json"])
            #expect(json.status == 0)
            let tenants = try #require(try json.json()["tenants"]?.arrayValue)
            #expect(tenants.map { $0["slug"]?.stringValue } == ["acme"])
            #expect(tenants.first?["bundleId"]?.stringValue == "com.acme.app")

            let rotated = try await gateway.ctl(["tenant", "rotate-key", "acme", "--json"])
            #expect(rotated.status == 0, "\(rotated)")
            let newKey = try #require(try rotated.json()["apiKey"]?.stringValue)
            #expect(newKey != key)
            #expect(try await gateway.authenticate(apiKey: newKey)["tenant"]?.stringValue == "acme")
            await #expect(throws: RPCError.self) { _ = try await gateway.authenticate(apiKey: key) }

            let updated = try await gateway.ctl([
                "tenant", "update", "acme", "--app-apple-id", "1234567890", "--allow-sandbox", "yes",
            ])
            #expect(updated.status == 0, "\(updated)")
            #expect(updated.stdout.contains("app apple id   1234567890\n"), "\(updated)")
            #expect(updated.stdout.contains("allow sandbox  yes\n"), "\(updated)")
            #expect(updated.stdout.contains("allow xcode    no\n"), "\(updated)")
            let shown = try await gateway.ctl(["tenant", "list", "--json"])
            let shownTenant = try #require(try shown.json()["tenants"]?.arrayValue?.first)
            #expect(shownTenant["appAppleId"]?.int64Value == 1_234_567_890, "\(shownTenant)")
            #expect(shownTenant["allowSandbox"]?.boolValue == true)

            let duplicate = try await gateway.ctl(["tenant", "create", "acme", "--bundle-id", "com.acme.app"])
            #expect(duplicate.status == 1)
            #expect(duplicate.stderr.hasPrefix("offerctl: "), "\(duplicate)")
            #expect(duplicate.stderr.contains("(code -32009"), "\(duplicate)")
        }
    }

    @Test func keyImportListRetire() async throws {
        try await TestGateway.with { gateway in
            #expect(try await gateway.ctl(["tenant", "create", "acme", "--bundle-id", "com.acme.app"]).status == 0)
            let p8 = try gateway.file("AuthKey_ABC123.p8", testP8)
            let imported = try await gateway.ctl(["key", "import", "acme", "--key-id", "ABC123", "--p8", p8])
            #expect(imported.status == 0, "\(imported)")
            #expect(imported.stdout == "tenant  acme\nkey id  ABC123\nstate   active\n")
            #expect(!imported.stdout.contains("PRIVATE") && !imported.stderr.contains("PRIVATE"))
            #expect(!imported.stdout.contains("MIGHAgEAMBMG") && !imported.stderr.contains("MIGHAgEAMBMG"))

            let issuer = "57246542-96fe-1a63-e053-0824d011072a"
            let second = try await gateway.ctl(
                ["key", "import", "acme", "--key-id", "DEF456", "--issuer-id", issuer, "--p8", p8, "--json"])
            #expect(second.status == 0, "\(second)")
            #expect(try second.json()["keyId"]?.stringValue == "DEF456")
            #expect(!second.stdout.contains("PRIVATE KEY"))

            let retired = try await gateway.ctl(["key", "retire", "acme", "ABC123"])
            #expect(retired.status == 0, "\(retired)")
            #expect(retired.stdout == "Retired key ABC123 of tenant acme.\n")

            let list = try await gateway.ctl(["key", "list", "acme"])
            #expect(list.status == 0, "\(list)")
            let lines = list.stdout.split(separator: "\n").map(String.init)
            #expect(
                lines.first
                    == "KEY ID  ISSUER ID                             STATE    CREATED                   RETIRED")
            let rows = Dictionary(uniqueKeysWithValues: lines.dropFirst().map { ($0.prefix(6).description, $0) })
            #expect(rows["ABC123"]?.contains("  -                                     retired  20") == true, "\(list)")
            #expect(rows["DEF456"]?.contains("  \(issuer)  active   20") == true, "\(list)")
            #expect(rows["DEF456"]?.hasSuffix("  -") == true, "\(list)")

            let json = try await gateway.ctl(["key", "list", "acme", "--json"])
            let keys = try #require(try json.json()["keys"]?.arrayValue)
            let states = Dictionary(
                uniqueKeysWithValues: keys.map { ($0["keyId"]?.stringValue ?? "", $0["state"]?.stringValue) })
            #expect(states == ["ABC123": "retired", "DEF456": "active"])

            // A file that is not a key: the gateway refuses it, and nothing of the file is echoed.
            let bogus = try gateway.file(
                "bogus.p8", "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ1dC1ub3QtYS1rZXk=\n-----END PRIVATE KEY-----\n")
            let refused = try await gateway.ctl(["key", "import", "acme", "--key-id", "BAD1", "--p8", bogus])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("(code -32602, reason invalid_key)"), "\(refused)")
            #expect(!refused.stderr.contains("c2VjcmV0"))

            let missing = try await gateway.ctl(["key", "import", "acme", "--key-id", "X", "--p8", "/nonexistent/k.p8"])
            #expect(missing.status == 1)
            #expect(missing.stderr == "offerctl: cannot read the key file /nonexistent/k.p8\n")

            let noFlag = try await gateway.ctl(["key", "import", "acme", "--key-id", "X"])
            #expect(noFlag.status == 64)
            #expect(noFlag.stderr == "offerctl: missing --p8\nSee 'offerctl key import --help'.\n")
        }
    }

    @Test func customerShowPrintsEachGroupWithWhereItsFactsCameFrom() async throws {
        try await TestGateway.with { gateway in
            let created = try await gateway.ctl(["tenant", "create", "acme", "--bundle-id", "com.acme.app", "--json"])
            let key = try #require(try created.json()["apiKey"]?.stringValue)
            #expect(
                try await gateway.ctl(["catalog", "import", "acme", try gateway.file("P.storekit", testStoreKit)])
                    .status == 0)
            let client = try await RPCClient.connect(to: gateway.connect)
            defer { client.close() }
            _ = try await client.call(method: "session.authenticate", params: ["apiKey": .string(key)])
            _ = try await client.call(
                method: "subscriptions.record",
                params: [
                    "customerId": "cust-1", "productId": "com.acme.pro.monthly", "transactionId": "t1",
                    "purchaseDate": "2026-11-01T00:00:00Z", "expiresDate": "2026-12-01T00:00:00Z",
                ])
            let shown = try await gateway.ctl(["customer", "show", "acme", "cust-1", "--at", "2026-11-15T00:00:00Z"])
            #expect(shown.status == 0, "\(shown)")
            let lines = shown.stdout.split(separator: "\n").map(String.init)
            #expect(lines.first == "customer cust-1 at 2026-11-15T00:00:00Z", "\(shown)")
            #expect(lines.dropFirst().first?.hasPrefix("GROUP") == true && lines[1].contains("SOURCE"), "\(shown)")
            let row = try #require(lines.dropFirst(2).first)
            #expect(row.hasPrefix("21000001  active  recorded"), "\(shown)")
            #expect(row.contains("com.acme.pro.monthly"), "\(shown)")
            let json = try await gateway.ctl(["customer", "show", "acme", "cust-1", "--json"])
            #expect(try json.json()["groups"]?[0]?["source"]?.stringValue == "recorded", "\(json)")
            let unknown = try await gateway.ctl(["customer", "show", "nope", "cust-1"])
            #expect(unknown.status == 1 && unknown.stderr.contains("-32004"), "\(unknown)")
        }
    }

    @Test func catalogImportAndShow() async throws {
        try await TestGateway.with { gateway in
            #expect(try await gateway.ctl(["tenant", "create", "acme", "--bundle-id", "com.acme.app"]).status == 0)
            let file = try gateway.file("Products.storekit", testStoreKit)
            let imported = try await gateway.ctl(["catalog", "import", "acme", file])
            #expect(imported.status == 0, "\(imported)")
            #expect(
                imported.stdout == """
                    Imported into acme: 1 group, 2 products, 3 offers.
                    Skipped 2 entries:
                      PATH                           REASON
                      $.products[0]                  not an auto-renewable subscription
                      $.nonRenewingSubscriptions[0]  non-renewing subscription

                    """)

            let shown = try await gateway.ctl(["catalog", "show", "acme"])
            #expect(shown.status == 0, "\(shown)")
            #expect(
                shown.stdout == """
                    GROUPS
                    ID        NAME
                    21000001  Acme Pro

                    PRODUCTS
                    ID                    GROUP     PERIOD  PRICE      LEVEL
                    com.acme.pro.monthly  21000001  P1M     4.99 USD   2
                    com.acme.pro.yearly   21000001  P1Y     39.99 USD  1

                    OFFERS
                    ID       TYPE          PRODUCT               PAYMENT     PERIOD  COUNT  PRICE
                    code-y   code          com.acme.pro.yearly   payUpFront  P6M     1      9.99
                    intro-m  introductory  com.acme.pro.monthly  freeTrial   P1W     1      -
                    promo-m  promotional   com.acme.pro.monthly  payAsYouGo  P1M     3      0.99

                    """)

            let json = try await gateway.ctl(["catalog", "show", "acme", "--json"])
            let catalog = try json.json()
            #expect(catalog["products"]?.arrayValue?.count == 2)
            #expect(
                Set(catalog["offers"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []) == [
                    "code-y", "intro-m", "promo-m",
                ])

            let again = try await gateway.ctl(["catalog", "import", "acme", file, "--currency", "EUR", "--json"])
            #expect(again.status == 0, "\(again)")
            #expect(try again.json()["skipped"]?.arrayValue?.count == 2)
            let euros = try await gateway.ctl(["catalog", "show", "acme"])
            #expect(euros.stdout.contains("com.acme.pro.yearly   21000001  P1Y     39.99 EUR  1"), "\(euros)")

            let broken = try gateway.file("broken.storekit", #"{"subscriptionGroups": [{"id": 1}]}"#)
            let rejected = try await gateway.ctl(["catalog", "import", "acme", broken])
            #expect(rejected.status == 1)
            #expect(rejected.stderr.contains("(code -32602, reason invalid_storekit)"), "\(rejected)")
            #expect(rejected.stderr.contains("  param: params.storekit.subscriptionGroups[0].id"), "\(rejected)")

            let notJSON = try gateway.file("text.storekit", "hello")
            let unreadable = try await gateway.ctl(["catalog", "import", "acme", notJSON])
            #expect(unreadable.status == 1)
            #expect(unreadable.stderr.hasPrefix("offerctl: \(notJSON) is not JSON"), "\(unreadable)")
        }
    }

    @Test func unknownTenantIsARuntimeFailure() async throws {
        try await TestGateway.with { gateway in
            for arguments in [
                ["tenant", "rotate-key", "nope"], ["key", "list", "nope"], ["key", "retire", "nope", "K1"],
                ["catalog", "show", "nope"],
            ] {
                let outcome = try await gateway.ctl(arguments)
                #expect(outcome.status == 1, "\(arguments): \(outcome)")
                #expect(outcome.stdout == "")
                #expect(
                    outcome.stderr == "offerctl: no tenant 'nope' (code -32004, reason unknown_tenant)\n",
                    "\(arguments)")
            }
        }
    }

    @Test func adminKeyProblems() async throws {
        try await TestGateway.with { gateway in
            let missing = try await gateway.ctl(["tenant", "list"], environment: ["OFFERGATE_ADMIN_KEY": ""])
            #expect(missing.status == 64)
            #expect(
                missing.stderr
                    == "offerctl: no admin key: set OFFERGATE_ADMIN_KEY or pass --admin-key-file FILE\n"
                    + "See 'offerctl tenant list --help'.\n")

            let wrong = try await gateway.ctl(["tenant", "list"], environment: ["OFFERGATE_ADMIN_KEY": "not-the-key"])
            #expect(wrong.status == 1)
            #expect(wrong.stderr == "offerctl: invalid API key (code -32001, reason invalid_api_key)\n")
            #expect(wrong.stdout == "")

            // A tenant's key authenticates, but is not the admin key.
            let created = try await gateway.ctl(["tenant", "create", "acme", "--bundle-id", "com.acme.app", "--json"])
            let tenantKey = try #require(try created.json()["apiKey"]?.stringValue)
            let tenant = try await gateway.ctl(["tenant", "list"], environment: ["OFFERGATE_ADMIN_KEY": tenantKey])
            #expect(tenant.status == 1)
            #expect(tenant.stderr.contains("not the admin key"), "\(tenant)")
            #expect(!tenant.stderr.contains(tenantKey))

            // --admin-key-file wins over the environment.
            let file = try gateway.file("admin.key", gateway.adminKey + "\n")
            let fromFile = try await gateway.ctl(
                ["tenant", "list", "--admin-key-file", file], environment: ["OFFERGATE_ADMIN_KEY": "not-the-key"])
            #expect(fromFile.status == 0, "\(fromFile)")
            let noFile = try await gateway.ctl(["tenant", "list", "--admin-key-file", "/nonexistent/admin.key"])
            #expect(noFile.status == 1)
            #expect(noFile.stderr == "offerctl: cannot read the admin key file /nonexistent/admin.key\n")
        }
    }

    @Test func connectionAddressFromTheEnvironment() async throws {
        try await TestGateway.with { gateway in
            let outcome = try await Spawn.offerctl(
                ["tenant", "list", "--json"],
                environment: ["OFFERGATE_CONNECT": gateway.connect, "OFFERGATE_ADMIN_KEY": gateway.adminKey])
            #expect(outcome.status == 0, "\(outcome)")
            #expect(try outcome.json()["tenants"]?.arrayValue == [])
        }
    }

    /// No --connect: offerctl starts `offergate serve --stdio` itself (found next to it) over the given database.
    @Test func stdioModeStartsTheGateway() async throws {
        try Paths.check()
        try await TestDatabase.with(applicationName: "offerctl-tests") { configuration in
            let environment = ["OFFERGATE_ADMIN_KEY": Secrets.adminKey(), "OFFERGATE_MASTER_KEY": Secrets.masterKey()]
            let created = try await Spawn.offerctl(
                [
                    "tenant", "create", "stdio-app", "--bundle-id", "com.stdio.app", "--database-url",
                    configuration.conninfo,
                ],
                environment: environment)
            #expect(created.status == 0, "\(created)")
            #expect(apiKey(in: created.stdout) != nil, "\(created)")
            // The database from the environment works too, and the tenant is still there.
            var withURL = environment
            withURL["DATABASE_URL"] = configuration.conninfo
            let listed = try await Spawn.offerctl(["tenant", "list", "--json"], environment: withURL)
            #expect(listed.status == 0, "\(listed)")
            #expect(try listed.json()["tenants"]?.arrayValue?.map { $0["slug"]?.stringValue } == ["stdio-app"])

            // The gateway cannot start (no such database): exit 1, and the gateway's own message is shown.
            let broken = try configuration.with(database: "og_test_does_not_exist")
            let failed = try await Spawn.offerctl(
                ["tenant", "list", "--database-url", broken.conninfo], environment: environment)
            #expect(failed.status == 1, "\(failed)")
            #expect(failed.stderr.contains("offergate: "), "\(failed)")
            #expect(
                failed.stderr.contains(
                    "offerctl: the gateway offerctl started (offergate serve --stdio) exited with status 1"),
                "\(failed)")
        }
    }

    @Test func dbMigrateRunsOffergateMigrate() async throws {
        try Paths.check()
        try await TestDatabase.with(applicationName: "offerctl-tests") { configuration in
            let first = try await Spawn.offerctl(["db", "migrate", "--database-url", configuration.conninfo])
            #expect(first.status == 0, "\(first)")
            #expect(first.stdout.hasPrefix("applied migrations: 1"), "\(first)")
            let second = try await Spawn.offerctl(
                ["db", "migrate"], environment: ["DATABASE_URL": configuration.conninfo])
            #expect(second.status == 0, "\(second)")
            #expect(second.stdout == "schema is up to date\n")
        }
    }
}

/// Command lines offerctl refuses before talking to anyone: exit 64, the reason and a pointer to --help on stderr.
@Suite struct UsageTests {
    static let cases: [(arguments: [String], message: String)] = [
        (
            ["frobnicate"],
            "unknown command 'frobnicate' (expected one of: tenant, key, catalog, customer, campaign, retention, report, db)"
        ),
        (["tenant", "bogus"], "unknown command 'bogus' (expected one of: create, list, rotate-key, update)"),
        (["tenant", "list", "--bogus"], "unknown option '--bogus'"),
        (["tenant", "list", "extra"], "unexpected argument 'extra'"),
        (["tenant", "create", "acme"], "missing --bundle-id"),
        (["tenant", "create", "--bundle-id", "x"], "missing argument <slug>"),
        (["tenant", "list", "--json=yes"], "--json takes no value"),
        (["tenant", "list", "--connect"], "--connect needs a value"),
        (["tenant", "list", "--timeout", "soon"], "--timeout takes a number of seconds"),
        (["key", "retire", "acme"], "missing argument <key-id>"),
        (["catalog", "import", "acme"], "missing argument <file>"),
        (["campaign", "create", "acme", "c1", "--offer", "o"], "missing --kind"),
        (["campaign", "create", "acme", "c1", "--kind", "oneTime"], "missing --offer"),
        (
            ["campaign", "create", "acme", "c1", "--offer", "o", "--kind", "forever"],
            "--kind takes oneTime, custom or appleOneTime"
        ),
        (
            ["campaign", "create", "acme", "c1", "--offer", "o", "--kind", "oneTime", "--code", "SPRING"],
            "--code is for --kind custom (one-time codes are generated)"
        ),
        (
            ["campaign", "create", "acme", "c1", "--offer", "o", "--kind", "custom", "--limit", "0"],
            "--limit takes a whole number in 1...1000000000"
        ),
        (
            ["campaign", "create", "acme", "c1", "--offer", "o", "--kind", "custom", "--starts", "tomorrow"],
            "--starts takes an RFC 3339 time such as 2026-12-01T00:00:00Z"
        ),
        (
            ["campaign", "create", "acme", "c1", "--offer", "o", "--kind", "custom", "--eligibility", "new,lapsed"],
            "--eligibility takes a comma-separated list of new, existing, expired"
        ),
        (
            ["tenant", "update", "acme"],
            "say what to change: --name, --app-apple-id, --allow-sandbox or --allow-xcode"
        ),
        (["tenant", "update", "acme", "--allow-sandbox", "maybe"], "--allow-sandbox takes yes or no"),
        (["campaign", "generate", "acme", "c1"], "missing --count"),
        (["campaign", "generate", "acme", "c1", "--count", "-5"], "--count takes a whole number in 1...100000000"),
        (["campaign", "export", "acme", "c1", "--json"], "unknown option '--json'"),
        (["db", "migrate", "--connect", "unix:/tmp/x.sock"], "unknown option '--connect'"),
        (
            ["report", "funnel", "acme", "--offer", "o", "--campaign", "c"],
            "give at most one of --offer, --campaign or --product"
        ),
        (["report", "funnel", "acme", "--bucket", "week"], "--bucket takes day or hour"),
        (["report", "funnel", "acme", "--from", "2026-12-02", "--to", "2026-12-01"], "--from must be before --to"),
        (
            ["report", "funnel", "acme", "--from", "yesterday"],
            "--from takes an RFC 3339 time or a day (2026-11-30)"
        ),
    ]

    @Test(arguments: 0..<cases.count)
    func refusedWithUsageStatus(index: Int) async throws {
        let (arguments, message) = Self.cases[index]
        // A reachable-looking address and a key: the refusal must come before any connection attempt.
        let outcome = try await Spawn.offerctl(
            arguments, environment: ["OFFERGATE_CONNECT": "unix:/nonexistent/og.sock", "OFFERGATE_ADMIN_KEY": "k"])
        #expect(outcome.status == 64, "\(arguments): \(outcome)")
        #expect(outcome.stdout == "")
        let lines = outcome.stderr.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first.map(String.init) == "offerctl: \(message)", "\(arguments): \(outcome)")
        #expect(lines.dropFirst().first?.hasPrefix("See 'offerctl") == true, "\(arguments): \(outcome)")
    }

    @Test func badConnectAddressIsAUsageError() async throws {
        let outcome = try await Spawn.offerctl(
            ["tenant", "list", "--connect", "carrier-pigeon"], environment: ["OFFERGATE_ADMIN_KEY": "k"])
        #expect(outcome.status == 64, "\(outcome)")
        #expect(outcome.stderr.hasPrefix("offerctl: --connect takes unix:PATH or tcp:HOST:PORT"), "\(outcome)")
    }

    @Test func unreachableGatewayIsARuntimeFailure() async throws {
        let outcome = try await Spawn.offerctl(
            ["tenant", "list", "--connect", "unix:/nonexistent/og.sock"], environment: ["OFFERGATE_ADMIN_KEY": "k"])
        #expect(outcome.status == 1, "\(outcome)")
        #expect(
            outcome.stderr
                == "offerctl: cannot connect to the gateway at unix:/nonexistent/og.sock: connect(2) failed: No such file or directory\n"
        )
    }
}
