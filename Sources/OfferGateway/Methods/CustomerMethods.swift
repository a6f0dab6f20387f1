import Foundation
import JSONRPC

/// `subscriptions.record` and `customers.get`: a customer's history as the App Store reported it
/// (see `CustomerService`).
enum CustomerMethods {
    static let all: [MethodSpec] = [
        MethodSpec(name: "subscriptions.record", access: .tenant) { ctx in
            let request = try ctx.params(CustomerService.RecordRequest.self)
            let transactionId = try await ctx.services.customers.record(request, tenant: try await ctx.tenant())
            return ["recorded": true, "transactionId": .string(transactionId)]
        },
        MethodSpec(name: "customers.get", access: .tenant) { ctx in
            let request = try ctx.params(CustomerService.GetRequest.self)
            let summary = try await ctx.services.customers.summary(request, tenant: try await ctx.tenant())
            return [
                "customerId": .string(summary.customerId), "at": Wire.date(summary.at),
                "groups": .array(summary.catalog.groups.map { Wire.group($0, summary.history.group($0.id)) }),
            ]
        },
    ]
}
