-- The ledger's cost per signature: one customer index instead of two, and the signing key checked once per statement
-- instead of by a row-level foreign key.
--
-- Why: every `offers.sign` writes one ledger row before it is answered (group commit: one INSERT of a batch), and
-- PostgreSQL's CPU per row rivalled the gateway's whole cost of a signature (docs/perf/b5-sign.md, session 13). Per
-- row, the foreign key ran its own query on `signing_keys`, and two indexes led with (tenant, customer):
--   * `issued_signatures_by_customer` (tenant, customer, issued_at), which no query of the gateway uses;
--   * `issued_signatures_open_by_offer` (tenant, customer, offer, issued_at) WHERE open, for attribution.
-- One index over (tenant, customer, offer, issued_at), of every row, serves attribution (it reads the few rows of
-- one customer and offer and skips the purchased ones) and any look-up of a customer's signatures. Side by side on
-- B5's shape: PostgreSQL CPU per row 74-79 -> 57-61 us.
--
-- What the foreign key guaranteed still holds:
--   * every signature names a signing key of its own tenant;
--   * a key that has signatures cannot be deleted (nor, through the tenant's cascade, its tenant), re-keyed, or
--     truncated away;
--   * a signature's tenant and key never change.
-- Concurrency, as with the key: the insert check locks the keys it names FOR KEY SHARE, so a delete or re-key of
-- one waits for every open insert naming it and then (READ COMMITTED: each statement of the trigger takes a new
-- snapshot) sees the rows they committed; an insert after a delete finds no key and fails.

ALTER TABLE issued_signatures DROP CONSTRAINT issued_signatures_tenant_id_key_id_fkey;

DROP INDEX issued_signatures_by_customer;
DROP INDEX issued_signatures_open_by_offer;
CREATE INDEX issued_signatures_by_customer_offer ON issued_signatures (tenant_id, customer_id, offer_id, issued_at);

CREATE FUNCTION offergate_issued_signatures_check_keys() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing record;
BEGIN
    PERFORM 1 FROM signing_keys k
    WHERE (k.tenant_id, k.key_id) IN (SELECT DISTINCT tenant_id, key_id FROM added)
    ORDER BY k.tenant_id, k.key_id
    FOR KEY SHARE OF k;
    SELECT a.key_id INTO missing
    FROM (SELECT DISTINCT tenant_id, key_id FROM added) a
    WHERE NOT EXISTS (SELECT 1 FROM signing_keys k WHERE k.tenant_id = a.tenant_id AND k.key_id = a.key_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'a signature names key "%", which is not a signing key of its tenant', missing.key_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER issued_signatures_check_keys AFTER INSERT ON issued_signatures
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION offergate_issued_signatures_check_keys();

CREATE FUNCTION offergate_issued_signatures_keep_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a signature''s tenant and key never change' USING ERRCODE = 'integrity_constraint_violation';
END $$;

CREATE TRIGGER issued_signatures_keep_keys BEFORE UPDATE OF tenant_id, key_id ON issued_signatures
    FOR EACH ROW WHEN ((OLD.tenant_id, OLD.key_id) IS DISTINCT FROM (NEW.tenant_id, NEW.key_id))
    EXECUTE FUNCTION offergate_issued_signatures_keep_keys();

-- Keys removed (deleted, or their tenant or id changed): none of them may have signatures.
CREATE FUNCTION offergate_signing_keys_keep_used() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    used record;
BEGIN
    -- Most updates change a key's state only: nothing is removed, and the ledger is not read.
    WITH gone AS MATERIALIZED (
        SELECT DISTINCT k.tenant_id, k.key_id FROM removed k
        WHERE NOT EXISTS (SELECT 1 FROM signing_keys n WHERE n.tenant_id = k.tenant_id AND n.key_id = k.key_id))
    SELECT g.key_id INTO used FROM gone g
    WHERE EXISTS (SELECT 1 FROM issued_signatures s WHERE s.tenant_id = g.tenant_id AND s.key_id = g.key_id)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'signing key "%" has issued signatures: it cannot be removed or changed', used.key_id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER signing_keys_keep_used_on_delete AFTER DELETE ON signing_keys
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION offergate_signing_keys_keep_used();
CREATE TRIGGER signing_keys_keep_used_on_update AFTER UPDATE ON signing_keys
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION offergate_signing_keys_keep_used();

CREATE FUNCTION offergate_signing_keys_keep_used_on_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM issued_signatures) THEN
        RAISE EXCEPTION 'signing_keys cannot be truncated while issued_signatures has rows'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER signing_keys_keep_used_on_truncate BEFORE TRUNCATE ON signing_keys
    FOR EACH STATEMENT EXECUTE FUNCTION offergate_signing_keys_keep_used_on_truncate();
