-- Baseline tables for the pgbench sides of B1 and B3: the same shape as OfferGate's campaigns / redemptions /
-- offer_codes rows (counter in the campaign row, one row per redemption, unique live one-time code), without the
-- foreign keys to the rest of the schema. Created in the benchmark's own database, beside OfferGate's tables.
SET client_min_messages = warning;
DROP TABLE IF EXISTS bl_redemptions, bl_codes, bl_campaigns;
DROP SEQUENCE IF EXISTS bl_code_seq;
CREATE TABLE bl_campaigns (
    campaign_id text   PRIMARY KEY,
    total_limit bigint,
    redeemed    bigint NOT NULL DEFAULT 0,
    CHECK (total_limit IS NULL OR redeemed <= total_limit)
);
CREATE TABLE bl_codes (
    code_no  bigint PRIMARY KEY,
    code     text   NOT NULL UNIQUE,
    used     boolean NOT NULL DEFAULT false
);
CREATE TABLE bl_redemptions (
    redemption_id   uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    campaign_id     text        NOT NULL,
    code            text        NOT NULL,
    customer_id     text        NOT NULL,
    idempotency_key text        UNIQUE,
    redeemed_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX bl_redemptions_by_customer ON bl_redemptions (campaign_id, customer_id);
CREATE SEQUENCE bl_code_seq;
INSERT INTO bl_campaigns VALUES ('hot', 1000000000, 0), ('pool', NULL, 0);
