/* net_sig.c - MAC and replay window of the net transport's signal messages (net_sig.h). */
#include "transport/net_sig.h"

#include <stddef.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "util/bytes.h"
#include "util/err.h"

mscclppResult_t net_sig_key(const uint8_t comm_key[AUTH_KEY_BYTES], int from, int to, int tag,
                            const uint8_t from_nonce[NET_SIG_NONCE_BYTES], const uint8_t to_nonce[NET_SIG_NONCE_BYTES],
                            uint8_t out[AUTH_KEY_BYTES]) {
  uint8_t info[12 + 2 * NET_SIG_NONCE_BYTES];
  le_put32(info, (uint32_t)from);
  le_put32(info + 4, (uint32_t)to);
  le_put32(info + 8, (uint32_t)tag);
  memcpy(info + 12, from_nonce, NET_SIG_NONCE_BYTES);
  memcpy(info + 12 + NET_SIG_NONCE_BYTES, to_nonce, NET_SIG_NONCE_BYTES);
  return auth_hkdf(comm_key, AUTH_KEY_BYTES, "mscclpp-net-signal-v1", info, sizeof(info), out, AUTH_KEY_BYTES);
}

mscclppResult_t net_sig_mac_init(struct net_sig_mac* m, const uint8_t key[AUTH_KEY_BYTES]) {
  m->ctx = NULL;
  EVP_MAC* mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
  EVP_MAC_CTX* ctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
  EVP_MAC_free(mac); /* the context keeps its own reference */
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char*)"SHA256", 0),
                         OSSL_PARAM_construct_end()};
  if (ctx == NULL || EVP_MAC_init(ctx, key, AUTH_KEY_BYTES, params) != 1) {
    EVP_MAC_CTX_free(ctx);
    return MPP_ERR(mscclppSystemError, "net transport: libcrypto's HMAC-SHA256 could not be set up");
  }
  m->ctx = ctx;
  return mscclppSuccess;
}

void net_sig_mac_free(struct net_sig_mac* m) {
  EVP_MAC_CTX_free(m->ctx);
  m->ctx = NULL;
}

/* HMAC-SHA256 of the fields before the MAC; all zero if libcrypto fails (which then checks nothing). */
static void mac_of(struct net_sig_mac* m, const struct net_sig* s, uint8_t out[AUTH_MAC_BYTES]) {
  size_t len = 0;
  /* A NULL key restarts the HMAC with the key already set. */
  if (m->ctx == NULL || EVP_MAC_init(m->ctx, NULL, 0, NULL) != 1 ||
      EVP_MAC_update(m->ctx, (const unsigned char*)s, offsetof(struct net_sig, mac)) != 1 ||
      EVP_MAC_final(m->ctx, out, &len, AUTH_MAC_BYTES) != 1 || len != AUTH_MAC_BYTES)
    memset(out, 0, AUTH_MAC_BYTES);
}

void net_sig_seal(struct net_sig_mac* m, struct net_sig* s) {
  uint8_t mac[AUTH_MAC_BYTES];
  mac_of(m, s, mac);
  memcpy(s->mac, mac, NET_SIG_MAC_BYTES);
}

int net_sig_mac_ok(struct net_sig_mac* m, const struct net_sig* s) {
  uint8_t mac[AUTH_MAC_BYTES], zero[AUTH_MAC_BYTES] = {0};
  mac_of(m, s, mac);
  if (auth_equal(mac, zero, sizeof(zero))) return 0; /* libcrypto failed: accept nothing */
  return auth_equal(mac, s->mac, NET_SIG_MAC_BYTES);
}

int net_replay_accept(struct net_replay* r, uint64_t seq) {
  if (seq == 0) return 0;
  if (seq > r->top) {
    uint64_t shift = seq - r->top;
    r->seen = shift >= NET_SIG_WINDOW ? 0 : r->seen << shift;
    r->seen |= 1;
    r->top = seq;
    return 1;
  }
  uint64_t back = r->top - seq;
  if (back >= NET_SIG_WINDOW || (r->seen >> back) & 1) return 0;
  r->seen |= 1ull << back;
  return 1;
}
