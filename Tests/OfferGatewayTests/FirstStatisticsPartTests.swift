import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// The gateway's `FirstStatistics` part: a running gateway analyses a table of a fresh database once it grew,
/// without waiting for autovacuum (which would set `last_autoanalyze`, not `last_analyze`).
@Suite("First statistics part")
struct FirstStatisticsPartTests {
    @Test("a running gateway takes a fresh table's first statistics once it has grown, and logs which")
    func gatewayAnalysesAGrownTable() async throws {
        try await TestGateway.with { gw in
            try await gw.database.pool.withConnection { connection in
                // Autovacuum off for the table: its own analysis (`last_autoanalyze`, which the part rightly skips)
                // could win the race under a loaded suite, where its launcher visits each test database often.
                try await connection.query("ALTER TABLE redemptions SET (autovacuum_enabled = off)")
                try await connection.query("SET session_replication_role = replica")
                try await connection.query(
                    """
                    INSERT INTO redemptions (tenant_id, redemption_id, campaign_id, code, one_time, customer_id)
                    SELECT gen_random_uuid(), gen_random_uuid(), 'hot', 'HOT', false, 'customer' || n
                    FROM generate_series(1, 600) AS n
                    """)
            }
            let analysed = try await eventually {
                try await gw.count(
                    """
                    SELECT count(*)::int8 FROM pg_stat_user_tables
                    WHERE relname = 'redemptions' AND last_analyze IS NOT NULL
                    """) == 1
            }
            #expect(analysed)
            #expect(
                try await eventually {
                    gw.logs.all.contains { $0.contains("first statistics taken") && $0.contains("redemptions") }
                })
        }
    }
}
