-- Retention Messaging (API.md §12): what a tenant answers when Apple asks at cancellation, and every answer given.
--
-- * retention_settings: one row per tenant that configured Retention Messaging (retention.configure): the default
--   message and the time budget. retention_messages: the approved message of each promotional offer (kind 'offer')
--   and of each alternate product (kind 'product'), in the order configured (position). retention.configure
--   replaces a tenant's rows in one transaction.
-- * Changes to either notify `offergate_catalog` with the tenant id (the function of 0001), so every gateway drops
--   its copy of the tenant's retention settings together with its catalog.
-- * retention_answers: one row per answer (time, Apple's request id, customer, what was answered, latency), written
--   after the answer (group commit), so recording never costs an answer its budget. No foreign key to the catalog:
--   an answer is history, and stays when an offer is removed.

CREATE TABLE retention_settings (
    tenant_id           uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    default_message_id  text        NOT NULL CHECK (length(default_message_id) BETWEEN 1 AND 100),
    budget_ms           integer     NOT NULL CHECK (budget_ms BETWEEN 1 AND 10000),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id)
);

CREATE TABLE retention_messages (
    tenant_id   uuid    NOT NULL REFERENCES retention_settings (tenant_id) ON DELETE CASCADE,
    kind        text    NOT NULL CHECK (kind IN ('offer', 'product')),
    target_id   text    NOT NULL CHECK (length(target_id) BETWEEN 1 AND 200),
    message_id  text    NOT NULL CHECK (length(message_id) BETWEEN 1 AND 100),
    position    integer NOT NULL,
    PRIMARY KEY (tenant_id, kind, target_id)
);

CREATE TRIGGER retention_settings_notify AFTER INSERT OR UPDATE OR DELETE ON retention_settings
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_catalog();
CREATE TRIGGER retention_messages_notify AFTER INSERT OR UPDATE OR DELETE ON retention_messages
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_catalog();

CREATE TABLE retention_answers (
    tenant_id                uuid        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    answer_id                bigint      GENERATED ALWAYS AS IDENTITY,
    answered_at              timestamptz NOT NULL,
    -- Apple's requestIdentifier; NULL when the request could not be read (the answer then is the default message).
    request_id               uuid,
    original_transaction_id  text,
    customer_id              text,
    environment              text,
    kind                     text        NOT NULL CHECK (kind IN ('promotionalOffer', 'alternateProduct', 'message')),
    message_id               text        NOT NULL,
    offer_id                 text,
    product_id               text,
    -- The signature's nonce (its row in issued_signatures) for a promotional offer.
    nonce                    uuid,
    -- Why no promotional offer was answered (no_customer, no_offer, budget_exceeded, unavailable, ...).
    fallback_reason          text,
    latency_us               bigint      NOT NULL,
    PRIMARY KEY (tenant_id, answer_id)
);
CREATE INDEX retention_answers_by_time ON retention_answers (tenant_id, answered_at);
