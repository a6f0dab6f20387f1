-- The ledger's key check (0012) in one query instead of two.
--
-- Why: every ledger batch (one INSERT of the signatures that arrived meanwhile) runs this statement trigger, and its
-- two queries (lock the named keys, then look for a key that is missing) cost PostgreSQL ~65 us per batch, a tenth of
-- the batch statement's time at B5's ~13 rows (EXPLAIN ANALYZE, 60 batches; docs/perf/b5-sign.md, session 25). One
-- query that locks each named key inside the existence test costs ~28 us.
--
-- What holds, unchanged: each distinct (tenant, key) of the statement is locked FOR KEY SHARE, in key order, by the
-- sub-select that proves it exists; a key deleted or re-keyed by a transaction that committed while the insert waited
-- for its lock is not found (READ COMMITTED re-checks the locked row), so the insert fails with
-- foreign_key_violation, as before; a removal that comes after waits for the insert and then sees its rows
-- (offergate_signing_keys_keep_used). The error names the missing key, as before.
CREATE OR REPLACE FUNCTION offergate_issued_signatures_check_keys() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing text;
BEGIN
    SELECT a.key_id INTO missing
    FROM (SELECT DISTINCT tenant_id, key_id FROM added ORDER BY tenant_id, key_id) a
    WHERE NOT EXISTS (SELECT 1 FROM signing_keys k WHERE k.tenant_id = a.tenant_id AND k.key_id = a.key_id
                      FOR KEY SHARE)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'a signature names key "%", which is not a signing key of its tenant', missing
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;
