import Foundation
import OfferStore

/// Gives PostgreSQL its first statistics of each table as soon as the table has a few hundred changed rows, instead of
/// after autovacuum's first nap (a minute): `OfferDatabase.analyzeNeverAnalysed` explains the plan it prevents. A
/// long-running part of `GatewayService`: `run()` looks every `interval` while some table of the schema was never
/// analysed, and ends when none is left or after `lifetime` (by then autovacuum has had its turn for every table
/// that grew). Several processes may analyse the same table once each: harmless.
struct FirstStatistics: Sendable {
    let database: OfferDatabase
    let logger: Logger
    var interval: Duration = .seconds(1)
    var lifetime: Duration = .seconds(600)
    var minimumChanges = 500

    func run() async {
        let end = ContinuousClock.now + lifetime
        var warned = false
        while !Task.isCancelled, ContinuousClock.now < end {
            do {
                let sweep = try await database.analyzeNeverAnalysed(minimumChanges: minimumChanges)
                if !sweep.analysed.isEmpty {
                    logger.info("first statistics taken", ["tables": sweep.analysed.joined(separator: ",")])
                }
                if sweep.stillUnanalysed == 0 && sweep.analysed.isEmpty { return }
            } catch {
                // The database may be down or restarting: the next look tries again (warned once).
                if !warned && !Task.isCancelled {
                    logger.warning("could not take first statistics; trying again", ["error": "\(error)"])
                    warned = true
                }
            }
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
        }
    }
}
