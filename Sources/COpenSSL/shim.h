#ifndef AUTHBROKER_COPENSSL_SHIM_H
#define AUTHBROKER_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/crypto.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>
#ifdef __linux__
#include <sys/random.h>
#endif

/* Swift imports OpenSSL's string macros as bridged Strings whose C pointers do not
   outlive the call that made them, while OSSL_PARAM_BLD_push_* keeps the pointer until
   OSSL_PARAM_BLD_to_param. These constants point at static storage instead. */
static const char *const AB_OSSL_PKEY_PARAM_RSA_N = OSSL_PKEY_PARAM_RSA_N;
static const char *const AB_OSSL_PKEY_PARAM_RSA_E = OSSL_PKEY_PARAM_RSA_E;
static const char *const AB_OSSL_PKEY_PARAM_GROUP_NAME = OSSL_PKEY_PARAM_GROUP_NAME;
static const char *const AB_OSSL_PKEY_PARAM_PUB_KEY = OSSL_PKEY_PARAM_PUB_KEY;
static const char *const AB_SN_X9_62_PRIME256V1 = SN_X9_62_prime256v1;
static const char *const AB_SN_SECP384R1 = SN_secp384r1;
static const char *const AB_KEYTYPE_RSA = "RSA";
static const char *const AB_KEYTYPE_EC = "EC";
static const char *const AB_KEYTYPE_ED25519 = "ED25519";

/* EVP_PKEY_PUBLIC_KEY and OPENSSL_free are macros Swift cannot import. */
static const int AB_EVP_PKEY_PUBLIC_KEY = EVP_PKEY_PUBLIC_KEY;
static inline void ab_openssl_free(void *pointer) { OPENSSL_free(pointer); }

#endif
