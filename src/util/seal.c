/* seal.c - AES-256-GCM records of seal.h on OpenSSL's EVP. */
#include "util/seal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

#include "util/auth.h"
#include "util/bytes.h"
#include "util/err.h"

#define SEAL_SALT "mscclpp-seal v1"
#define SEAL_IV_BYTES 12
#define SEAL_CHUNK ((size_t)1 << 30) /* EVP takes int lengths: larger buffers go in pieces */

/* One direction's key: HKDF over (label | hello | server nonce). */
static mscclppResult_t derive_one(const uint8_t* key, const char* label, const void* hello, size_t hello_len,
                                  const uint8_t* nonce, size_t nonce_len, struct seal* out) {
  uint8_t info[4 + 256 + 64];
  if (hello_len > 256 || nonce_len > 64) return MPP_ERR(mscclppInternalError, "seal: transcript too long");
  memcpy(info, label, 4);
  memcpy(info + 4, hello, hello_len);
  memcpy(info + 4 + hello_len, nonce, nonce_len);
  seal_clear(out); /* a context re-derived (never in the library) drops its old state */
  mscclppResult_t res = auth_hkdf(key, SEAL_KEY_BYTES, SEAL_SALT, info, 4 + hello_len + nonce_len, out->key,
                                  SEAL_KEY_BYTES);
  OPENSSL_cleanse(info, sizeof(info));
  out->ready = res == mscclppSuccess;
  return res;
}

mscclppResult_t seal_derive(const uint8_t key[SEAL_KEY_BYTES], const void* hello, size_t hello_len,
                            const uint8_t* server_nonce, size_t nonce_len, enum seal_side side, struct seal* tx,
                            struct seal* rx) {
  const char* mine = side == SEAL_CLIENT ? "c2s" : "s2c"; /* 3 letters and their NUL */
  const char* theirs = side == SEAL_CLIENT ? "s2c" : "c2s";
  if (tx) MPP_CHECK(derive_one(key, mine, hello, hello_len, server_nonce, nonce_len, tx));
  if (rx) MPP_CHECK(derive_one(key, theirs, hello, hello_len, server_nonce, nonce_len, rx));
  return mscclppSuccess;
}

/* Runs in/out through ctx in pieces EVP accepts. 1 on success. */
static int crypt_all(EVP_CIPHER_CTX* ctx, int enc, const uint8_t* in, size_t len, uint8_t* out) {
  for (size_t done = 0; done < len;) {
    size_t n = len - done < SEAL_CHUNK ? len - done : SEAL_CHUNK;
    int got = 0;
    int ok = enc ? EVP_EncryptUpdate(ctx, out + done, &got, in + done, (int)n)
                 : EVP_DecryptUpdate(ctx, out + done, &got, in + done, (int)n);
    if (!ok || got != (int)n) return 0;
    done += n;
  }
  return 1;
}

/* The context of s, keyed for enc (encrypt) on first use: the AES key schedule is made once per
 * direction, each record only sets its IV. NULL when libcrypto fails. */
static EVP_CIPHER_CTX* keyed_ctx(struct seal* s, int enc) {
  if (s->ctx) return s->ctx;
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int ok = ctx && (enc ? EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, s->key, NULL)
                       : EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, s->key, NULL));
  if (!ok) {
    EVP_CIPHER_CTX_free(ctx);
    return NULL;
  }
  s->ctx = ctx;
  return ctx;
}

/* Starts one record on s's context: the counter's IV, then the caller's aad and the counter as
 * associated data. 1 on success. */
static int start(EVP_CIPHER_CTX* ctx, int enc, uint64_t counter, const void* aad, size_t aad_len) {
  uint8_t iv[SEAL_IV_BYTES] = {0}, ctr[SEAL_COUNTER_BYTES];
  le_put64(iv + 4, counter);
  le_put64(ctr, counter);
  int got = 0;
  int ok = enc ? EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, iv) : EVP_DecryptInit_ex(ctx, NULL, NULL, NULL, iv);
  if (ok && aad_len) ok = enc ? EVP_EncryptUpdate(ctx, NULL, &got, aad, (int)aad_len)
                              : EVP_DecryptUpdate(ctx, NULL, &got, aad, (int)aad_len);
  if (ok) ok = enc ? EVP_EncryptUpdate(ctx, NULL, &got, ctr, sizeof(ctr))
                   : EVP_DecryptUpdate(ctx, NULL, &got, ctr, sizeof(ctr));
  return ok;
}

mscclppResult_t seal_record(struct seal* s, const void* aad, size_t aad_len, const void* in, size_t len, uint8_t* out) {
  if (!s->ready) return MPP_ERR(mscclppInternalError, "seal: no key for this connection");
  if (s->counter == UINT64_MAX || aad_len > 1024)
    return MPP_ERR(mscclppInternalError, "seal: record counter exhausted or associated data too long");
  EVP_CIPHER_CTX* ctx = keyed_ctx(s, 1);
  int fin = 0;
  int ok = ctx && start(ctx, 1, s->counter, aad, aad_len) && crypt_all(ctx, 1, in, len, out) &&
           EVP_EncryptFinal_ex(ctx, out + len, &fin) && fin == 0 &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SEAL_TAG_BYTES, out + len + SEAL_COUNTER_BYTES);
  if (!ok) return MPP_ERR(mscclppSystemError, "libcrypto's AES-256-GCM failed to seal %zu bytes", len);
  le_put64(out + len, s->counter++);
  return mscclppSuccess;
}

mscclppResult_t seal_open(struct seal* s, const void* aad, size_t aad_len, const uint8_t* rec, size_t len, void* out,
                          const char* who) {
  if (!s->ready)
    return MPP_ERR(mscclppRemoteError, "the connection from %s is unusable after an earlier bad record", who);
  uint64_t got_ctr = le_get64(rec + len);
  if (got_ctr != s->counter || aad_len > 1024) {
    s->ready = 0;
    return MPP_ERR(mscclppRemoteError,
                   "%s: record number %llu arrived where %llu was due (replayed, dropped or reordered in transit); "
                   "connection closed",
                   who, (unsigned long long)got_ctr, (unsigned long long)s->counter);
  }
  uint8_t tag[SEAL_TAG_BYTES];
  memcpy(tag, rec + len + SEAL_COUNTER_BYTES, SEAL_TAG_BYTES);
  EVP_CIPHER_CTX* ctx = keyed_ctx(s, 0);
  int fin = 0;
  int ok = ctx && start(ctx, 0, s->counter, aad, aad_len) && crypt_all(ctx, 0, rec, len, out) &&
           EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SEAL_TAG_BYTES, tag) &&
           EVP_DecryptFinal_ex(ctx, (uint8_t*)out + len, &fin) > 0;
  if (!ok) {
    s->ready = 0;
    return MPP_ERR(mscclppRemoteError,
                   "%s: record %llu failed authentication (altered in transit, forged, or sealed under another key); "
                   "connection closed",
                   who, (unsigned long long)s->counter);
  }
  s->counter++;
  return mscclppSuccess;
}

void seal_clear(struct seal* s) {
  EVP_CIPHER_CTX_free(s->ctx); /* frees (and cleanses) the key schedule; NULL is fine */
  s->ctx = NULL;
  OPENSSL_cleanse(s->key, sizeof(s->key));
  s->counter = 0;
  s->ready = 0;
}
