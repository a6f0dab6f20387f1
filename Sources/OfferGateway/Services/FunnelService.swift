import Foundation
import OfferStore

/// The offer funnel (API.md §11): what the app's paywall saw (`events.record`), and per offer, campaign or product
/// how many customers reached each stage, per UTC hour or day (`analytics.funnel`), read from rollups that every
/// writer maintains (see migration 0009 and `OfferedCounter`).
struct FunnelService: Sendable {
    let repository: FunnelRepository
    let campaigns: CampaignRepository
    let caches: GatewayCaches
    let clock: @Sendable () -> Date

    /// At most this many events per `events.record` call.
    static let maxEvents = 1_000
    /// At most this many buckets per `analytics.funnel` answer (about 13 months of hours; 27 years of days).
    static let maxBuckets = 10_000
    /// How far in the future an event's `at` may be (clocks of app backends drift).
    static let futureSlack: TimeInterval = 86_400

    struct EventInput: Decodable, Sendable {
        let customerId: String
        let offerId: String
        let event: String
        let at: Date?
        let eventId: String?
    }

    struct RecordRequest: Decodable, Sendable {
        let events: [EventInput]
    }

    struct FunnelRequest: Decodable, Sendable {
        let offerId: String?
        let campaignId: String?
        let productId: String?
        let from: Date
        let to: Date
        let bucket: String?
    }

    /// What `events.record` stored: events new to the tenant, and those whose `eventId` it had already.
    struct Recorded: Sendable {
        let recorded: Int
        let duplicates: Int
    }

    /// The stages' counts of one bucket (or of the whole range).
    struct Counts: Sendable, Equatable {
        var values: [FunnelStage: Int] = [:]

        subscript(stage: FunnelStage) -> Int { values[stage] ?? 0 }
    }

    struct Bucket: Sendable {
        let start: Date
        let counts: Counts
    }

    struct Funnel: Sendable {
        let bucket: FunnelBucket
        /// The first bucket's start, and the end of the last one.
        let from: Date
        let to: Date
        let buckets: [Bucket]
        let totals: Counts
    }

    /// Validates every event first (nothing is stored when one is wrong), then stores them in one statement.
    func record(_ request: RecordRequest, tenant: TenantRecord) async throws -> Recorded {
        guard request.events.count <= Self.maxEvents else {
            throw GatewayError.invalidParams(
                param: "params.events",
                message: "at most \(Self.maxEvents) events per call (got \(request.events.count))",
                reason: "too_many_events")
        }
        let catalog = try await caches.catalogs.catalog(tenant.id)
        let latest = clock().addingTimeInterval(Self.futureSlack)
        var events: [FunnelEvent] = []
        events.reserveCapacity(request.events.count)
        for (index, input) in request.events.enumerated() {
            let param = "params.events[\(index)]"
            let customerId = try Validate.customerId(input.customerId, param: param + ".customerId")
            guard let kind = FunnelEvent.Kind(rawValue: input.event) else {
                throw GatewayError.invalidParams(
                    param: param + ".event",
                    message: "event must be one of "
                        + FunnelEvent.Kind.allCases.map(\.rawValue).joined(separator: ", "),
                    reason: "unknown_event")
            }
            guard !catalog.offers(withId: input.offerId).isEmpty else {
                throw GatewayError.invalidParams(
                    param: param + ".offerId", message: "no offer '\(Validate.printable(input.offerId))'",
                    reason: "unknown_offer")
            }
            let eventId = try input.eventId.map { try Validate.identifier($0, param: param + ".eventId") }
            let at = input.at ?? clock()
            guard at <= latest else {
                throw GatewayError.invalidParams(
                    param: param + ".at", message: "at is more than a day in the future", reason: "in_future")
            }
            events.append(
                FunnelEvent(eventId: eventId, customerId: customerId, offerId: input.offerId, kind: kind, at: at))
        }
        let recorded = try await repository.record(tenant: tenant.id, events)
        return Recorded(recorded: recorded, duplicates: events.count - recorded)
    }

