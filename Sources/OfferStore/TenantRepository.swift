import Foundation
import Postgres

/// A tenant (one app) as stored.
public struct TenantRecord: Sendable, Hashable {
    public var id: UUID
    public var slug: String
    public var bundleId: String
    public var name: String?
    public var createdAt: Date
    /// The app's Apple id (App Store Connect), checked against Apple's signed data when set.
    public var appAppleId: Int64?
    /// Whether Apple's Sandbox data is accepted (verified like Production).
    public var allowSandbox: Bool
    /// Whether Xcode/LocalTesting data (not signed by Apple) is accepted: development tenants only.
    public var allowXcode: Bool

    public init(
        id: UUID, slug: String, bundleId: String, name: String?, createdAt: Date, appAppleId: Int64? = nil,
        allowSandbox: Bool = false, allowXcode: Bool = false
    ) {
        self.appAppleId = appAppleId
        self.allowSandbox = allowSandbox
        self.allowXcode = allowXcode
        self.id = id
        self.slug = slug
        self.bundleId = bundleId
        self.name = name
        self.createdAt = createdAt
    }
}

extension TenantRecord {
    /// Whether `slug` has the form the schema allows for a tenant slug: `[a-z0-9-]{2,40}` (ASCII only).
    public static func isWellFormed(slug: String) -> Bool {
        (2...40).contains(slug.utf8.count)
            && slug.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
    }
}

/// The stored half of an API key: its public lookup handle and the SHA-256 of the whole key.
public struct StoredApiKey: Sendable, Hashable {
    public var lookup: String
    public var hash: [UInt8]

    public init(lookup: String, hash: [UInt8]) {
        self.lookup = lookup
        self.hash = hash
    }
}

/// Tenants, their API keys and the audit log of administrative changes.
public struct TenantRepository: Sendable {
    let pool: PostgresPool

    /// Creates a tenant with its first API key. Throws `.conflict` when the slug is taken.
    public func create(slug: String, bundleId: String, name: String?, apiKey: StoredApiKey) async throws(StoreError)
        -> TenantRecord
    {
        do {
            return try await pool.withTransaction { tx in
                let rows = try await tx.query(
                    """
                    INSERT INTO tenants (slug, bundle_id, name) VALUES (\(slug), \(bundleId), \(name))
                    RETURNING \(query: .unsafeRaw(Self.columns))
                    """)
                guard let row = rows.first else { throw StoreError.corrupt("INSERT returned no tenant") }
                let tenant = try Self.decode(row)
                try await tx.query(
                    "INSERT INTO api_keys (tenant_id, lookup, key_hash) VALUES (\(tenant.id), \(apiKey.lookup), \(apiKey.hash))"
                )
                try await Audit.record(tx, tenant: tenant.id, actor: "admin", action: "tenant.create")
                return tenant
            }
        } catch let error as PostgresError where error.isUniqueViolation {
            throw .conflict("tenant '\(slug)' exists already")
        } catch {
            throw StoreError.wrap(error)
        }
    }

    public func list() async throws(StoreError) -> [TenantRecord] {
        try await storeCall {
            try await pool.query("SELECT \(query: .unsafeRaw(Self.columns)) FROM tenants ORDER BY slug")
                .map(Self.decode)
        }
    }

    public func find(slug: String) async throws(StoreError) -> TenantRecord? {
        try await storeCall {
            try await pool.query(
                "SELECT \(query: .unsafeRaw(Self.columns)) FROM tenants WHERE slug = \(slug)", prepared: true
            ).first.map(Self.decode)
        }
    }

