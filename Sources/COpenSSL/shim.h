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
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
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

/* For HTTPClient's TLS sessions: option bits and the SSL_CTX_/SSL_ macros that wrap
   SSL_ctrl, which Swift cannot import. */
static const uint64_t AB_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t AB_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static inline long ab_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_min_proto_version(ctx, version);
}
static inline long ab_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static const long AB_SSL_MODE_ENABLE_PARTIAL_WRITE = SSL_MODE_ENABLE_PARTIAL_WRITE;
static const long AB_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER = SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER;
static inline long ab_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

#endif