    /// The funnel of one offer, one campaign (its offer's stages, its own redemptions and claims), one product (all
    /// its offers) or, with none named, every offer of the tenant, over the whole buckets that overlap
    /// [`from`, `to`).
    func funnel(_ request: FunnelRequest, tenant: TenantRecord) async throws -> Funnel {
        let named = [request.offerId, request.campaignId, request.productId].compactMap { $0 }
        guard named.count <= 1 else {
            throw GatewayError.invalidParams(
                param: request.offerId != nil ? "params.offerId" : "params.campaignId",
                message: "give at most one of offerId, campaignId or productId", reason: "conflicting_params")
        }
        let bucket: FunnelBucket
        switch request.bucket {
        case nil: bucket = .day
        case let text?:
            guard let parsed = FunnelBucket(rawValue: text) else {
                throw GatewayError.invalidParams(param: "params.bucket", message: "bucket must be day or hour")
            }
            bucket = parsed
        }
        guard request.from < request.to else {
            throw GatewayError.invalidParams(
                param: "params.from", message: "from must be before to", reason: "empty_range")
        }
        let from = Self.bucketStart(request.from, bucket)
        let to = Self.bucketEnd(request.to, bucket)
        let width = Self.width(bucket)
        let count = Int((to.timeIntervalSince(from) / width).rounded())
        guard count <= Self.maxBuckets else {
            throw GatewayError.invalidParams(
                param: "params.to",
                message: "the range holds \(count) \(bucket.rawValue) buckets; at most \(Self.maxBuckets)",
                reason: "range_too_long")
        }
        let catalog = try await caches.catalogs.catalog(tenant.id)
        var offers: [String]
        var campaignId: String?
        if let offerId = request.offerId {
            guard !catalog.offers(withId: offerId).isEmpty else {
                throw GatewayError.invalidParams(
                    param: "params.offerId", message: "no offer '\(Validate.printable(offerId))'",
                    reason: "unknown_offer")
            }
            offers = [offerId]
        } else if let requested = request.campaignId {
            let id = try Validate.identifier(requested, param: "params.campaignId", maxBytes: 100)
            guard let record = try await campaigns.find(tenant: tenant.id, campaignId: id) else {
                throw GatewayError.invalidParams(
                    param: "params.campaignId", message: "no campaign '\(Validate.printable(id))'",
                    reason: "unknown_campaign")
            }
            offers = [record.campaign.offerId]
            campaignId = id
        } else if let productId = request.productId {
            guard catalog.product(productId) != nil else {
                throw GatewayError.invalidParams(
                    param: "params.productId", message: "no product '\(Validate.printable(productId))'",
                    reason: "unknown_product")
            }
            offers = catalog.offers(forProduct: productId).map(\.id)
        } else {
            offers = catalog.offers.map(\.id)
        }
        offers.sort()
        let cells = try await repository.funnel(
            tenant: tenant.id, offers: offers, campaignId: campaignId, from: from, to: to, bucket: bucket)
        var byStart: [Date: Counts] = [:]
        var totals = Counts()
        for cell in cells {
            byStart[cell.bucketStart, default: Counts()].values[cell.stage, default: 0] += cell.count
            totals.values[cell.stage, default: 0] += cell.count
        }
        let buckets = (0..<count).map { index in
            let start = from.addingTimeInterval(Double(index) * width)
            return Bucket(start: start, counts: byStart[start] ?? Counts())
        }
        return Funnel(bucket: bucket, from: from, to: to, buckets: buckets, totals: totals)
    }

    private static func width(_ bucket: FunnelBucket) -> TimeInterval {
        bucket == .hour ? 3_600 : 86_400
    }

    /// The start of the UTC bucket holding `date`.
    static func bucketStart(_ date: Date, _ bucket: FunnelBucket) -> Date {
        let width = width(bucket)
        return Date(timeIntervalSince1970: (date.timeIntervalSince1970 / width).rounded(.down) * width)
    }

    /// The end of the UTC bucket holding the instant just before `date` (`date` itself when it is a bucket start).
    static func bucketEnd(_ date: Date, _ bucket: FunnelBucket) -> Date {
        let width = width(bucket)
        return Date(timeIntervalSince1970: (date.timeIntervalSince1970 / width).rounded(.up) * width)
    }
}
