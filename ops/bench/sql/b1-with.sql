-- B1 baseline 2: the same redemption as one statement (WITH … UPDATE … INSERT), one commit each.
\set c random(1, 2000000000)
WITH bumped AS (
    UPDATE bl_campaigns SET redeemed = redeemed + 1
     WHERE campaign_id = 'hot' AND redeemed < total_limit
    RETURNING campaign_id
)
INSERT INTO bl_redemptions (campaign_id, code, customer_id, idempotency_key)
SELECT campaign_id, 'HOT', 'c' || :client_id || '-' || :c, 'k' || :client_id || '-' || :c FROM bumped;
