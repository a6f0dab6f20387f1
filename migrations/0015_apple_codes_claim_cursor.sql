-- Where an appleOneTime campaign's next claim starts looking for free codes.
--
-- Why: claims take free codes in code order, and the lookup (`ORDER BY code LIMIT n` on the partial index
-- `apple_codes_free`) started at the campaign's first code every time. A claimed code leaves its entry in that index
-- until a vacuum removes it, so the walk grew with every claim since the last vacuum: 4 index buffers per lookup on
-- a fresh campaign, 110-250 after 40,000 claims (0.43 ms against 0.06 ms; docs/perf/b1-hot-code.md, sessions 28-29),
-- and autovacuum's default leaves up to a fifth of a table dead, ~200,000 entries for a million codes.
--
-- What holds: every free code of the campaign sorts after `claim_cursor` (NULL: no bound). A claim batch, holding
-- the campaign row's lock, reads the free codes after the cursor and moves it to the last code of the run it claimed
-- from their start. Whatever makes a code free (an import, or any other writer: a code released or renamed by hand,
-- an older gateway during an upgrade) clears the cursor when that code does not sort after it, through the triggers
-- below, so the cursor only narrows where the walk starts. Codes are still claimed by `claim_id IS NULL` on their
-- own rows.
ALTER TABLE campaigns ADD COLUMN claim_cursor text;

-- Codes added (an import: one statement of many rows, so per statement).
CREATE FUNCTION offergate_apple_codes_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE campaigns c SET claim_cursor = NULL
    FROM (SELECT tenant_id, campaign_id, min(code) AS first_code FROM added
          WHERE claim_id IS NULL GROUP BY 1, 2) a
    WHERE c.tenant_id = a.tenant_id AND c.campaign_id = a.campaign_id AND a.first_code <= c.claim_cursor;
    RETURN NULL;
END $$;

CREATE TRIGGER apple_codes_added_cursor AFTER INSERT ON apple_codes
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION offergate_apple_codes_added();

-- A code made free by an update (nothing in the gateway does; per row, and the WHEN keeps claims' updates, which
-- fill `claim_id` in, from calling the function at all).
CREATE FUNCTION offergate_apple_codes_freed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE campaigns SET claim_cursor = NULL
    WHERE tenant_id = NEW.tenant_id AND campaign_id = NEW.campaign_id AND NEW.code <= claim_cursor;
    RETURN NULL;
END $$;

CREATE TRIGGER apple_codes_freed_cursor AFTER UPDATE OF claim_id, code, campaign_id ON apple_codes
    FOR EACH ROW WHEN (NEW.claim_id IS NULL AND (OLD.claim_id IS NOT NULL OR OLD.code <> NEW.code
                                                 OR OLD.campaign_id <> NEW.campaign_id))
    EXECUTE FUNCTION offergate_apple_codes_freed();
