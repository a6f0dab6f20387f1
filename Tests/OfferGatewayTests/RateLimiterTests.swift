import Testing

@testable import OfferGateway

@Test func aFullBucketAllowsItsBurstThenLimitsWithTheWaitUntilTheNextToken() {
    // Binary-exact instants (1/16 s) so the arithmetic is exact.
    var bucket = TokenBucket(rate: 8, burst: 3, now: 100)
    #expect(bucket.take(now: 100) == .allowed)
    #expect(bucket.take(now: 100) == .allowed)
    #expect(bucket.take(now: 100) == .allowed)
    #expect(bucket.take(now: 100) == .limited(retryAfterMs: 125))
    #expect(bucket.take(now: 100.0625) == .limited(retryAfterMs: 63))
    #expect(bucket.take(now: 100.125) == .allowed)
    #expect(bucket.take(now: 100.125) == .limited(retryAfterMs: 125))
}

@Test func tokensNeverExceedTheBurstAfterALongPause() {
    var bucket = TokenBucket(rate: 1, burst: 2, now: 0)
    _ = bucket.take(now: 0)
    _ = bucket.take(now: 0)
    #expect(bucket.take(now: 1_000) == .allowed)
    #expect(bucket.take(now: 1_000) == .allowed)
    #expect(bucket.take(now: 1_000) == .limited(retryAfterMs: 1_000))
}

@Test func timeGoingBackwardsGrantsNothing() {
    var bucket = TokenBucket(rate: 1, burst: 1, now: 10)
    #expect(bucket.take(now: 10) == .allowed)
    #expect(bucket.take(now: 5) == .limited(retryAfterMs: 1_000))
}

@Test func tenantsHaveSeparateBucketsAndZeroRateTurnsLimitingOff() {
    let limiter = RateLimiter(rate: 1, burst: 1)
    #expect(limiter.take(tenant: "a", now: 0) == .allowed)
    #expect(limiter.take(tenant: "a", now: 0) == .limited(retryAfterMs: 1_000))
    #expect(limiter.take(tenant: "b", now: 0) == .allowed)
    let off = RateLimiter(rate: 0, burst: 1)
    for _ in 0..<100 { #expect(off.take(tenant: "a", now: 0) == .allowed) }
}
