-- The offer funnel (API.md §11): what paywalls saw (events.record), and per offer and UTC hour how often each stage
-- of the funnel happened, kept as rollups maintained on write so that analytics.funnel reads a few rows per hour
-- and stage whatever the number of events behind them.
--
-- * funnel_events: every event recorded, once per (tenant, eventId); an event sent without an eventId gets a fresh
--   `og:`-prefixed id (it is not deduplicated).
-- * funnel_rollups: counts per (tenant, offer, hour, stage[, campaign]). Every writer adds to them in its own
--   transaction: events, signatures, redemptions and verified transactions through the statement-level triggers
--   below (so every path that writes those tables keeps the rollups right), `offered` from the gateways' in-memory
--   counters (no write on the offers.best path; see docs/api.md). `slot` spreads concurrent writers of one hot
--   (offer, hour, stage) over several rows (the backend's pid modulo 8): they never wait for each other's commit.
--   Readers sum over slots. Rows are upserted in key order, so two writers never deadlock.
-- * funnel_purchases: the first verified transaction of each subscription chain that used an offer (later periods
--   of a pay-as-you-go offer are the same purchase), and when the chain first renewed at full price after it. The
--   chain's advisory lock (AppleDataRepository) serialises writers of one chain, so a purchase and its renewal
--   arriving at once are still matched.

CREATE TABLE funnel_events (
    tenant_id   uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    event_id    text        NOT NULL CHECK (octet_length(event_id) BETWEEN 1 AND 200),
    customer_id text        NOT NULL CHECK (octet_length(customer_id) BETWEEN 1 AND 256),
    offer_id    text        NOT NULL,
    event       text        NOT NULL CHECK (event IN ('impression', 'tap', 'dismiss', 'purchaseStarted', 'purchaseFailed')),
    at          timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, event_id)
);

CREATE TABLE funnel_rollups (
    tenant_id    uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    offer_id     text        NOT NULL,
    -- The UTC hour the counts belong to.
    bucket_start timestamptz NOT NULL,
    stage        text        NOT NULL CHECK (stage IN ('offered', 'impression', 'tap', 'dismiss', 'purchaseStarted',
                                                       'purchaseFailed', 'signed', 'redeemed', 'claimed',
                                                       'purchased', 'renewed')),
    -- The campaign of a redemption or claim; '' for every other stage.
    campaign_id  text        NOT NULL DEFAULT '',
    slot         smallint    NOT NULL DEFAULT 0,
    count        bigint      NOT NULL CHECK (count >= 0),
    PRIMARY KEY (tenant_id, offer_id, bucket_start, stage, campaign_id, slot)
);

CREATE TABLE funnel_purchases (
    tenant_id               uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    original_transaction_id text        NOT NULL,
    offer_id                text        NOT NULL,
    transaction_id          text        NOT NULL,
    purchased_at            timestamptz NOT NULL,
    renewed_at              timestamptz,
    PRIMARY KEY (tenant_id, original_transaction_id, offer_id)
);

-- The slot of this writer (see funnel_rollups).
CREATE FUNCTION offergate_funnel_slot() RETURNS smallint LANGUAGE sql STABLE AS $$
    SELECT (pg_backend_pid() % 8)::smallint
$$;

CREATE FUNCTION offergate_funnel_events_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO funnel_rollups AS r (tenant_id, offer_id, bucket_start, stage, campaign_id, slot, count)
    SELECT tenant_id, offer_id, date_trunc('hour', at, 'UTC'), event, '', offergate_funnel_slot(), count(*)
    FROM added GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (tenant_id, offer_id, bucket_start, stage, campaign_id, slot)
        DO UPDATE SET count = r.count + EXCLUDED.count;
    RETURN NULL;
END $$;

CREATE TRIGGER funnel_events_rollup AFTER INSERT ON funnel_events
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION offergate_funnel_events_added();

-- Promotional signatures (offers.sign); introductory-eligibility signatures name no offer and are not counted.
CREATE FUNCTION offergate_funnel_signatures_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO funnel_rollups AS r (tenant_id, offer_id, bucket_start, stage, campaign_id, slot, count)
    SELECT tenant_id, offer_id, date_trunc('hour', issued_at, 'UTC'), 'signed', '', offergate_funnel_slot(), count(*)
    FROM added WHERE offer_id IS NOT NULL AND format <> 'introEligibility'
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, offer_id, bucket_start, stage, campaign_id, slot)
        DO UPDATE SET count = r.count + EXCLUDED.count;
    RETURN NULL;
END $$;

CREATE TRIGGER issued_signatures_funnel AFTER INSERT ON issued_signatures
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION offergate_funnel_signatures_added();

-- Redemptions made (a later rollback does not take one back: the funnel counts what happened).
CREATE FUNCTION offergate_funnel_redemptions_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO funnel_rollups AS r (tenant_id, offer_id, bucket_start, stage, campaign_id, slot, count)
    SELECT a.tenant_id, c.offer_id, date_trunc('hour', a.redeemed_at, 'UTC'), 'redeemed', a.campaign_id,
           offergate_funnel_slot(), count(*)
    FROM added a JOIN campaigns c ON c.tenant_id = a.tenant_id AND c.campaign_id = a.campaign_id
    GROUP BY 1, 2, 3, 5 ORDER BY 1, 2, 3, 5
    ON CONFLICT (tenant_id, offer_id, bucket_start, stage, campaign_id, slot)
        DO UPDATE SET count = r.count + EXCLUDED.count;
    RETURN NULL;
END $$;

CREATE TRIGGER redemptions_funnel AFTER INSERT ON redemptions
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION offergate_funnel_redemptions_added();

