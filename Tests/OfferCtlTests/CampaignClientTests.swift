// The campaign commands' client side (params sent, rendering, paging, CSV, progress notifications) against a
// stand-in server that answers in API.md's shapes. The same commands against the real gateway are in
// CampaignCommandTests.swift (enabled once campaigns.* land).
import Foundation
import JSONRPC
import OfferTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct CampaignClientTests {
    static let adminKey = "fake-admin-key"

    func ctl(_ address: String, _ arguments: [String]) async throws -> Outcome {
        try await Spawn.offerctl(
            arguments + ["--connect", address], environment: ["OFFERGATE_ADMIN_KEY": Self.adminKey])
    }

    @Test func createSendsAPIParamsAndPrintsWarnings() async throws {
        let fake = FakeCampaignGateway(adminKey: Self.adminKey)
        try await fake.serve { address in
            let outcome = try await ctl(
                address,
                [
                    "campaign", "create", "acme", "spring", "--offer", "code-y", "--kind", "custom", "--code",
                    "SPRING26",
                    "--limit", "500", "--per-customer", "2", "--starts", "2026-12-01T00:00:00Z",
                    "--expires", "2027-01-01T00:00:00Z", "--eligibility", "new,expired",
                ])
            #expect(outcome.status == 0, "\(outcome)")
            #expect(outcome.stdout == "Created campaign spring of tenant acme (offer code-y, custom).\n")
            #expect(
                outcome.stderr == """
                    warning: Apple allows at most 150,000 one-time codes per offer a quarter
                    warning: custom codes are capped at 1,000,000 redemptions

                    """)
            let sent = try #require(fake.requests("campaigns.create").first?.params)
            #expect(
                sent == [
                    "tenant": "acme", "campaignId": "spring", "offerId": "code-y", "kind": "custom", "code": "SPRING26",
                    "totalLimit": 500, "perCustomerLimit": 2, "startsAt": "2026-12-01T00:00:00Z",
                    "expiresAt": "2027-01-01T00:00:00Z", "eligibility": ["new", "expired"],
                ])

            // Only what was given is sent; --json keeps stdout machine-readable, warnings stay on stderr.
            let minimal = try await ctl(
                address, ["campaign", "create", "acme", "launch", "--offer", "code-y", "--kind", "oneTime", "--json"])
            #expect(minimal.status == 0, "\(minimal)")
            #expect(try minimal.json()["campaignId"]?.stringValue == "launch")
            #expect(minimal.stderr.hasPrefix("warning: Apple allows"))
            #expect(
                fake.requests("campaigns.create").last?.params
                    == ["tenant": "acme", "campaignId": "launch", "offerId": "code-y", "kind": "oneTime"])
        }
    }

    @Test func listShowStatsDeactivate() async throws {
        let campaign: JSONValue = [
            "campaignId": "spring", "offerId": "code-y", "kind": "custom", "state": "active", "totalLimit": nil,
            "perCustomerLimit": 1, "redeemed": 3, "startsAt": "2026-12-01T00:00:00Z", "expiresAt": nil,
        ]
        let fake = FakeCampaignGateway(adminKey: Self.adminKey, campaigns: [campaign])
        try await fake.serve { address in
            let list = try await ctl(address, ["campaign", "list", "acme"])
            #expect(list.status == 0, "\(list)")
            #expect(
                list.stdout == """
                    CAMPAIGN  OFFER   KIND    STATE   LIMIT  PER CUSTOMER  REDEEMED  STARTS                EXPIRES
                    spring    code-y  custom  active  -      1             3         2026-12-01T00:00:00Z  -

                    """)

            let stats = try await ctl(address, ["campaign", "stats", "acme", "spring"])
            #expect(stats.status == 0, "\(stats)")
            #expect(
                stats.stdout == """
                    state            active
                    total limit      unlimited
                    redeemed         3
                    remaining        unlimited
                    rolled back      1
                    codes generated  5
                    codes redeemed   2

                    """)
            #expect(fake.requests("campaigns.stats").last?.params == ["tenant": "acme", "campaignId": "spring"])

            let show = try await ctl(address, ["campaign", "show", "acme", "spring"])
            #expect(show.status == 0, "\(show)")
            #expect(
                show.stdout == """
                    campaign         spring
                    tenant           acme
                    offer            code-y
                    kind             custom
                    state            active
                    limit            unlimited
                    per customer     1
                    starts           2026-12-01T00:00:00Z
                    expires          -
                    total limit      unlimited
                    redeemed         3
                    remaining        unlimited
                    rolled back      1
                    codes generated  5
                    codes redeemed   2

                    """)
            let showJSON = try await ctl(address, ["campaign", "show", "acme", "spring", "--json"])
            let shown = try showJSON.json()
            #expect(shown["campaign"] == campaign)
            #expect(shown["stats"]?["codesGenerated"]?.int64Value == 5)

            let missing = try await ctl(address, ["campaign", "stats", "acme", "missing"])
            #expect(missing.status == 1)
            #expect(missing.stderr == "offerctl: no campaign 'missing' (code -32004, reason unknown_campaign)\n")

            let off = try await ctl(address, ["campaign", "deactivate", "acme", "spring"])
            #expect(off.status == 0, "\(off)")
            #expect(off.stdout == "Deactivated campaign spring of tenant acme.\n")
            #expect(fake.requests("campaigns.deactivate").count == 1)
        }
    }

    @Test func generateWithAndWithoutProgress() async throws {
        let fake = FakeCampaignGateway(adminKey: Self.adminKey)
        try await fake.serve { address in
            let loud = try await ctl(
                address, ["campaign", "generate", "acme", "launch", "--count", "1000", "--pattern", "XXXX-XXXX"])
            #expect(loud.status == 0, "\(loud)")
            #expect(loud.stdout == "Generated 1000 codes for campaign launch.\n")
            // stderr is a file here, not a terminal: no progress bar drawn.
            #expect(loud.stderr == "")
            #expect(
                fake.requests("campaigns.generateCodes").last?.params
                    == ["tenant": "acme", "campaignId": "launch", "count": 1000, "pattern": "XXXX-XXXX"])

            let quiet = try await ctl(address, ["campaign", "generate", "acme", "quiet", "--count", "7", "--json"])
            #expect(quiet.status == 0, "\(quiet)")
            #expect(try quiet.json() == ["generated": 7])
        }
    }

    static func codes(_ count: Int) -> [JSONValue] {
        (0..<count).map { i in
            i == 1
                ? ["code": "ODD,\"CODE\"", "state": "redeemed", "redeemedAt": "2026-11-30T12:00:00Z"]
                : ["code": .string("CODE\(i)"), "state": "available", "redeemedAt": nil]
        }
    }

    static let expectedCSV = #"""
        code,state,redeemed_at
        CODE0,available,
        "ODD,""CODE""",redeemed,2026-11-30T12:00:00Z
        CODE2,available,
        CODE3,available,
        CODE4,available,

        """#

    @Test func exportStreamsPagesAsCSV() async throws {
        let fake = FakeCampaignGateway(adminKey: Self.adminKey, codes: Self.codes(5))
        try await fake.serve { address in
            let outcome = try await ctl(address, ["campaign", "export", "acme", "launch", "--page-size", "2"])
            #expect(outcome.status == 0, "\(outcome)")
            #expect(outcome.stdout == Self.expectedCSV)
            // Three pages, each after the previous page's last code.
            let afters = fake.requests("campaigns.codes").map { $0.params?["after"]?.stringValue }
            #expect(afters == [nil, "ODD,\"CODE\"", "CODE3"])
            #expect(fake.requests("campaigns.codes").allSatisfy { $0.params?["limit"] == 2 })

            // Without a cursor in the answers: pages follow the last code of each full page; a short page ends it.
            let dir = try Paths.scratch()
            defer { try? FileManager.default.removeItem(at: dir) }
            let file = dir.appendingPathComponent("codes.csv").path
            let quiet = try await ctl(
                address, ["campaign", "export", "acme", "quiet", "--page-size", "2", "--output", file])
            #expect(quiet.status == 0, "\(quiet)")
            #expect(quiet.stdout == "")
            #expect(quiet.stderr == "exported 5 codes to \(file)\n")
            #expect(try String(contentsOfFile: file, encoding: .utf8) == Self.expectedCSV)
            let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
            #expect(mode == 0o600)

            let empty = FakeCampaignGateway(adminKey: Self.adminKey)
            try await empty.serve { emptyAddress in
                let none = try await ctl(emptyAddress, ["campaign", "export", "acme", "launch"])
                #expect(none.status == 0, "\(none)")
                #expect(none.stdout == "code,state,redeemed_at\n")
                #expect(empty.requests("campaigns.codes").count == 1)
            }
        }
    }
}

extension CampaignClientTests {
    /// With stderr on a terminal (a pseudo-terminal here), the gateway's progress notifications move a bar.
    @Test func generateDrawsProgressOnATerminal() async throws {
        try Paths.check()
        // posix_openpt/unlockpt/ptsname are not imported by Glibc here: their ioctls on /dev/ptmx are.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        #expect(master >= 0, "cannot open /dev/ptmx")
        guard master >= 0 else { return }
        defer { close(master) }
        var unlock: CInt = 0
        var number: CUnsignedInt = 0
        let unlockPTY: UInt = 0x4004_5431  // TIOCSPTLCK
        let ptyNumber: UInt = 0x8004_5430  // TIOCGPTN
        #expect(ioctl(master, unlockPTY, &unlock) == 0)
        #expect(ioctl(master, ptyNumber, &number) == 0)
        let slave = "/dev/pts/\(number)"
        let fake = FakeCampaignGateway(adminKey: Self.adminKey)
        try await fake.serve { address in
            let dir = try Paths.scratch()
            defer { try? FileManager.default.removeItem(at: dir) }
            var environment = Spawn.baseEnvironment()
            environment["OFFERGATE_ADMIN_KEY"] = Self.adminKey
            let process = try ChildProcess.spawn(
                Paths.offerctl, ["campaign", "generate", "acme", "launch", "--count", "1000", "--connect", address],
                environment: environment, stdout: dir.appendingPathComponent("out").path, stderr: slave)
            let status = await process.wait(timeout: .seconds(30))
            #expect(status == 0)
            // Everything the child wrote is buffered in the terminal: read it without blocking.
            _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(master, &buffer, buffer.count)
                if n <= 0 { break }
                bytes += buffer[0..<n]
            }
            let drawn = String(decoding: bytes, as: UTF8.self)
            #expect(drawn.hasPrefix("\rgenerating [..............................] 0% (0/1000)"), "\(drawn)")
            for step in ["25% (250/1000)", "50% (500/1000)", "75% (750/1000)"] {
                #expect(drawn.contains(step), "\(drawn)")
            }
            #expect(drawn.hasSuffix("\rgenerating [##############################] 100% (1000/1000)\r\n"), "\(drawn)")
        }
    }
}
