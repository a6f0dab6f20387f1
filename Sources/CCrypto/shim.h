#ifndef OFFERGATE_CCRYPTO_SHIM_H
#define OFFERGATE_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/pem.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/bn.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>

// Function-like macros (and variadic functions) are not imported into Swift; wrap the ones we need.
static inline void ccrypto_free(void *ptr) { OPENSSL_free(ptr); }
static inline int ccrypto_bn_num_bytes(const BIGNUM *bn) { return BN_num_bytes(bn); }

/// `BIO_get_mem_data`: pointer to and length of a memory BIO's contents (not NUL-terminated).
static inline long ccrypto_bio_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

/// A fresh P-256 key pair (`EVP_EC_gen` is a macro over the variadic `EVP_PKEY_Q_keygen`).
static inline EVP_PKEY *ccrypto_ec_p256_generate(void) { return EVP_EC_gen("P-256"); }

/// Password callback that refuses to supply a password, so an encrypted PEM never prompts on a terminal.
static inline int ccrypto_no_password(char *buf, int size, int rwflag, void *u) {
    (void)buf; (void)size; (void)rwflag; (void)u;
    return 0;
}

/// `PEM_read_bio_PrivateKey` that never asks for a password.
static inline EVP_PKEY *ccrypto_pem_read_private_key(BIO *bio) {
    return PEM_read_bio_PrivateKey(bio, NULL, ccrypto_no_password, NULL);
}

/// GCM control wrappers (the ctrl constants are plain ints but keeping them here keeps Swift free of magic numbers).
static inline int ccrypto_gcm_get_tag(EVP_CIPHER_CTX *ctx, unsigned char *tag, int len) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, len, tag);
}
static inline int ccrypto_gcm_set_tag(EVP_CIPHER_CTX *ctx, unsigned char *tag, int len) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, len, tag);
}

// MARK: X.509 (Apple signed data: OfferCrypto/AppleSignedData)
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <openssl/objects.h>

/// `STACK_OF(X509)` accessors are function-like macros in OpenSSL 3; these wrappers make them callable from Swift.
static inline STACK_OF(X509) *ccrypto_sk_x509_new_null(void) { return sk_X509_new_null(); }
static inline int ccrypto_sk_x509_push(STACK_OF(X509) *stack, X509 *cert) { return sk_X509_push(stack, cert); }
static inline void ccrypto_sk_x509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }
static inline int ccrypto_sk_x509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }
static inline X509 *ccrypto_sk_x509_value(const STACK_OF(X509) *stack, int index) { return sk_X509_value(stack, index); }

/// `PEM_read_bio_X509` without a password callback (certificates are never encrypted).
static inline X509 *ccrypto_pem_read_x509(BIO *bio) { return PEM_read_bio_X509(bio, NULL, ccrypto_no_password, NULL); }
#endif
