-- OfferGate schema v1.
--
-- Conventions
-- * Every tenant-owned table's primary key starts with tenant_id, so the schema can be distributed by tenant
--   (Citus: tenants becomes a reference table, everything else is distributed on tenant_id).
-- * Ids chosen by apps (product ids, offer ids, campaign ids, codes) are text; ids we mint are uuid.
-- * Money is numeric (exact); currencies are ISO 4217 codes; periods are ISO 8601 durations as Apple uses them.
-- * The database guards what it can (CHECK, FOREIGN KEY, UNIQUE): the application is not the only line of defence.
-- * Catalog changes notify channel `offergate_catalog` with the tenant id, so every gateway process drops its cached
--   copy of that tenant's catalog (PostgreSQL folds duplicate notifications within one transaction).

CREATE TABLE tenants (
    tenant_id   uuid        NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
    slug        text        NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9-]{2,40}$'),
    bundle_id   text        NOT NULL CHECK (length(bundle_id) BETWEEN 1 AND 255),
    name        text        CHECK (name IS NULL OR length(name) <= 200),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- API keys: `og_<lookup>_<secret>`. Only a SHA-256 of the whole key is kept; `lookup` is a public, random handle
-- that finds the row so the hash can be compared in constant time.
CREATE TABLE api_keys (
    tenant_id   uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    lookup      text        NOT NULL CHECK (lookup ~ '^[a-z0-9]{12}$'),
    key_hash    bytea       NOT NULL CHECK (octet_length(key_hash) = 32),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    PRIMARY KEY (tenant_id, lookup)
);
CREATE UNIQUE INDEX api_keys_lookup ON api_keys (lookup);

-- App Store Connect In-App Purchase keys. The private key is sealed (AES-256-GCM under the master key, with tenant
-- and key id as associated data); `master_key_id` says which master key sealed it, so rotation can re-seal.
CREATE TABLE signing_keys (
    tenant_id          uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    key_id             text        NOT NULL CHECK (length(key_id) BETWEEN 1 AND 64),
    issuer_id          text        CHECK (issuer_id IS NULL OR length(issuer_id) BETWEEN 1 AND 64),
    sealed_private_key bytea       NOT NULL,
    master_key_id      text        NOT NULL,
    public_key_pem     text        NOT NULL,
    state              text        NOT NULL CHECK (state IN ('active', 'standby', 'retired')),
    created_at         timestamptz NOT NULL DEFAULT now(),
    retired_at         timestamptz,
    PRIMARY KEY (tenant_id, key_id),
    CHECK ((state = 'retired') = (retired_at IS NOT NULL))
);
-- At most one key signs new offers.
CREATE UNIQUE INDEX signing_keys_one_active ON signing_keys (tenant_id) WHERE state = 'active';

-- ---------------------------------------------------------------------------------------------------------------
-- Catalog
-- ---------------------------------------------------------------------------------------------------------------

CREATE TABLE subscription_groups (
    tenant_id  uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    group_id   text        NOT NULL CHECK (length(group_id) BETWEEN 1 AND 200),
    name       text        NOT NULL CHECK (length(name) <= 200),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, group_id)
);

CREATE TABLE products (
    tenant_id  uuid        NOT NULL,
    product_id text        NOT NULL CHECK (length(product_id) BETWEEN 1 AND 200),
    group_id   text        NOT NULL,
    period     text        NOT NULL CHECK (period IN ('P3D', 'P1W', 'P2W', 'P1M', 'P2M', 'P3M', 'P6M', 'P1Y')),
    price      numeric     NOT NULL CHECK (price >= 0),
    currency   text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    level      integer     NOT NULL CHECK (level >= 1),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, product_id),
    FOREIGN KEY (tenant_id, group_id) REFERENCES subscription_groups (tenant_id, group_id) ON DELETE CASCADE
);

