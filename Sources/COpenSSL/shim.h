#ifndef AUTHBROKER_COPENSSL_SHIM_H
#define AUTHBROKER_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/crypto.h>
#ifdef __linux__
#include <sys/random.h>
#endif
#endif
