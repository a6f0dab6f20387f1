import Foundation
import JSONRPC
import OfferCrypto
import OfferGateway
import OfferTestSupport
import Postgres
import Testing

/// Rotating the master key: gateways started with the new key (and the old one as "previous") re-seal every signing
/// key at start; signing keeps working throughout, and afterwards the old key is no longer needed.
@Suite("Master key rotation")
struct MasterKeyRotationTests {
    /// Asks for an intro-eligibility JWS: it only succeeds when the tenant's signing key can be unsealed.
    static func sign(_ gateway: TestGateway, tenantKey: String) async throws -> String {
        let client = try await gateway.tenant(tenantKey)
        let result = try await client.call(
            method: "offers.introEligibility",
            params: ["customerId": "c-rotation", "productId": "monthly", "transactionId": "2000000000000001"])
        client.close()
        return try #require(result["compactJWS"]?.stringValue)
    }

    @Test func resealingMovesEveryKeyToTheNewMasterKeyAndKeepsThemUsable() async throws {
        let old = try MasterKey.generate()
        let new = try MasterKey.generate()
        try await TestDatabase.with { configuration in
            // A gateway under the old key: two tenants, each with a signing key (one also with a standby key).
            let first = try await TestGateway.start(configuration: configuration, keyring: MasterKeyring(current: old))
            let admin = try await first.admin()
            var tenantKeys: [String: String] = [:]
            var publicKeys: [String: PublicKey] = [:]
            for slug in ["rot-a", "rot-b"] {
                tenantKeys[slug] = try await first.createTenant(slug, admin: admin)
                try await first.upsertStandardCatalog(tenant: slug, admin: admin)
                publicKeys[slug] = try await first.importKey(tenant: slug, admin: admin).publicKey
            }
            try await first.importKey(tenant: "rot-a", keyId: "KEY2ABCDEF", admin: admin)
            publicKeys["rot-a"] = nil  // rot-a now signs with KEY2ABCDEF
            admin.close()
            #expect(try await first.count("SELECT count(*) FROM signing_keys WHERE master_key_id = \(old.idHex)") == 3)
            await first.stop()

            // Rolling restart: the new key current, the old one still readable. The service re-seals by itself.
            let second = try await TestGateway.start(
                configuration: configuration, keyring: MasterKeyring(current: new, previous: [old]))
            let resealed = await eventually(timeout: .seconds(30)) {
                (try? await second.count("SELECT count(*) FROM signing_keys WHERE master_key_id = \(new.idHex)")) == 3
            }
            #expect(resealed)
            #expect(try await second.service.resealSigningKeys() == 0)  // nothing left, and idempotent
            let jws = try await Self.sign(second, tenantKey: try #require(tenantKeys["rot-b"]))
            #expect(try #require(publicKeys["rot-b"]).verifyJWS(compact: jws))
            await second.stop()

            // Old key dropped: everything still opens under the new key alone…
            let third = try await TestGateway.start(configuration: configuration, keyring: MasterKeyring(current: new))
            for slug in ["rot-a", "rot-b"] {
                _ = try await Self.sign(third, tenantKey: try #require(tenantKeys[slug]))
            }
            await third.stop()

            // …and a gateway that only knows the old key can no longer open them (internal error, nothing leaked).
            let stale = try await TestGateway.start(configuration: configuration, keyring: MasterKeyring(current: old))
            let client = try await stale.tenant(try #require(tenantKeys["rot-b"]))
            let error = await expectRPCError(-32603) {
                try await client.call(
                    method: "offers.introEligibility",
                    params: ["customerId": "c-rotation", "productId": "monthly", "transactionId": "2000000000000001"])
            }
            #expect(error?.message == "internal error")
            client.close()
            await stale.stop()
        }
    }
}
