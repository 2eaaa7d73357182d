/* auth.c - libcrypto-backed keys, MACs and the handshake of auth.h. */
#include "util/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <string.h>

#include "util/bytes.h"
#include "util/err.h"
#include "util/socket.h"

#define MAGIC_CHALLENGE 0x4341504du /* "MPAC" */
#define MAGIC_PROOF 0x5041504du     /* "MPAP" */

mscclppResult_t auth_random(void* buf, size_t n) {
  if (n > (size_t)INT32_MAX || RAND_bytes(buf, (int)n) != 1)
    return MPP_ERR(mscclppSystemError, "libcrypto's RAND_bytes failed for %zu bytes", n);
  return mscclppSuccess;
}

mscclppResult_t auth_hkdf(const void* ikm, size_t ikm_len, const char* salt, const void* info, size_t info_len,
                          uint8_t* out, size_t out_len) {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
  size_t got = out_len;
  int ok = ctx != NULL && EVP_PKEY_derive_init(ctx) > 0 && EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
           EVP_PKEY_CTX_set1_hkdf_salt(ctx, (const unsigned char*)salt, (int)strlen(salt)) > 0 &&
           EVP_PKEY_CTX_set1_hkdf_key(ctx, ikm, (int)ikm_len) > 0 &&
           EVP_PKEY_CTX_add1_hkdf_info(ctx, info, (int)info_len) > 0 && EVP_PKEY_derive(ctx, out, &got) > 0 &&
           got == out_len;
  EVP_PKEY_CTX_free(ctx);
  return ok ? mscclppSuccess : MPP_ERR(mscclppSystemError, "libcrypto's HKDF-SHA256 failed");
}

void auth_mac(const uint8_t key[AUTH_KEY_BYTES], const char* label, const struct auth_part* parts, int n,
              uint8_t out[AUTH_MAC_BYTES]) {
  /* One buffer, one HMAC() call: small messages only (hellos, nonces). */
  uint8_t buf[512];
  size_t len = strlen(label) + 1;
  memcpy(buf, label, len);
  for (int i = 0; i < n; i++) {
    if (len + 4 + parts[i].len > sizeof(buf)) { /* never with the library's messages: a MAC nothing matches */
      if (RAND_bytes(out, AUTH_MAC_BYTES) != 1) memset(out, 0xa5, AUTH_MAC_BYTES);
      return;
    }
    le_put32(buf + len, (uint32_t)parts[i].len);
    memcpy(buf + len + 4, parts[i].p, parts[i].len);
    len += 4 + parts[i].len;
  }
  unsigned int mlen = AUTH_MAC_BYTES;
  if (!HMAC(EVP_sha256(), key, AUTH_KEY_BYTES, buf, len, out, &mlen)) memset(out, 0, AUTH_MAC_BYTES);
  OPENSSL_cleanse(buf, sizeof(buf));
}

