-- Billing plans (API.md §3, APPLE_OFFERS §9): an offer may target one plan, `upFront` or `monthly`; NULL = every
-- plan (all offers stored before this migration). Catalog changes already notify `offergate_catalog` (0001).
ALTER TABLE offers
    ADD COLUMN billing_plan text CHECK (billing_plan IS NULL OR billing_plan IN ('upFront', 'monthly'));
