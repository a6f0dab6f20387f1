-- B3 baseline: the per-code plain transaction: take the next code (each once), mark it used if it is not,
-- record the redemption and count it on the campaign, one commit each.
BEGIN;
SELECT nextval('bl_code_seq') AS n \gset
UPDATE bl_codes SET used = true WHERE code_no = :n AND NOT used RETURNING code \gset
INSERT INTO bl_redemptions (campaign_id, code, customer_id, idempotency_key)
    VALUES ('pool', :code, 'c' || :n, 'k' || :n);
UPDATE bl_campaigns SET redeemed = redeemed + 1 WHERE campaign_id = 'pool';
COMMIT;
