import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// The change feed's bounded buffer, as a pure value: it never drops a change silently.
@Suite("Change buffer")
struct ChangeBufferTests {
    static let a = UUID(uuidString: "00000000-0000-0000-0000-00000000000a")!
    static let b = UUID(uuidString: "00000000-0000-0000-0000-00000000000b")!

    static func drain(_ buffer: inout ChangeBuffer) -> [StoreChange] {
        var out: [StoreChange] = []
        while let change = buffer.pop() { out.append(change) }
        return out
    }

    @Test func deliversInOrderWithinCapacity() {
        var buffer = ChangeBuffer(capacity: 3)
        buffer.push(.catalogOrSigningKeys(tenant: Self.a))
        buffer.push(.customer(tenant: Self.a, customerId: "c1"))
        buffer.push(.catalogOrSigningKeys(tenant: Self.b))
        #expect(buffer.count == 3)
        #expect(
            Self.drain(&buffer) == [
                .catalogOrSigningKeys(tenant: Self.a), .customer(tenant: Self.a, customerId: "c1"),
                .catalogOrSigningKeys(tenant: Self.b),
            ])
        #expect(buffer.overflows == 0)
        #expect(buffer.pop() == nil)
    }

    @Test func aChangeAlreadyQueuedIsNotQueuedTwice() {
        var buffer = ChangeBuffer(capacity: 2)
        for _ in 0..<10 { buffer.push(.catalogOrSigningKeys(tenant: Self.a)) }
        buffer.push(.customer(tenant: Self.a, customerId: "c1"))
        #expect(buffer.overflows == 0)
        #expect(
            Self.drain(&buffer) == [.catalogOrSigningKeys(tenant: Self.a), .customer(tenant: Self.a, customerId: "c1")])
        // Once delivered, the same change queues again.
        buffer.push(.catalogOrSigningKeys(tenant: Self.a))
        #expect(Self.drain(&buffer) == [.catalogOrSigningKeys(tenant: Self.a)])
    }

    @Test func overflowReplacesTheQueueWithOneMarker() {
        var buffer = ChangeBuffer(capacity: 2)
        buffer.push(.customer(tenant: Self.a, customerId: "c1"))
        buffer.push(.customer(tenant: Self.a, customerId: "c2"))
        buffer.push(.customer(tenant: Self.a, customerId: "c3"))
        #expect(buffer.overflows == 1)
        #expect(buffer.count == 1)
        // While the marker waits, later changes add nothing: the marker covers them.
        for i in 4..<100 { buffer.push(.customer(tenant: Self.a, customerId: "c\(i)")) }
        #expect(buffer.overflows == 1)
        #expect(Self.drain(&buffer) == [.mayHaveMissedChanges(.overflow)])
        // After it was delivered, changes queue normally again.
        buffer.push(.customer(tenant: Self.b, customerId: "x"))
        #expect(Self.drain(&buffer) == [.customer(tenant: Self.b, customerId: "x")])
    }

    @Test func aMarkerSupersedesWhatIsQueuedAndTheFirstMarkerStays() {
        var buffer = ChangeBuffer(capacity: 8)
        buffer.push(.customer(tenant: Self.a, customerId: "c1"))
        buffer.push(.mayHaveMissedChanges(.reconnected))
        buffer.push(.mayHaveMissedChanges(.overflow))
        buffer.push(.catalogOrSigningKeys(tenant: Self.a))
        #expect(Self.drain(&buffer) == [.mayHaveMissedChanges(.reconnected)])
    }

    @Test func theLatestConnectionMarkerWinsAndLesserMarkersAddNothing() {
        var buffer = ChangeBuffer(capacity: 8)
        buffer.push(.customer(tenant: Self.a, customerId: "c1"))
        buffer.push(.mayHaveMissedChanges(.connectionLost))
        buffer.push(.mayHaveMissedChanges(.overflow))
        #expect(Self.drain(&buffer) == [.mayHaveMissedChanges(.connectionLost)])
        // Lost, then back before the consumer looked: it learns that the feed listens again.
        buffer.push(.mayHaveMissedChanges(.connectionLost))
        buffer.push(.mayHaveMissedChanges(.reconnected))
        #expect(Self.drain(&buffer) == [.mayHaveMissedChanges(.reconnected)])
        // Back, then lost again: it learns that the feed does not listen.
        buffer.push(.mayHaveMissedChanges(.reconnected))
        buffer.push(.mayHaveMissedChanges(.connectionLost))
        #expect(Self.drain(&buffer) == [.mayHaveMissedChanges(.connectionLost)])
        buffer.push(.mayHaveMissedChanges(.overflow))
        buffer.push(.mayHaveMissedChanges(.reconnected))
        #expect(Self.drain(&buffer) == [.mayHaveMissedChanges(.reconnected)])
    }

    @Test func capacityOneStillNeverLosesAChange() {
        var buffer = ChangeBuffer(capacity: 1)
        buffer.push(.catalogOrSigningKeys(tenant: Self.a))
        buffer.push(.catalogOrSigningKeys(tenant: Self.b))
        #expect(Self.drain(&buffer) == [.mayHaveMissedChanges(.overflow)])
        buffer.push(.catalogOrSigningKeys(tenant: Self.b))
        #expect(Self.drain(&buffer) == [.catalogOrSigningKeys(tenant: Self.b)])
    }

    @Test func longRunsKeepOrder() {
        var buffer = ChangeBuffer(capacity: 5_000)
        var expected: [StoreChange] = []
        var delivered: [StoreChange] = []
        for i in 0..<4_000 {
            let change = StoreChange.customer(tenant: Self.a, customerId: "c\(i)")
            buffer.push(change)
            expected.append(change)
            if i % 3 == 0, let next = buffer.pop() { delivered.append(next) }
        }
        delivered += Self.drain(&buffer)
        #expect(delivered == expected)
    }

    @Test(arguments: [
        ("offergate_catalog", "00000000-0000-0000-0000-00000000000a", StoreChange.catalogOrSigningKeys(tenant: a)),
        ("offergate_customer", "00000000-0000-0000-0000-00000000000a:c:1", .customer(tenant: a, customerId: "c:1")),
        ("offergate_customer", "00000000-0000-0000-0000-00000000000a:", .customer(tenant: a, customerId: "")),
        ("offergate_catalog", "not-a-uuid", .mayHaveMissedChanges(.unrecognised)),
        ("offergate_customer", "00000000-0000-0000-0000-00000000000a", .mayHaveMissedChanges(.unrecognised)),
        ("offergate_customer", "x:c1", .mayHaveMissedChanges(.unrecognised)),
        ("elsewhere", "00000000-0000-0000-0000-00000000000a", .mayHaveMissedChanges(.unrecognised)),
    ])
    func payloads(channel: String, payload: String, expected: StoreChange) {
        #expect(ChangeFeed.change(channel: channel, payload: payload) == expected)
    }
}

