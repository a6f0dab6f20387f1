-- B1 baseline 1: the plain per-redemption transaction (conditional counter update, then the redemption row,
-- one commit each) on one hot campaign row.
\set c random(1, 2000000000)
BEGIN;
UPDATE bl_campaigns SET redeemed = redeemed + 1 WHERE campaign_id = 'hot' AND redeemed < total_limit;
INSERT INTO bl_redemptions (campaign_id, code, customer_id, idempotency_key)
    VALUES ('hot', 'HOT', 'c' || :client_id || '-' || :c, 'k' || :client_id || '-' || :c);
COMMIT;
