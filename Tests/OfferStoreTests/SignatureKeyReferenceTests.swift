import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// A ledger row's signing key (migration 0012): checked once per statement instead of by a row-level foreign key,
/// with what the key guaranteed kept: a signature names a key of its own tenant, a key with signatures (or its
/// tenant) cannot be removed, re-keyed or truncated away, and a signature's tenant and key never change, also
/// against a concurrent transaction.
@Suite("Signature key references")
struct SignatureKeyReferenceTests {
    struct Seeded {
        let db: OfferDatabase
        let tenant: UUID
        let other: UUID

        var t: String { tenant.uuidString.lowercased() }

        var probe: SQLProbe { SQLProbe(db: db) }

        func count(_ sql: String) async throws -> Int64 { try await probe.count(sql) }

        /// Runs `sql` (one statement) and returns the SQLSTATE it failed with, or nil when it succeeded.
        func failure(_ sql: String) async -> String? { await probe.failure(sql) }

        func signature(_ customer: String, key: String) -> IssuedSignature {
            IssuedSignature(
                nonce: UUID(), format: .jws, keyId: key, customerId: customer, productId: "monthly",
                offerId: "promo", appAccountToken: nil, transactionId: nil, issuedAt: Date())
        }

        /// One batch through the ledger's own statement, as the gateway's group commit writes it.
        func record(_ rows: [(tenant: UUID, signature: IssuedSignature)]) async throws {
            try await db.signatures.recordBatch(rows, retentionAnswers: [])
        }

        func signatures() async throws -> Int64 { try await count("SELECT count(*) FROM issued_signatures") }
    }

    /// Tenant `acme` with keys K1 (one signature) and K2 (none); tenant `other` with key K9.
    static func withSeeded(_ body: (Seeded) async throws -> Void) async throws {
        try await RepositoryTests.withStore { db in
            let tenant = try await db.tenants.create(
                slug: "acme", bundleId: "com.acme", name: nil, apiKey: RepositoryTests.key("aaaaaaaaaaaa"))
            let other = try await db.tenants.create(
                slug: "other", bundleId: "com.o", name: nil, apiKey: RepositoryTests.key("dddddddddddd"))
            for (owner, keyId) in [(tenant.id, "K1"), (tenant.id, "K2"), (other.id, "K9")] {
                try await db.signingKeys.importKey(
                    tenant: owner, keyId: keyId, issuerId: nil, sealedPrivateKey: [1, 2, 3], masterKeyId: "m",
                    publicKeyPEM: "pem")
            }
            let seeded = Seeded(db: db, tenant: tenant.id, other: other.id)
            try await seeded.record([(tenant.id, seeded.signature("c1", key: "K1"))])
            #expect(try await seeded.signatures() == 1)
            try await body(seeded)
        }
    }

    @Test("a batch naming another tenant's key, or no key at all, is refused whole and changes nothing")
    func batchWithForeignKeyIsRefused() async throws {
        try await Self.withSeeded { s in
            for bad in ["K9", "NOSUCHKEY"] {
                do {
                    // Two good rows around the bad one: the statement fails as a whole.
                    try await s.record([
                        (s.tenant, s.signature("c7", key: "K1")), (s.tenant, s.signature("c8", key: bad)),
                        (s.tenant, s.signature("c9", key: "K2")),
                    ])
                    Issue.record("a signature of acme with key \(bad) must be refused")
                } catch StoreError.database(let failure) {
                    #expect(failure.sqlState == "23503", "\(failure)")
                }
            }
            #expect(try await s.signatures() == 1)
            // Rows of two tenants in one batch, each with its own key, are fine.
            try await s.record([(s.tenant, s.signature("c7", key: "K2")), (s.other, s.signature("o1", key: "K9"))])
            #expect(try await s.signatures() == 3)
        }
    }