/// The feed against a real PostgreSQL: triggers announce writes, a flood past the buffer turns into one marker.
@Suite("Change feed")
struct ChangeFeedTests {
    @Test func announcesWritesAndOverflowsIntoAMarker() async throws {
        try await RepositoryTests.withStore { database in
            let feed = ChangeFeed(database: database, bufferSize: 4)
            let running = Task { try await feed.run() }
            try await feed.waitUntilListening()
            let changes = feed.changes.makeAsyncIterator()
            #expect(await nextChange(changes) == .mayHaveMissedChanges(.started))

            let tenant = try await database.tenants.create(
                slug: "feed", bundleId: "com.example.feed", name: nil, apiKey: RepositoryTests.key("ffffffffffff"))
            try await database.pool.query(
                """
                INSERT INTO subscription_groups (tenant_id, group_id, name) VALUES (\(tenant.id), 'g', 'G')
                """)
            #expect(await nextChange(changes) == .catalogOrSigningKeys(tenant: tenant.id))
            // The tenant's and the group's announcements may come in one read (one change: not queued twice) or in
            // two. Notifications arrive in commit order, so once `first` is taken every earlier one has been read.
            try await database.pool.query("SELECT pg_notify('offergate_customer', \(tenant.id.uuidString + ":first"))")
            var change = await nextChange(changes)
            while let other = change, other == .catalogOrSigningKeys(tenant: tenant.id) {
                change = await nextChange(changes)
            }
            #expect(change == .customer(tenant: tenant.id, customerId: "first"))

            // Nobody consumes while ten distinct changes arrive: the buffer of four overflows, once (the marker
            // covers the rest). All ten must have been read before the marker is taken: a burst may come in more
            // than one read, and what arrives after the marker was taken would overflow again.
            let read = feed.notificationCount
            try await database.pool.query(
                """
                SELECT pg_notify('offergate_customer', \(tenant.id.uuidString) || ':c' || n)
                FROM generate_series(1, 10) n
                """)
            #expect(await eventually { feed.notificationCount == read + 10 })
            #expect(feed.overflows == 1)
            #expect(await nextChange(changes) == .mayHaveMissedChanges(.overflow))
            try await database.pool.query("SELECT pg_notify('offergate_customer', \(tenant.id.uuidString + ":late"))")
            #expect(await nextChange(changes) == .customer(tenant: tenant.id, customerId: "late"))

            running.cancel()
            try await running.value
            #expect(await nextChange(changes) == nil)
        }
    }

