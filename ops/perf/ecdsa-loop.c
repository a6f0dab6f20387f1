/* The signing call of the gateway's slots, alone: one P-256 key, one EVP_PKEY_CTX initialised once for ECDSA with
 * SHA-256, then EVP_PKEY_sign over a 32-byte digest N times (what Sources/OfferCrypto/Keys.swift does per signature,
 * without the digest of the message). Prints microseconds per signature. Used by ops/perf/ecdsa-pages. */
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    EVP_PKEY_CTX *ctx = key ? EVP_PKEY_CTX_new(key, NULL) : NULL;
    if (!ctx || EVP_PKEY_sign_init(ctx) != 1 || EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) != 1) {
        fprintf(stderr, "ecdsa-loop: OpenSSL set-up failed\n");
        return 1;
    }
    unsigned char digest[32] = {0}, der[80];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long i = 0; i < n; i++) {
        size_t length = sizeof der;
        digest[i % 32] ^= (unsigned char)i;
        if (EVP_PKEY_sign(ctx, der, &length, digest, sizeof digest) != 1) {
            fprintf(stderr, "ecdsa-loop: EVP_PKEY_sign failed\n");
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (double)(end.tv_sec - start.tv_sec) + (double)(end.tv_nsec - start.tv_nsec) / 1e9;
    printf("%ld signatures in %.3f s: %.1f us each\n", n, seconds, seconds / (double)n * 1e6);
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(key);
    return 0;
}