    @Test("a key with signatures, or its tenant, cannot be removed, re-keyed or truncated away; others can")
    func usedKeysStay() async throws {
        try await Self.withSeeded { s in
            let t = s.t
            for sql in [
                "DELETE FROM signing_keys WHERE tenant_id = '\(t)' AND key_id = 'K1'",
                "DELETE FROM signing_keys WHERE tenant_id = '\(t)'",
                "UPDATE signing_keys SET key_id = 'K3' WHERE tenant_id = '\(t)' AND key_id = 'K1'",
                "DELETE FROM tenants WHERE tenant_id = '\(t)'",
                "TRUNCATE signing_keys",
            ] {
                #expect(await s.failure(sql) == "23503", "\(sql)")
            }
            let kept = try await s.count("SELECT count(*) FROM signing_keys WHERE tenant_id = '\(t)'")
            #expect(kept == 2)
            // What removes no used key still works: a state change, and the unused key's removal.
            #expect(
                await s.failure(
                    "UPDATE signing_keys SET state = 'retired', retired_at = now() WHERE tenant_id = '\(t)' AND key_id = 'K1'"
                ) == nil)
            #expect(await s.failure("DELETE FROM signing_keys WHERE tenant_id = '\(t)' AND key_id = 'K2'") == nil)
            let left = try await s.count("SELECT count(*) FROM signing_keys WHERE tenant_id = '\(t)'")
            #expect(left == 1)
        }
    }

    @Test("a signature's tenant and key never change; its other columns do")
    func signatureReferencesAreFixed() async throws {
        try await Self.withSeeded { s in
            for change in ["key_id = 'K2'", "tenant_id = '\(s.other.uuidString.lowercased())', key_id = 'K9'"] {
                let sql = "UPDATE issued_signatures SET \(change) WHERE customer_id = 'c1'"
                #expect(await s.failure(sql) == "23000", "\(sql)")
            }
            let unchanged = try await s.count("SELECT count(*) FROM issued_signatures WHERE key_id = 'K1'")
            #expect(unchanged == 1)
            let purchased =
                "UPDATE issued_signatures SET purchased_at = now(), purchase_transaction_id = 't1' WHERE customer_id = 'c1'"
            #expect(await s.failure(purchased) == nil)
        }
    }

    @Test(
        "removing a key waits for an open signature naming it and then fails; a signature of a key being removed fails")
    func concurrentRemovalAndSignature() async throws {
        try await Self.withSeeded { s in
            let t = s.t
            let insert: @Sendable (String) -> String = { key in
                """
                INSERT INTO issued_signatures (tenant_id, nonce, format, key_id, customer_id, product_id, issued_at)
                VALUES ('\(t)', gen_random_uuid(), 'v1', '\(key)', 'c3', 'monthly', now())
                """
            }
            // 1. A signature naming K2 open in one transaction; K2's removal in another waits for it, and once the
            //    signature commits, is refused.
            try await s.db.pool.withConnection { holder in
                try await holder.query("BEGIN")
                try await holder.query(PostgresQuery(unsafeSQL: insert("K2")))
                let removal = Task {
                    await s.failure("DELETE FROM signing_keys WHERE tenant_id = '\(t)' AND key_id = 'K2'")
                }
                #expect(try await s.probe.waitsForALock("DELETE FROM signing_keys"))
                try await holder.query("COMMIT")
                #expect(await removal.value == "23503")
            }
            let n1 = try await s.count("SELECT count(*) FROM signing_keys WHERE key_id = 'K2'")
            #expect(n1 == 1)
            // 2. The other order: the removal of an unused key open first; a signature naming it waits for it, and
            //    once the removal commits, is refused.
            try await s.db.signingKeys.importKey(
                tenant: s.tenant, keyId: "K4", issuerId: nil, sealedPrivateKey: [1], masterKeyId: "m",
                publicKeyPEM: "p")
            try await s.db.pool.withConnection { remover in
                try await remover.query("BEGIN")
                try await remover.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM signing_keys WHERE tenant_id = '\(t)' AND key_id = 'K4'"))
                let signature = Task { await s.failure(insert("K4")) }
                #expect(try await s.probe.waitsForALock("INSERT INTO issued_signatures"))
                try await remover.query("COMMIT")
                #expect(await signature.value == "23503")
            }
            let n0 = try await s.count("SELECT count(*) FROM issued_signatures WHERE key_id = 'K4'")
            #expect(n0 == 0)
        }
    }
}
