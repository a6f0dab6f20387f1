-- Apple's signed data (API.md §8): verified transactions, renewal infos and notifications, kept with their raw JWS
-- for audit, and the links that say which customer an `originalTransactionId` belongs to.
--
-- * Every primary key starts with tenant_id (as in 0001). Environments are kept apart in the keys where Apple's ids
--   may repeat across them (renewal infos); transaction ids are unique across environments at Apple.
-- * customer_id is NULL while nobody is linked to the transaction's originalTransactionId; a link fills it in.
-- * Changes to a customer's Apple data notify `offergate_customer` with `<tenant uuid>:<customer id>` (as 0002 does
--   for recorded transactions); rows without a customer announce nothing (nobody can have them cached).
-- * A change to a tenant's settings (tenants.update) notifies `offergate_catalog` with the tenant id: gateways drop
--   that tenant's catalog snapshot, which carries the settings decisions read, and their copy of the tenant.

ALTER TABLE tenants
    ADD COLUMN app_apple_id  bigint  CHECK (app_apple_id IS NULL OR app_apple_id > 0),
    ADD COLUMN allow_sandbox boolean NOT NULL DEFAULT false,
    ADD COLUMN allow_xcode   boolean NOT NULL DEFAULT false;

CREATE TRIGGER tenants_notify AFTER UPDATE ON tenants
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_catalog();

CREATE TABLE apple_transactions (
    tenant_id                uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    transaction_id           text        NOT NULL CHECK (length(transaction_id) BETWEEN 1 AND 100),
    original_transaction_id  text        NOT NULL CHECK (length(original_transaction_id) BETWEEN 1 AND 100),
    environment              text        NOT NULL CHECK (environment IN ('Production', 'Sandbox', 'Xcode', 'LocalTesting')),
    customer_id              text        CHECK (customer_id IS NULL OR octet_length(customer_id) BETWEEN 1 AND 256),
    app_account_token        text,
    product_id               text        NOT NULL CHECK (length(product_id) BETWEEN 1 AND 255),
    subscription_group_id    text,
    purchase_date            timestamptz NOT NULL,
    original_purchase_date   timestamptz,
    expires_date             timestamptz,
    -- Apple's number as sent (1-4 are the API's types, 5 a retention offer; later values are kept too).
    offer_type               integer,
    offer_id                 text,
    offer_discount_type      text,
    offer_period             text,
    in_app_ownership_type    text,
    revocation_date          timestamptz,
    revocation_reason        integer,
    -- Apple's `revocationType` (e.g. REFUND_FULL, REFUND_PRORATED, FAMILY_REVOKE), as sent.
    revocation_type          text,
    transaction_type         text,
    signed_date              timestamptz NOT NULL,
    authenticity             text        NOT NULL CHECK (authenticity IN ('verifiedChain', 'unverifiedDevelopmentData')),
    jws                      text        NOT NULL,
    received_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, transaction_id)
);
CREATE INDEX apple_transactions_by_customer ON apple_transactions (tenant_id, customer_id);
CREATE INDEX apple_transactions_by_original ON apple_transactions (tenant_id, original_transaction_id);

-- The latest renewal info per subscription chain and environment: replaced only by one with a later signedDate.
CREATE TABLE apple_renewal_infos (
    tenant_id                    uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    original_transaction_id      text        NOT NULL CHECK (length(original_transaction_id) BETWEEN 1 AND 100),
    environment                  text        NOT NULL CHECK (environment IN ('Production', 'Sandbox', 'Xcode', 'LocalTesting')),
    customer_id                  text        CHECK (customer_id IS NULL OR octet_length(customer_id) BETWEEN 1 AND 256),
    product_id                   text,
    auto_renew_product_id        text,
    auto_renew_status            integer,
    is_in_billing_retry          boolean,
    grace_period_expires_date    timestamptz,
    expiration_intent            integer,
    renewal_date                 timestamptz,
    -- NULL when Apple sent no list (our own win-back rules apply); an array (maybe empty) when it did.
    eligible_win_back_offer_ids  text[],
    signed_date                  timestamptz NOT NULL,
    authenticity                 text        NOT NULL CHECK (authenticity IN ('verifiedChain', 'unverifiedDevelopmentData')),
    jws                          text        NOT NULL,
    received_at                  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, original_transaction_id, environment)
);
CREATE INDEX apple_renewal_infos_by_customer ON apple_renewal_infos (tenant_id, customer_id);

-- Every notification seen, once (idempotency per notificationUUID).
CREATE TABLE apple_notifications (
    tenant_id                uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    notification_uuid        uuid        NOT NULL,
    notification_type        text        NOT NULL,
    subtype                  text,
    environment              text        NOT NULL CHECK (environment IN ('Production', 'Sandbox', 'Xcode', 'LocalTesting')),
    transaction_id           text,
    original_transaction_id  text,
    customer_id              text,
    signed_date              timestamptz NOT NULL,
    jws                      text        NOT NULL,
    received_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, notification_uuid)
);

-- Which customer a subscription chain belongs to (customers.link, appstore.transactions' customerId,
-- subscriptions.record's originalTransactionId, or the transaction's appAccountToken).
CREATE TABLE customer_links (
    tenant_id                uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    original_transaction_id  text        NOT NULL CHECK (length(original_transaction_id) BETWEEN 1 AND 100),
    customer_id              text        NOT NULL CHECK (octet_length(customer_id) BETWEEN 1 AND 256),
    linked_at                timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, original_transaction_id)
);

CREATE FUNCTION offergate_notify_apple_customer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.customer_id IS NOT NULL THEN
        PERFORM pg_notify('offergate_customer', OLD.tenant_id::text || ':' || OLD.customer_id);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.customer_id IS NOT NULL THEN
        PERFORM pg_notify('offergate_customer', NEW.tenant_id::text || ':' || NEW.customer_id);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER apple_transactions_notify AFTER INSERT OR UPDATE OR DELETE ON apple_transactions
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_apple_customer();
CREATE TRIGGER apple_renewal_infos_notify AFTER INSERT OR UPDATE OR DELETE ON apple_renewal_infos
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_apple_customer();
