-- Changes to API keys are announced like catalog changes: on channel `offergate_catalog`, with the tenant id.
--
-- Why: a request authenticated per call (`POST /v1/rpc` with `Authorization: Bearer <key>`) read the key's row from
-- PostgreSQL every time: one query, and the loss of every HTTP request while the database was unreachable. Gateways
-- now keep the live keys they have seen (the lookup, the SHA-256 and the tenant, never the key itself) and forget
-- them when a tenant's keys or settings change. `tenants.rotateApiKey` forgets them at once in the process that
-- rotates; this trigger tells every other gateway, as 0001's triggers do for catalogs and signing keys.
CREATE TRIGGER api_keys_notify AFTER INSERT OR UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION offergate_notify_catalog();