    /// The tenant and stored hash behind a live (not revoked) API key handle.
    public func findApiKey(lookup: String) async throws(StoreError) -> (tenant: TenantRecord, hash: [UInt8])? {
        try await storeCall {
            let rows = try await pool.query(
                """
                SELECT t.tenant_id, t.slug, t.bundle_id, t.name, t.created_at, t.app_apple_id, t.allow_sandbox,
                       t.allow_xcode, k.key_hash
                FROM api_keys k JOIN tenants t USING (tenant_id)
                WHERE k.lookup = \(lookup) AND k.revoked_at IS NULL
                """, prepared: true)
            guard let row = rows.first else { return nil }
            return (try Self.decode(row), try row.decode([UInt8].self, at: 8))
        }
    }

    /// Revokes every key of the tenant and stores a new one.
    public func rotateApiKey(tenant: UUID, newKey: StoredApiKey) async throws(StoreError) {
        try await storeCall {
            try await pool.withTransaction { tx in
                // One rotation per tenant at a time: otherwise two concurrent rotations each revoke only the keys
                // they can see, and both new keys stay live.
                try await tx.query("SELECT 1 FROM tenants WHERE tenant_id = \(tenant) FOR UPDATE")
                try await tx.query(
                    "UPDATE api_keys SET revoked_at = now() WHERE tenant_id = \(tenant) AND revoked_at IS NULL")
                try await tx.query(
                    "INSERT INTO api_keys (tenant_id, lookup, key_hash) VALUES (\(tenant), \(newKey.lookup), \(newKey.hash))"
                )
                try await Audit.record(tx, tenant: tenant, actor: "admin", action: "tenant.rotate_api_key")
            }
        }
    }

    /// The tenant with this id, as stored now.
    public func find(id: UUID) async throws(StoreError) -> TenantRecord? {
        try await storeCall {
            try await pool.query(
                "SELECT \(query: .unsafeRaw(Self.columns)) FROM tenants WHERE tenant_id = \(id)", prepared: true
            ).first.map(Self.decode)
        }
    }

    /// The settings `tenants.update` may change; nil leaves a field as it is.
    public struct Update: Sendable, Hashable {
        public var name: String?
        public var appAppleId: Int64?
        public var allowSandbox: Bool?
        public var allowXcode: Bool?

        public init(name: String? = nil, appAppleId: Int64? = nil, allowSandbox: Bool? = nil, allowXcode: Bool? = nil) {
            self.name = name
            self.appAppleId = appAppleId
            self.allowSandbox = allowSandbox
            self.allowXcode = allowXcode
        }
    }

    /// Changes a tenant's settings and returns it as stored. The update announces itself on the change feed
    /// (`catalogOrSigningKeys`, migration 0003), so every gateway drops what it cached of the tenant.
    public func update(tenant: UUID, _ update: Update) async throws(StoreError) -> TenantRecord {
        try await storeCall {
            try await pool.withTransaction { tx in
                let rows = try await tx.query(
                    """
                    UPDATE tenants SET name = COALESCE(\(update.name), name),
                        app_apple_id = COALESCE(\(update.appAppleId), app_apple_id),
                        allow_sandbox = COALESCE(\(update.allowSandbox), allow_sandbox),
                        allow_xcode = COALESCE(\(update.allowXcode), allow_xcode)
                    WHERE tenant_id = \(tenant)
                    RETURNING \(query: .unsafeRaw(Self.columns))
                    """)
                guard let row = rows.first else { throw StoreError.notFound("tenant") }
                try await Audit.record(tx, tenant: tenant, actor: "admin", action: "tenant.update")
                return try Self.decode(row)
            }
        }
    }

    static let columns = "tenant_id, slug, bundle_id, name, created_at, app_apple_id, allow_sandbox, allow_xcode"

    static func decode(_ row: PostgresRow) throws -> TenantRecord {
        let (id, slug, bundleId, name, createdAt, appAppleId, sandbox, xcode) = try row.decode(
            UUID.self, String.self, String.self, String?.self, Date.self, Int64?.self, Bool.self, Bool.self)
        return TenantRecord(
            id: id, slug: slug, bundleId: bundleId, name: name, createdAt: createdAt, appAppleId: appAppleId,
            allowSandbox: sandbox, allowXcode: xcode)
    }
}
