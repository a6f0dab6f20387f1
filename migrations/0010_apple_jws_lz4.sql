-- Apple's raw JWS (kept for audit, migration 0003) are 5-20 KB each and TOASTed; PostgreSQL's default pglz
-- compression of them was the largest single cost of storing a notification (B11: `perf` put pglz_compress above
-- every other function of the backends). lz4 compresses them about as well at a fraction of the CPU. A server built
-- without lz4 keeps the default: the columns stay readable either way, and existing values are not rewritten.
DO $$
BEGIN
    ALTER TABLE apple_notifications ALTER COLUMN jws SET COMPRESSION lz4;
    ALTER TABLE apple_transactions ALTER COLUMN jws SET COMPRESSION lz4;
    ALTER TABLE apple_renewal_infos ALTER COLUMN jws SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    NULL;
END $$;
