import Foundation
import JSONRPC

/// `rpc.discover`: the OpenRPC document of this API (also `GET /v1/openrpc.json`), unauthenticated.
enum DiscoverMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "rpc.discover", access: .open) { ctx in ctx.gateway.openRPCDocument }
    ]
}