int auth_equal(const void* a, const void* b, size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

/* The MAC of one side ("server" or "client") over hello and the server nonce. */
static void side_mac(const uint8_t* key, const char* side, const void* hello, size_t hello_len, const uint8_t* nonce,
                     uint8_t out[AUTH_MAC_BYTES]) {
  struct auth_part parts[2] = {{hello, hello_len}, {nonce, AUTH_NONCE_BYTES}};
  auth_mac(key, side, parts, 2, out);
}

mscclppResult_t auth_make_challenge(const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                                    uint8_t nonce[AUTH_NONCE_BYTES], uint8_t out[AUTH_CHALLENGE_BYTES]) {
  MPP_CHECK(auth_random(nonce, AUTH_NONCE_BYTES));
  memset(out, 0, AUTH_CHALLENGE_BYTES);
  le_put32(out, MAGIC_CHALLENGE);
  le_put16(out + 4, AUTH_VERSION);
  memcpy(out + 8, nonce, AUTH_NONCE_BYTES);
  side_mac(key, "mscclpp-auth server", hello, hello_len, nonce, out + 8 + AUTH_NONCE_BYTES);
  return mscclppSuccess;
}

mscclppResult_t auth_answer_challenge(const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                                      const uint8_t chal[AUTH_CHALLENGE_BYTES], const char* who,
                                      uint8_t proof[AUTH_PROOF_BYTES]) {
  if (le_get32(chal) != MAGIC_CHALLENGE)
    return MPP_ERR(mscclppRemoteError, "%s answered our hello with something that is not a challenge", who);
  if (le_get16(chal + 4) != AUTH_VERSION)
    return MPP_ERR(mscclppRemoteError, "%s speaks handshake version %u, this library speaks %d", who,
                   le_get16(chal + 4), AUTH_VERSION);
  uint8_t want[AUTH_MAC_BYTES];
  side_mac(key, "mscclpp-auth server", hello, hello_len, chal + 8, want);
  if (!auth_equal(want, chal + 8 + AUTH_NONCE_BYTES, AUTH_MAC_BYTES))
    return MPP_ERR(mscclppRemoteError,
                   "%s did not prove that it knows the job's secret: the ranks were given different secrets "
                   "(MSCCLPP_BOOTSTRAP_SECRET) or another process answered",
                   who);
  memset(proof, 0, AUTH_PROOF_BYTES);
  le_put32(proof, MAGIC_PROOF);
  le_put16(proof + 4, AUTH_VERSION);
  side_mac(key, "mscclpp-auth client", hello, hello_len, chal + 8, proof + 8);
  return mscclppSuccess;
}

int auth_check_proof(const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                     const uint8_t nonce[AUTH_NONCE_BYTES], const uint8_t proof[AUTH_PROOF_BYTES]) {
  uint8_t want[AUTH_MAC_BYTES];
  side_mac(key, "mscclpp-auth client", hello, hello_len, nonce, want);
  int header_ok = le_get32(proof) == MAGIC_PROOF && le_get16(proof + 4) == AUTH_VERSION && le_get16(proof + 6) == 0;
  return header_ok & auth_equal(want, proof + 8, AUTH_MAC_BYTES);
}

mscclppResult_t auth_client(int fd, const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                            uint64_t deadline_ns, const char* who) {
  uint8_t chal[AUTH_CHALLENGE_BYTES], proof[AUTH_PROOF_BYTES];
  mscclppResult_t res = sock_send_all(fd, hello, hello_len, deadline_ns);
  if (res == mscclppSuccess) res = sock_recv_all(fd, chal, sizeof(chal), deadline_ns);
  if (res == mscclppRemoteError)
    return MPP_ERR(res, "%s refused our hello (another library version, or not the peer we meant)", who);
  if (res != mscclppSuccess) return MPP_ERR(res, "handshake with %s: no challenge in time", who);
  MPP_CHECK(auth_answer_challenge(key, hello, hello_len, chal, who, proof));
  res = sock_send_all(fd, proof, sizeof(proof), deadline_ns);
  if (res != mscclppSuccess) return MPP_ERR(res, "handshake with %s: sending our proof failed", who);
  return mscclppSuccess;
}

mscclppResult_t auth_server(int fd, const uint8_t key[AUTH_KEY_BYTES], const void* hello, size_t hello_len,
                            uint64_t deadline_ns, const char* who) {
  uint8_t nonce[AUTH_NONCE_BYTES], chal[AUTH_CHALLENGE_BYTES], proof[AUTH_PROOF_BYTES];
  MPP_CHECK(auth_make_challenge(key, hello, hello_len, nonce, chal));
  mscclppResult_t res = sock_send_all(fd, chal, sizeof(chal), deadline_ns);
  if (res == mscclppSuccess) res = sock_recv_all(fd, proof, sizeof(proof), deadline_ns);
  if (res != mscclppSuccess) return MPP_ERR(res, "handshake with %s: no proof in time", who);
  if (!auth_check_proof(key, hello, hello_len, nonce, proof))
    return MPP_ERR(mscclppRemoteError, "%s did not prove that it knows the communicator's key", who);
  return mscclppSuccess;
}
