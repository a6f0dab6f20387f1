-- Offers are named by product and id together (issue 12 point 5; APPLE_OFFERS §6). StoreKit names a promotional
-- offer by its product and offer id, and Xcode lets one `offerID` sit on two subscriptions, so an offer id alone no
-- longer names one offer: the key of `offers` becomes (tenant_id, product_id, offer_id), with the tenant id first as
-- everywhere (0001). Which offer a client means when it gives an id without a product is docs/api.md §8 "Offers are
-- named by product and id".
--
-- Campaigns named their offer by id alone (a foreign key on the old key). They now carry the offer's product too,
-- filled from the offer each one names (unique until now), so every campaign keeps exactly the offer it had.
-- Catalog changes keep notifying `offergate_catalog` (0001's triggers are per row, unaffected).

ALTER TABLE campaigns ADD COLUMN product_id text;
UPDATE campaigns c SET product_id = o.product_id
FROM offers o WHERE o.tenant_id = c.tenant_id AND o.offer_id = c.offer_id;
ALTER TABLE campaigns ALTER COLUMN product_id SET NOT NULL;
ALTER TABLE campaigns DROP CONSTRAINT campaigns_tenant_id_offer_id_fkey;

ALTER TABLE offers DROP CONSTRAINT offers_pkey;
ALTER TABLE offers ADD PRIMARY KEY (tenant_id, product_id, offer_id);
-- The new key's prefix (tenant_id, product_id) serves what offers_by_product did; lookups by id alone (a campaign
-- naming only an offer id) get their own index.
DROP INDEX offers_by_product;
CREATE INDEX offers_by_id ON offers (tenant_id, offer_id);

ALTER TABLE campaigns ADD CONSTRAINT campaigns_offer_fkey
    FOREIGN KEY (tenant_id, product_id, offer_id) REFERENCES offers (tenant_id, product_id, offer_id);
