// OpenSSL's libcrypto, for the SHA-256 and SHA-512 of completed files (end-to-end digests) and the HMAC-SHA256 of
// object-store request signatures (AWS Signature V4). Only the EVP digest calls and the one-shot HMAC are used;
// they take the CPU's SHA instructions where it has them.
#include <openssl/evp.h>
#include <openssl/hmac.h>
