// OpenSSL's libcrypto, for the SHA-256 and SHA-512 of completed files (end-to-end digests). Only the EVP digest
// calls are used; they take the CPU's SHA instructions where it has them.
#include <openssl/evp.h>
