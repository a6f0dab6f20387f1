-- Customers' histories are cached by every gateway process (offers.best is read far more often than
-- subscriptions.record is written). Each change to a customer's transactions notifies channel `offergate_customer`
-- with `<tenant uuid>:<customer id>`, so every process drops its cached copy of that customer.

CREATE FUNCTION offergate_notify_customer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('offergate_customer', OLD.tenant_id::text || ':' || OLD.customer_id);
    END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.customer_id IS DISTINCT FROM OLD.customer_id) THEN
        PERFORM pg_notify('offergate_customer', NEW.tenant_id::text || ':' || NEW.customer_id);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER subscription_transactions_notify AFTER INSERT OR UPDATE OR DELETE ON subscription_transactions
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_customer();