-- Apple one-time codes handed out (codes.claim, 0008): a claim is the code row's claim columns being filled in.
CREATE FUNCTION offergate_funnel_claims_made() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO funnel_rollups AS r (tenant_id, offer_id, bucket_start, stage, campaign_id, slot, count)
    SELECT a.tenant_id, c.offer_id, date_trunc('hour', a.claimed_at, 'UTC'), 'claimed', a.campaign_id,
           offergate_funnel_slot(), count(*)
    FROM after_update a
    JOIN before_update b ON b.tenant_id = a.tenant_id AND b.code = a.code
    JOIN campaigns c ON c.tenant_id = a.tenant_id AND c.campaign_id = a.campaign_id
    WHERE a.claim_id IS NOT NULL AND b.claim_id IS NULL
    GROUP BY 1, 2, 3, 5 ORDER BY 1, 2, 3, 5
    ON CONFLICT (tenant_id, offer_id, bucket_start, stage, campaign_id, slot)
        DO UPDATE SET count = r.count + EXCLUDED.count;
    RETURN NULL;
END $$;

CREATE TRIGGER apple_codes_funnel AFTER UPDATE ON apple_codes
    REFERENCING OLD TABLE AS before_update NEW TABLE AS after_update
    FOR EACH STATEMENT EXECUTE FUNCTION offergate_funnel_claims_made();

-- Verified transactions: which offer each one used (offerType 2, 3, 4 name it by offerIdentifier; an offer code,
-- type 3, may name it by the `apple_reference_name` of a campaign granting it (0008); an introductory offer, type 1,
-- is the product's introductory offer), the first use per chain and offer counted `purchased` in the
-- hour of its purchase date; a chain's first full-price transaction after such a purchase counts it `renewed`, in
-- the purchase's hour (so every bucket's renewed ≤ purchased: a cohort). Xcode data (unsigned) counts nothing.
CREATE FUNCTION offergate_funnel_transactions_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH used AS (
        SELECT DISTINCT ON (a.tenant_id, a.original_transaction_id, o.offer_id)
               a.tenant_id, a.original_transaction_id, o.offer_id, a.transaction_id, a.purchase_date
        FROM added a
        JOIN LATERAL (
            SELECT f.offer_id FROM offers f
            WHERE f.tenant_id = a.tenant_id
              AND ((a.offer_type IN (2, 3, 4) AND f.offer_id = a.offer_id)
                   OR (a.offer_type = 1 AND f.type = 'introductory' AND f.product_id = a.product_id)
                   OR (a.offer_type = 3 AND f.offer_id IN (
                           SELECT c.offer_id FROM campaigns c
                           WHERE c.tenant_id = a.tenant_id AND c.apple_reference_name = a.offer_id)))
            -- The offer named by its id first, then one named through a campaign's reference name.
            ORDER BY (f.offer_id = a.offer_id) DESC, f.offer_id LIMIT 1
        ) o ON true
        WHERE a.authenticity = 'verifiedChain'
        ORDER BY a.tenant_id, a.original_transaction_id, o.offer_id, a.purchase_date
    ), bought AS (
        INSERT INTO funnel_purchases (tenant_id, original_transaction_id, offer_id, transaction_id, purchased_at)
        SELECT tenant_id, original_transaction_id, offer_id, transaction_id, purchase_date FROM used
        ON CONFLICT DO NOTHING
        RETURNING tenant_id, offer_id, purchased_at
    )
    INSERT INTO funnel_rollups AS r (tenant_id, offer_id, bucket_start, stage, campaign_id, slot, count)
    SELECT tenant_id, offer_id, date_trunc('hour', purchased_at, 'UTC'), 'purchased', '', offergate_funnel_slot(),
           count(*)
    FROM bought GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, offer_id, bucket_start, stage, campaign_id, slot)
        DO UPDATE SET count = r.count + EXCLUDED.count;

    WITH renewed AS (
        UPDATE funnel_purchases p SET renewed_at = paid.first
        FROM (
            SELECT p2.tenant_id, p2.original_transaction_id, p2.offer_id, min(t.purchase_date) AS first
            FROM funnel_purchases p2
            JOIN apple_transactions t
              ON t.tenant_id = p2.tenant_id AND t.original_transaction_id = p2.original_transaction_id
             AND t.offer_type IS NULL AND t.purchase_date > p2.purchased_at AND t.revocation_date IS NULL
             AND t.authenticity = 'verifiedChain'
            WHERE p2.renewed_at IS NULL
              AND (p2.tenant_id, p2.original_transaction_id) IN (SELECT tenant_id, original_transaction_id FROM added)
            GROUP BY 1, 2, 3
        ) paid
        WHERE p.tenant_id = paid.tenant_id AND p.original_transaction_id = paid.original_transaction_id
          AND p.offer_id = paid.offer_id AND p.renewed_at IS NULL
        RETURNING p.tenant_id, p.offer_id, p.purchased_at
    )
    INSERT INTO funnel_rollups AS r (tenant_id, offer_id, bucket_start, stage, campaign_id, slot, count)
    SELECT tenant_id, offer_id, date_trunc('hour', purchased_at, 'UTC'), 'renewed', '', offergate_funnel_slot(),
           count(*)
    FROM renewed GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, offer_id, bucket_start, stage, campaign_id, slot)
        DO UPDATE SET count = r.count + EXCLUDED.count;
    RETURN NULL;
END $$;

CREATE TRIGGER apple_transactions_funnel AFTER INSERT ON apple_transactions
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION offergate_funnel_transactions_added();
