import Foundation
import OfferDomain
import OfferStore

/// Reads customers' records for `CustomerCache`, concurrent misses coalesced (`BatchedReads`): a paywall's first
/// questions about many customers cost a few round trips (one pipelined read of three statements each), not one each.
typealias CustomerRecordsLoader = BatchedReads<CustomerRecords>

extension BatchedReads where Value == CustomerRecords {
    convenience init(repository: CustomerRecordsRepository, maxInFlight: Int = 2, maxBatchSize: Int = 256) {
        self.init(maxInFlight: maxInFlight, maxBatchSize: maxBatchSize, missing: CustomerRecords(recorded: [])) {
            tenant, customerIds, done in
            repository.records(tenant: tenant, customerIds: customerIds) { done($0.mapError { $0 }) }
        }
    }

    /// The customer's records, read in the next round trip.
    func records(_ key: CustomerKey) async throws -> CustomerRecords {
        try await value(tenant: key.tenant, id: key.customerId)
    }

    /// The customer's records, read in the next round trip, to `reply`.
    func records(_ key: CustomerKey, reply: @escaping Reply) {
        value(tenant: key.tenant, id: key.customerId, reply: reply)
    }
}
