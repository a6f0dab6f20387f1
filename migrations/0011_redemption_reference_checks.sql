-- A redemption's code and campaign are checked once per statement instead of by two row-level foreign keys.
--
-- Why: a redemption batch is one INSERT of many rows (RedemptionStore), and each row ran two foreign-key checks,
-- each its own query: ~20 % of the PostgreSQL backend's time on a hot campaign's serial chain, where the campaign's
-- row lock is held until the batch is on disk (docs/perf/b1-hot-code.md). A batch's rows share one campaign and,
-- for a custom code, one code, so the statement checks its distinct (campaign, code) pairs once.
--
-- What the foreign keys guaranteed still holds, and a little more:
--   * every redemption names a code that exists and belongs to the redemption's campaign (the keys checked code
--     and campaign separately, so a code of another campaign passed);
--   * a code that has redemptions cannot be deleted (nor, through offer_codes' cascade, its campaign or tenant),
--     re-keyed, or truncated away;
--   * a redemption's tenant, campaign and code never change.
-- Concurrency, as with the keys: the insert check locks its campaigns FOR KEY SHARE (a batch holds its campaign FOR
-- UPDATE already); removing or re-keying codes locks their campaigns FOR UPDATE first, so it waits for every open
-- insert that names them, and then (READ COMMITTED: each statement of the trigger takes a new snapshot) sees the
-- rows they committed.

ALTER TABLE redemptions
    DROP CONSTRAINT redemptions_tenant_id_campaign_id_fkey,
    DROP CONSTRAINT redemptions_tenant_id_code_fkey;

CREATE FUNCTION offergate_redemptions_check_references() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing record;
BEGIN
    PERFORM 1 FROM campaigns c
    WHERE (c.tenant_id, c.campaign_id) IN (SELECT DISTINCT tenant_id, campaign_id FROM added)
    ORDER BY c.tenant_id, c.campaign_id
    FOR KEY SHARE OF c;
    SELECT a.campaign_id INTO missing
    FROM (SELECT DISTINCT tenant_id, campaign_id, code FROM added) a
    WHERE NOT EXISTS (SELECT 1 FROM offer_codes o
                      WHERE o.tenant_id = a.tenant_id AND o.code = a.code AND o.campaign_id = a.campaign_id)
    LIMIT 1;
    IF FOUND THEN
        -- The code itself stays out of the message: codes are secrets.
        RAISE EXCEPTION 'a redemption of campaign "%" names a code that is not one of the campaign''s codes',
            missing.campaign_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER redemptions_check_references AFTER INSERT ON redemptions
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION offergate_redemptions_check_references();

CREATE FUNCTION offergate_redemptions_keep_references() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a redemption''s tenant, campaign and code never change' USING ERRCODE = 'integrity_constraint_violation';
END $$;

CREATE TRIGGER redemptions_keep_references BEFORE UPDATE OF tenant_id, campaign_id, code ON redemptions
    FOR EACH ROW WHEN ((OLD.tenant_id, OLD.campaign_id, OLD.code) IS DISTINCT FROM (NEW.tenant_id, NEW.campaign_id, NEW.code))
    EXECUTE FUNCTION offergate_redemptions_keep_references();

-- Codes removed (deleted, or their key or campaign changed): none of them may have a redemption.
CREATE FUNCTION offergate_offer_codes_keep_redeemed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kept record;
BEGIN
    PERFORM 1 FROM campaigns c
    WHERE (c.tenant_id, c.campaign_id) IN (SELECT DISTINCT tenant_id, campaign_id FROM removed)
    ORDER BY c.tenant_id, c.campaign_id
    FOR UPDATE OF c;
    -- A code is removed when its (tenant, code, campaign) no longer exists: deleted, or changed by an update (an
    -- update that leaves the three alone removes nothing).
    SELECT r.campaign_id INTO kept
    FROM removed o JOIN redemptions r ON r.tenant_id = o.tenant_id AND r.code = o.code
    WHERE NOT EXISTS (SELECT 1 FROM offer_codes n
                      WHERE n.tenant_id = o.tenant_id AND n.code = o.code AND n.campaign_id = o.campaign_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'a code of campaign "%" has redemptions: it cannot be removed or changed', kept.campaign_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER offer_codes_keep_redeemed_on_delete AFTER DELETE ON offer_codes
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION offergate_offer_codes_keep_redeemed();
CREATE TRIGGER offer_codes_keep_redeemed_on_update AFTER UPDATE ON offer_codes
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION offergate_offer_codes_keep_redeemed();

CREATE FUNCTION offergate_offer_codes_keep_redeemed_on_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM redemptions) THEN
        RAISE EXCEPTION 'offer_codes cannot be truncated while redemptions has rows' USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER offer_codes_keep_redeemed_on_truncate BEFORE TRUNCATE ON offer_codes
    FOR EACH STATEMENT EXECUTE FUNCTION offergate_offer_codes_keep_redeemed_on_truncate();
