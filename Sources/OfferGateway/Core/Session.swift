import Foundation
import JSONRPC
import OfferStore
import Synchronization

/// Who a connection speaks for.
public enum Principal: Sendable, Equatable {
    /// Not authenticated yet: only `session.authenticate`, `system.health` and `system.ping` work.
    case anonymous
    /// Bound to one tenant by that tenant's API key.
    case tenant(TenantRecord)
    /// The operators' key: admin methods, and tenant methods when naming the tenant.
    case admin

    /// The tenant's slug, for a tenant's connection.
    var tenantSlug: String? {
        if case .tenant(let tenant) = self { tenant.slug } else { nil }
    }
}

/// Per-connection state. Authentication changes it; requests of the connection read it concurrently.
public final class GatewaySession: Sendable {
    public let connection: ConnectionInfo
    private let state = Mutex<Principal>(.anonymous)

    init(connection: ConnectionInfo) {
        self.connection = connection
    }

    public var principal: Principal {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}
