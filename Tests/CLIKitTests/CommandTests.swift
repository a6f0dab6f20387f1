import Testing

@testable import CLIKit

private let spec = CommandSpec(
    "tool", abstract: "A tool.",
    subcommands: [
        CommandSpec(
            "campaign", abstract: "Offer-code campaigns.",
            subcommands: [
                CommandSpec(
                    "create", abstract: "Create a campaign.",
                    options: [
                        .option("tenant", "SLUG", "The tenant."),
                        .option("limit", "N", "Total limit."),
                        .option("listen", "ADDR", "Where to listen.", repeatable: true),
                        .option("admin-key", "KEY", "Admin key.", environment: "TOOL_ADMIN_KEY"),
                        .option("format", "F", "Output format.", default: "table"),
                        .flag("json", "Print JSON."),
                    ],
                    arguments: [
                        ArgumentSpec("id", "The campaign id."), ArgumentSpec("note", "A note.", optional: true),
                    ]
                )
            ])
    ])

private func run(_ argv: [String], env: [String: String] = [:]) throws -> ParsedCommand {
    switch try spec.parse(argv, environment: env) {
    case .run(let parsed): return parsed
    case .help(let text): throw UsageError("unexpected help: \(text)", command: [])
    }
}

@Test func parsesNestedCommandOptionsFlagsAndArguments() throws {
    let parsed = try run(["campaign", "create", "--tenant", "acme", "--limit=10", "--json", "spring", "hello"])
    #expect(parsed.path == ["campaign", "create"])
    #expect(parsed.value("tenant") == "acme")
    #expect(try parsed.integer("limit", in: 1...100) == 10)
    #expect(parsed.flag("json"))
    #expect(!parsed.flag("other"))
    #expect(parsed.arguments == ["spring", "hello"])
    #expect(parsed.value("format") == "table")
}

@Test func environmentFillsInWhenTheOptionIsAbsentButTheFlagWins() throws {
    let fromEnv = try run(["campaign", "create", "x"], env: ["TOOL_ADMIN_KEY": "k1"])
    #expect(fromEnv.value("admin-key") == "k1")
    let given = try run(["campaign", "create", "--admin-key", "k2", "x"], env: ["TOOL_ADMIN_KEY": "k1"])
    #expect(given.value("admin-key") == "k2")
}

@Test func repeatableOptionsKeepEveryValueInOrder() throws {
    let parsed = try run(["campaign", "create", "--listen", "unix:/a", "--listen", "tcp:127.0.0.1:1", "x"])
    #expect(parsed.values("listen") == ["unix:/a", "tcp:127.0.0.1:1"])
}

@Test(arguments: [
    (["campaign", "nope"], "unknown command 'nope'"),
    (["campaign", "create", "--bogus", "x"], "unknown option '--bogus'"),
    (["campaign", "create", "--tenant"], "--tenant needs a value"),
    (["campaign", "create", "--json=yes", "x"], "--json takes no value"),
    (["campaign", "create"], "missing argument <id>"),
    (["campaign", "create", "a", "b", "c"], "unexpected argument 'c'"),
    (["campaign", "create", "--tenant", "a", "--tenant", "b", "x"], "--tenant given more than once"),
])
func usageErrorsSayWhatIsWrong(argv: [String], message: String) {
    #expect(throws: UsageError.self) { try spec.parse(argv, environment: [:]) }
    do {
        _ = try spec.parse(argv, environment: [:])
    } catch {
        #expect(error.message.hasPrefix(message), "\(error.message)")
    }
}

@Test func integerOptionsAreRangeChecked() throws {
    let parsed = try run(["campaign", "create", "--limit", "0", "x"])
    #expect(throws: UsageError.self) { try parsed.integer("limit", in: 1...100) }
    let notNumber = try run(["campaign", "create", "--limit", "ten", "x"])
    #expect(throws: UsageError.self) { try notNumber.integer("limit") }
}

@Test func helpIsGeneratedForEveryLevel() throws {
    guard case .help(let top) = try spec.parse([], environment: [:]) else {
        Issue.record("expected help")
        return
    }
    #expect(top.contains("USAGE: tool <command>"))
    #expect(top.contains("  campaign"))
    guard case .help(let leaf) = try spec.parse(["campaign", "create", "--help"], environment: [:]) else {
        Issue.record("expected help")
        return
    }
    #expect(
        leaf == """
            OVERVIEW: Create a campaign.

            USAGE: tool campaign create [options] <id> [<note>]

            ARGUMENTS:
              <id>    The campaign id.
              <note>  A note.

            OPTIONS:
              --tenant <SLUG>    The tenant.
              --limit <N>        Total limit.
              --listen <ADDR>    Where to listen. (repeatable)
              --admin-key <KEY>  Admin key. (env: TOOL_ADMIN_KEY)
              --format <F>       Output format. (default: table)
              --json             Print JSON.
              -h, --help         Show help information.

            """)
}

@Test func progressBarRendersProportionally() {
    let bar = ProgressBar(total: 200, label: "codes", enabled: false)
    #expect(bar.render(0) == "codes [..............................] 0% (0/200)")
    #expect(bar.render(100) == "codes [###############...............] 50% (100/200)")
    #expect(bar.render(500) == "codes [##############################] 100% (200/200)")
}
