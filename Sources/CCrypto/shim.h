#ifndef OFFERGATE_CCRYPTO_SHIM_H
#define OFFERGATE_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/pem.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>

// Function-like macros are not imported into Swift; wrap the ones we need.
static inline void ccrypto_free(void *ptr) { OPENSSL_free(ptr); }
static inline int ccrypto_bn_num_bytes(const BIGNUM *bn) { return BN_num_bytes(bn); }
#endif