    @Test func theFirstConnectFailingFailsRunAndTheWait() async throws {
        let database = try OfferDatabase.connect(url: "host=/nonexistent/socket-dir user=postgres dbname=postgres")
        let feed = ChangeFeed(database: database)
        let running = Task { try await feed.run() }
        await #expect(throws: StoreError.self) { try await feed.waitUntilListening() }
        await #expect(throws: StoreError.self) { try await running.value }
        let changes = feed.changes.makeAsyncIterator()
        #expect(await nextChange(changes) == nil)
    }
}

/// The change feed tells its consumer when the server went away and came back.
@Suite("Change feed reconnect")
struct ChangeFeedReconnectTests {
    static let server = TestServer.restartable("store-change-feed")

    @Test func aRestartDeliversReconnectedAndChangesFlowAgain() async throws {
        try await TestDatabase.with(on: Self.server) { configuration in
            let database = try OfferDatabase.connect(url: configuration.conninfo, maxConnections: 1)
            let feed = ChangeFeed(database: database, reconnectDelay: .milliseconds(100))
            let running = Task { try await feed.run() }
            try await feed.waitUntilListening()
            let changes = feed.changes.makeAsyncIterator()
            #expect(await nextChange(changes) == .mayHaveMissedChanges(.started))
            try await Self.server.pg("restart")
            // The loss is announced as soon as it is seen; if the feed reconnected before the consumer looked, the
            // reconnect marker replaced it (both say "drop everything"; the latest says the feed listens again).
            var change = await nextChange(changes)
            if change == .mayHaveMissedChanges(.connectionLost) { change = await nextChange(changes) }
            #expect(change == .mayHaveMissedChanges(.reconnected))
            let tenant = UUID()
            try await database.pool.query(
                "SELECT pg_notify('offergate_catalog', \(tenant.uuidString.lowercased()))")
            #expect(await nextChange(changes) == .catalogOrSigningKeys(tenant: tenant))
            running.cancel()
            try await running.value
            await database.close()
        }
    }
}

/// The iterator's next change, or nil when none came within `timeout` (tests never wait without a deadline).
func nextChange(
    _ iterator: ChangeFeed.Changes.Iterator, within timeout: Duration = .seconds(20)
) async -> StoreChange? {
    await withTaskGroup(of: StoreChange?.self) { group in
        group.addTask {
            var copy = iterator
            return await copy.next()
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
