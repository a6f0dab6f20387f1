import Foundation
import Postgres

/// An App Store Connect In-App Purchase key as stored: the private key only sealed.
public struct SigningKeyRecord: Sendable, Hashable {
    public enum State: String, Sendable, Hashable, Codable {
        /// Signs new offers (at most one per tenant).
        case active
        /// Kept, not used for new signatures (a newer key was imported).
        case standby
        /// Retired by an operator; kept for audit.
        case retired
    }

    public var tenantId: UUID
    public var keyId: String
    public var issuerId: String?
    public var sealedPrivateKey: [UInt8]
    public var masterKeyId: String
    public var publicKeyPEM: String
    public var state: State
    public var createdAt: Date
    public var retiredAt: Date?
}

/// Tenants' signing keys.
public struct SigningKeyRepository: Sendable {
    let pool: PostgresPool

    /// Stores a new key and makes it the active one (the previously active key goes to standby).
    /// Throws `.conflict` when the tenant already has a key with this id.
    public func importKey(
        tenant: UUID, keyId: String, issuerId: String?, sealedPrivateKey: [UInt8], masterKeyId: String,
        publicKeyPEM: String
    ) async throws(StoreError) {
        do {
            try await pool.withTransaction { tx in
                // One import per tenant at a time: two concurrent imports would both demote the same old key, and
                // the second INSERT would then hit signing_keys_one_active (reported as a false "exists already").
                try await tx.query("SELECT 1 FROM tenants WHERE tenant_id = \(tenant) FOR UPDATE")
                try await tx.query(
                    "UPDATE signing_keys SET state = 'standby' WHERE tenant_id = \(tenant) AND state = 'active'")
                try await tx.query(
                    """
                    INSERT INTO signing_keys
                        (tenant_id, key_id, issuer_id, sealed_private_key, master_key_id, public_key_pem, state)
                    VALUES (\(tenant), \(keyId), \(issuerId), \(sealedPrivateKey), \(masterKeyId), \(publicKeyPEM), 'active')
                    """)
                try await Audit.record(
                    tx, tenant: tenant, actor: "admin", action: "key.import", detail: ["keyId": keyId])
            }
        } catch let error as PostgresError where error.isUniqueViolation {
            throw .conflict("key '\(keyId)' exists already")
        } catch {
            throw StoreError.wrap(error)
        }
    }

    public func list(tenant: UUID) async throws(StoreError) -> [SigningKeyRecord] {
        try await storeCall {
            try await pool.query(
                """
                SELECT tenant_id, key_id, issuer_id, sealed_private_key, master_key_id, public_key_pem, state,
                       created_at, retired_at
                FROM signing_keys WHERE tenant_id = \(tenant) ORDER BY created_at, key_id
                """
            ).map(Self.decode)
        }
    }

    /// The key that signs new offers, if any.
    public func active(tenant: UUID) async throws(StoreError) -> SigningKeyRecord? {
        try await storeCall {
            try await pool.query(
                """
                SELECT tenant_id, key_id, issuer_id, sealed_private_key, master_key_id, public_key_pem, state,
                       created_at, retired_at
                FROM signing_keys WHERE tenant_id = \(tenant) AND state = 'active'
                """, prepared: true
            ).first.map(Self.decode)
        }
    }

    /// Retires a key (idempotent). Throws `.notFound` when the tenant has no such key.
    public func retire(tenant: UUID, keyId: String) async throws(StoreError) {
        try await storeCall {
            try await pool.withTransaction { tx in
                let rows = try await tx.query(
                    """
                    UPDATE signing_keys SET state = 'retired', retired_at = COALESCE(retired_at, now())
                    WHERE tenant_id = \(tenant) AND key_id = \(keyId) RETURNING key_id
                    """)
                guard !rows.isEmpty else { throw StoreError.notFound("key '\(keyId)'") }
                try await Audit.record(
                    tx, tenant: tenant, actor: "admin", action: "key.retire", detail: ["keyId": keyId])
            }
        }
    }

    /// Every sealed key not sealed under `masterKeyId` (for re-sealing after a master key rotation).
    public func sealedUnder(otherThan masterKeyId: String, limit: Int = 1_000) async throws(StoreError)
        -> [SigningKeyRecord]
    {
        try await storeCall {
            try await pool.query(
                """
                SELECT tenant_id, key_id, issuer_id, sealed_private_key, master_key_id, public_key_pem, state,
                       created_at, retired_at
                FROM signing_keys WHERE master_key_id <> \(masterKeyId) LIMIT \(limit)
                """
            ).map(Self.decode)
        }
    }

    /// Replaces a key's sealed bytes, only if it is still sealed under `expectedMasterKeyId` (so two processes
    /// re-sealing at once do not fight). Returns whether this call replaced it.
    @discardableResult
    public func reseal(
        tenant: UUID, keyId: String, expectedMasterKeyId: String, sealedPrivateKey: [UInt8], masterKeyId: String
    ) async throws(StoreError) -> Bool {
        try await storeCall {
            let rows = try await pool.query(
                """
                UPDATE signing_keys SET sealed_private_key = \(sealedPrivateKey), master_key_id = \(masterKeyId)
                WHERE tenant_id = \(tenant) AND key_id = \(keyId) AND master_key_id = \(expectedMasterKeyId)
                """)
            return rows.affectedRows == 1
        }
    }

    static func decode(_ row: PostgresRow) throws -> SigningKeyRecord {
        let (tenant, keyId, issuerId, sealed, masterKeyId, pem, state, createdAt, retiredAt) = try row.decode(
            UUID.self, String.self, String?.self, [UInt8].self, String.self, String.self, String.self, Date.self,
            Date?.self)
        guard let parsedState = SigningKeyRecord.State(rawValue: state) else {
            throw StoreError.corrupt("signing key state '\(state)'")
        }
        return SigningKeyRecord(
            tenantId: tenant, keyId: keyId, issuerId: issuerId, sealedPrivateKey: sealed, masterKeyId: masterKeyId,
            publicKeyPEM: pem, state: parsedState, createdAt: createdAt, retiredAt: retiredAt)
    }
}
