import Foundation
import OfferTestSupport
import Postgres
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A child the tests or the gateway start must not inherit the parent's open descriptors: a pipe or socket held by a
/// long-lived child (a PostgreSQL server, a gateway) stays open after its owner closed it, so the reader at its other
/// end waits for an EOF that comes only when that child exits (this stalled whole test runs: a test's pipe was kept
/// open by servers other tests had started meanwhile).
@Suite("Inherited descriptors")
struct InheritedDescriptorTests {
    /// A pipe created the way Foundation's `Pipe` and plain `pipe(2)` create one: not close-on-exec.
    static func inheritablePipe() throws -> (fds: [Int32], name: String) {
        var fds: [Int32] = [-1, -1]
        try #require(pipe(&fds) == 0)
        #expect(fcntl(fds[1], F_GETFD) & FD_CLOEXEC == 0)
        let name = try #require(link("/proc/self/fd/\(fds[1])"))
        #expect(name.hasPrefix("pipe:["))
        return (fds, name)
    }

    static func link(_ path: String) -> String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: path)
    }

    /// What `pid`'s descriptors point to.
    static func descriptors(of pid: String) -> [String] {
        let dir = "/proc/\(pid)/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return entries.compactMap { link("\(dir)/\($0)") }
    }

    @Test func aSpawnedChildDoesNotHoldTheParentsPipe() async throws {
        let (fds, name) = try Self.inheritablePipe()
        defer { for fd in fds { close(fd) } }
        let outcome = try await ChildProcess.run(
            "/bin/sh", ["-c", "for f in /proc/$$/fd/*; do echo \"${f##*/} $(readlink $f)\"; done"],
            environment: ["PATH": "/usr/bin:/bin"])
        #expect(outcome.status == 0, "\(outcome)")
        #expect(outcome.stdout.contains("1 /"), "the listing must show stdout at least: \(outcome.stdout)")
        #expect(!outcome.stdout.contains(name), "\(outcome.stdout)")
    }

    @Test func theEmbeddedServerHoldsNoDescriptorOfTheProcessThatStartedIt() async throws {
        let (fds, name) = try Self.inheritablePipe()
        defer { for fd in fds { close(fd) } }
        let base = try EmbeddedPostgresTests.makeBase()
        defer { try? FileManager.default.removeItem(at: base) }
        let cluster = try EmbeddedPostgres(baseDirectory: base)
        defer { try? cluster.stop() }
        try cluster.start()
        let pidFile = try String(
            contentsOf: cluster.dataDirectory.appendingPathComponent("postmaster.pid"), encoding: .utf8)
        let postmaster = try #require(pidFile.split(separator: "\n").first.map(String.init))
        let held = Self.descriptors(of: postmaster)
        #expect(!held.isEmpty, "no descriptors read for the postmaster \(postmaster)")
        #expect(!held.contains(name), "\(held)")
        try cluster.stop()
    }
}
