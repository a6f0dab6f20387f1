import Foundation

/// After a run: every acknowledged redemption's request, sent again unchanged (same idempotency key), must answer
/// the same redemption with `replayed: true`. After a database failover this is the client's proof that what it
/// was told is what the database kept.
public enum ReplayCheck {
    /// The invariant, in words.
    public static let invariant = "every acknowledged redemption replays with its idempotency key"

    /// Replays every acknowledged redemption over `connections` connections to `address`; returns the breaches (none
    /// when every replay answered the acknowledged redemption).
    public static func run(
        acknowledged: [AcknowledgedRedemption], request: @escaping @Sendable (Int) -> LoadRequest,
        connector: any LoadConnector, address: String, connections: Int = 8
    ) async throws -> [InvariantBreach] {
        var byIndex: [Int: AcknowledgedRedemption] = [:]
        for ack in acknowledged where byIndex[ack.requestIndex] == nil { byIndex[ack.requestIndex] = ack }
        let work = byIndex.values.sorted { $0.requestIndex < $1.requestIndex }
        guard !work.isEmpty else { return [] }
        var opened: [any LoadConnection] = []
        for _ in 0..<max(1, min(connections, work.count)) {
            opened.append(try await connector.connect(address: address))
        }
        let lanes = opened
        let mismatches = await withTaskGroup(of: [String].self) { group in
            for (lane, connection) in lanes.enumerated() {
                group.addTask {
                    var bad: [String] = []
                    for ack in stride(from: lane, to: work.count, by: lanes.count).map({ work[$0] }) {
                        let outcome = await connection.call(request(ack.requestIndex))
                        if outcome
                            != .redeemed(redemptionId: ack.redemptionId, campaignId: ack.campaignId, replayed: true)
                        {
                            bad.append("request \(ack.requestIndex): \(describe(outcome))")
                        }
                    }
                    return bad
                }
            }
            var all: [String] = []
            for await part in group { all += part }
            return all.sorted()
        }
        for connection in lanes { await connection.close() }
        guard !mismatches.isEmpty else { return [] }
        return [.replayMismatch(count: mismatches.count, examples: Array(mismatches.prefix(5)))]
    }

    static func describe(_ outcome: CallOutcome) -> String {
        switch outcome {
        case .redeemed(let id, _, let replayed): "redemption \(id), replayed \(replayed)"
        case .rpcError(let code): "error \(code)"
        case .transportError(let text): "transport: \(text)"
        case .success, .signed: "an answer without a redemption"
        }
    }
}
