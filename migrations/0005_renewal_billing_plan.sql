-- A renewal info's `billingPlanType` (BILLED_UPFRONT | MONTHLY) in our spelling: the plan a customer's chain renews
-- on, which decisions use when the client names none. NULL when Apple sent none or a value we do not know (the raw
-- JWS keeps what Apple sent).
ALTER TABLE apple_renewal_infos
    ADD COLUMN billing_plan text CHECK (billing_plan IS NULL OR billing_plan IN ('upFront', 'monthly'));
