// JSONRPC: placeholder until its issue fills it.
import Foundation

enum JSONRPCModule {}
