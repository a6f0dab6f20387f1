-- B4c's baseline: the history read OfferGate's cold path makes for one customer (CustomerRecordsRepository: the
-- same three statements, the same columns, pipelined into one round trip), for a customer chosen at random among
-- the seeded ones with a history (offer-load's HistorySeed: h<i> with i % 10 < 8), as the gateway's runs ask about.
-- pgbench -D sets tenant (a UUID), prefix and copies; customer ids are <prefix>-h<i>-x<k>.
\set j random(0, 799)
\set i (:j / 8) * 10 + :j % 8
\set k random(1, :copies)
\startpipeline
SELECT r.*, c.customer_id
FROM unnest((SELECT ARRAY[:prefix::text || '-h' || :i || '-x' || :k])) AS c(customer_id)
CROSS JOIN LATERAL (
    SELECT transaction_id, original_transaction_id, product_id, purchase_date, expires_date, offer_type, offer_id,
           auto_renew, in_billing_retry, grace_period_expires_date, revocation_date
    FROM subscription_transactions s
    WHERE s.tenant_id = :tenant::uuid AND s.customer_id = c.customer_id
    ORDER BY purchase_date, transaction_id) r;
SELECT r.*, c.customer_id
FROM unnest((SELECT ARRAY[:prefix::text || '-h' || :i || '-x' || :k])) AS c(customer_id)
CROSS JOIN LATERAL (
    SELECT transaction_id, original_transaction_id, environment, product_id, purchase_date, expires_date, offer_type,
           offer_id, offer_discount_type, in_app_ownership_type, revocation_date, signed_date
    FROM apple_transactions a
    WHERE a.tenant_id = :tenant::uuid AND a.customer_id = c.customer_id
    ORDER BY purchase_date, transaction_id) r;
SELECT r.*, c.customer_id
FROM unnest((SELECT ARRAY[:prefix::text || '-h' || :i || '-x' || :k])) AS c(customer_id)
CROSS JOIN LATERAL (
    SELECT original_transaction_id, environment, product_id, auto_renew_product_id, auto_renew_status,
           is_in_billing_retry, grace_period_expires_date, eligible_win_back_offer_ids, signed_date, billing_plan
    FROM apple_renewal_infos i
    WHERE i.tenant_id = :tenant::uuid AND i.customer_id = c.customer_id
    ORDER BY original_transaction_id, environment) r;
\endpipeline