-- Offer ids are unique per tenant (campaigns name an offer by id alone).
CREATE TABLE offers (
    tenant_id                  uuid        NOT NULL,
    offer_id                   text        NOT NULL CHECK (length(offer_id) BETWEEN 1 AND 200),
    product_id                 text        NOT NULL,
    type                       text        NOT NULL CHECK (type IN ('introductory', 'promotional', 'code', 'winBack')),
    payment_mode               text        NOT NULL CHECK (payment_mode IN ('freeTrial', 'payAsYouGo', 'payUpFront')),
    period                     text        NOT NULL CHECK (period IN ('P3D', 'P1W', 'P2W', 'P1M', 'P2M', 'P3M', 'P6M', 'P1Y')),
    period_count               integer     NOT NULL DEFAULT 1 CHECK (period_count BETWEEN 1 AND 12),
    price                      numeric     CHECK (price IS NULL OR price >= 0),
    starts_at                  timestamptz,
    ends_at                    timestamptz,
    active                     boolean     NOT NULL DEFAULT true,
    -- promotional: who may see it (NULL = the default audience)
    audience                   text[]      CHECK (audience IS NULL OR audience <@ ARRAY['atRisk', 'billingRetry', 'lapsed', 'active']),
    -- win-back parameters
    min_paid_months            integer     CHECK (min_paid_months IS NULL OR min_paid_months >= 0),
    months_since_lapse_min     integer     CHECK (months_since_lapse_min IS NULL OR months_since_lapse_min >= 0),
    months_since_lapse_max     integer     CHECK (months_since_lapse_max IS NULL OR months_since_lapse_max >= 0),
    wait_between_offers_months integer     CHECK (wait_between_offers_months IS NULL OR wait_between_offers_months >= 0),
    reference_name             text,
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, offer_id),
    FOREIGN KEY (tenant_id, product_id) REFERENCES products (tenant_id, product_id) ON DELETE CASCADE,
    CHECK ((payment_mode = 'freeTrial') = (price IS NULL)),
    CHECK (payment_mode <> 'freeTrial' OR period_count = 1),
    CHECK (starts_at IS NULL OR ends_at IS NULL OR starts_at < ends_at),
    CHECK (months_since_lapse_min IS NULL OR months_since_lapse_max IS NULL
           OR months_since_lapse_min <= months_since_lapse_max),
    CHECK (type = 'winBack' OR (min_paid_months IS NULL AND months_since_lapse_min IS NULL
                                AND months_since_lapse_max IS NULL AND wait_between_offers_months IS NULL)),
    CHECK (type <> 'winBack' OR (min_paid_months IS NOT NULL AND months_since_lapse_min IS NOT NULL
                                 AND months_since_lapse_max IS NOT NULL)),
    CHECK (type = 'promotional' OR audience IS NULL)
);
CREATE INDEX offers_by_product ON offers (tenant_id, product_id);

CREATE FUNCTION offergate_notify_catalog() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('offergate_catalog', COALESCE(NEW.tenant_id, OLD.tenant_id)::text);
    RETURN NULL;
END $$;

CREATE TRIGGER subscription_groups_notify AFTER INSERT OR UPDATE OR DELETE ON subscription_groups
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_catalog();
CREATE TRIGGER products_notify AFTER INSERT OR UPDATE OR DELETE ON products
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_catalog();
CREATE TRIGGER offers_notify AFTER INSERT OR UPDATE OR DELETE ON offers
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_catalog();
CREATE TRIGGER signing_keys_notify AFTER INSERT OR UPDATE OR DELETE ON signing_keys
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_catalog();

-- ---------------------------------------------------------------------------------------------------------------
-- Customers' subscription history, as the App Store reported it (subscriptions.record)
-- ---------------------------------------------------------------------------------------------------------------

CREATE TABLE subscription_transactions (
    tenant_id                 uuid        NOT NULL,
    transaction_id            text        NOT NULL CHECK (length(transaction_id) BETWEEN 1 AND 100),
    original_transaction_id   text        CHECK (original_transaction_id IS NULL OR length(original_transaction_id) <= 100),
    customer_id               text        NOT NULL CHECK (octet_length(customer_id) BETWEEN 1 AND 256),
    product_id                text        NOT NULL,
    purchase_date             timestamptz NOT NULL,
    expires_date              timestamptz NOT NULL,
    offer_type                smallint    CHECK (offer_type IS NULL OR offer_type BETWEEN 1 AND 4),
    offer_id                  text,
    auto_renew                boolean     NOT NULL DEFAULT true,
    in_billing_retry          boolean     NOT NULL DEFAULT false,
    grace_period_expires_date timestamptz,
    revocation_date           timestamptz,
    recorded_at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, transaction_id),
    FOREIGN KEY (tenant_id, product_id) REFERENCES products (tenant_id, product_id),
    CHECK (purchase_date <= expires_date)
);
CREATE INDEX subscription_transactions_by_customer ON subscription_transactions (tenant_id, customer_id);

-- ---------------------------------------------------------------------------------------------------------------
-- Offer-code campaigns and redemptions
-- ---------------------------------------------------------------------------------------------------------------

CREATE TABLE campaigns (
    tenant_id          uuid        NOT NULL,
    campaign_id        text        NOT NULL CHECK (length(campaign_id) BETWEEN 1 AND 100),
    offer_id           text        NOT NULL,
    kind               text        NOT NULL CHECK (kind IN ('oneTime', 'custom')),
    custom_code        text        CHECK (custom_code IS NULL OR custom_code ~ '^[A-Z0-9]{1,64}$'),
    total_limit        bigint      CHECK (total_limit IS NULL OR total_limit > 0),
    per_customer_limit integer     NOT NULL DEFAULT 1 CHECK (per_customer_limit >= 1),
    starts_at          timestamptz,
    expires_at         timestamptz,
    eligibility        text[]      NOT NULL DEFAULT ARRAY['new', 'existing', 'expired']
                                   CHECK (cardinality(eligibility) >= 1
                                          AND eligibility <@ ARRAY['new', 'existing', 'expired']),
    deactivated_at     timestamptz,
    -- Counters kept in the campaign row: the redemption path updates `redeemed` conditionally, so the row is the
    -- arbiter between gateway processes.
    redeemed           bigint      NOT NULL DEFAULT 0 CHECK (redeemed >= 0),
    rolled_back        bigint      NOT NULL DEFAULT 0 CHECK (rolled_back >= 0),
    codes_generated    bigint      NOT NULL DEFAULT 0 CHECK (codes_generated >= 0),
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, campaign_id),
    FOREIGN KEY (tenant_id, offer_id) REFERENCES offers (tenant_id, offer_id),
    CHECK (total_limit IS NULL OR redeemed <= total_limit),
    CHECK ((kind = 'custom') = (custom_code IS NOT NULL)),
    CHECK (starts_at IS NULL OR expires_at IS NULL OR starts_at < expires_at)
);

-- Every code a tenant owns, one-time or custom, normalised (upper case, no spaces or hyphens): unique per tenant.
CREATE TABLE offer_codes (
    tenant_id   uuid        NOT NULL,
    code        text        NOT NULL CHECK (code ~ '^[A-Z0-9]{1,64}$'),
    campaign_id text        NOT NULL,
    one_time    boolean     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, code),
    FOREIGN KEY (tenant_id, campaign_id) REFERENCES campaigns (tenant_id, campaign_id) ON DELETE CASCADE
);
CREATE INDEX offer_codes_by_campaign ON offer_codes (tenant_id, campaign_id, code);

CREATE TABLE redemptions (
    tenant_id       uuid        NOT NULL,
    redemption_id   uuid        NOT NULL,
    campaign_id     text        NOT NULL,
    code            text        NOT NULL,
    one_time        boolean     NOT NULL,
    customer_id     text        NOT NULL,
    idempotency_key text,
    redeemed_at     timestamptz NOT NULL DEFAULT now(),
    rolled_back_at  timestamptz,
    rollback_reason text        CHECK (rollback_reason IS NULL OR length(rollback_reason) <= 500),
    PRIMARY KEY (tenant_id, redemption_id),
    FOREIGN KEY (tenant_id, campaign_id) REFERENCES campaigns (tenant_id, campaign_id),
    FOREIGN KEY (tenant_id, code) REFERENCES offer_codes (tenant_id, code),
    CHECK (rollback_reason IS NULL OR rolled_back_at IS NOT NULL)
);
-- A one-time code has at most one live (not rolled back) redemption.
CREATE UNIQUE INDEX redemptions_one_time_once ON redemptions (tenant_id, code)
    WHERE one_time AND rolled_back_at IS NULL;
-- Per-customer limits and stats.
CREATE INDEX redemptions_by_customer ON redemptions (tenant_id, campaign_id, customer_id)
    WHERE rolled_back_at IS NULL;
-- An idempotency key yields at most one redemption.
CREATE UNIQUE INDEX redemptions_idempotency ON redemptions (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Outcomes of idempotent calls: the same key replays the first outcome; the same key with other params conflicts.
CREATE TABLE idempotency_records (
    tenant_id       uuid        NOT NULL,
    idempotency_key text        NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 200),
    method          text        NOT NULL,
    request_hash    bytea       NOT NULL,
    response        jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, idempotency_key)
);

-- ---------------------------------------------------------------------------------------------------------------
-- Ledgers
-- ---------------------------------------------------------------------------------------------------------------

-- Every signature handed out (offers.sign, offers.introEligibility).
CREATE TABLE issued_signatures (
    tenant_id         uuid        NOT NULL,
    nonce             uuid        NOT NULL,
    format            text        NOT NULL CHECK (format IN ('v1', 'jws', 'introEligibility')),
    key_id            text        NOT NULL,
    customer_id       text        NOT NULL,
    product_id        text        NOT NULL,
    offer_id          text,
    app_account_token text,
    transaction_id    text,
    issued_at         timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, nonce),
    FOREIGN KEY (tenant_id, key_id) REFERENCES signing_keys (tenant_id, key_id)
);
CREATE INDEX issued_signatures_by_customer ON issued_signatures (tenant_id, customer_id, issued_at);

-- Administrative changes (who did what to which tenant); never holds secrets.
CREATE TABLE audit_log (
    tenant_id  uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    audit_id   bigint      GENERATED ALWAYS AS IDENTITY,
    at         timestamptz NOT NULL DEFAULT now(),
    actor      text        NOT NULL CHECK (actor IN ('admin', 'tenant', 'system')),
    action     text        NOT NULL,
    detail     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (tenant_id, audit_id)
);
