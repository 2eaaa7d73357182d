/* net_sig.c - MAC and replay window of the net transport's signal messages (net_sig.h). */
#include "transport/net_sig.h"

#include <stddef.h>
#include <string.h>

#include "util/bytes.h"

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

static void mac_of(const uint8_t key[AUTH_KEY_BYTES], const struct net_sig* s, uint8_t out[AUTH_MAC_BYTES]) {
  struct auth_part part = {s, offsetof(struct net_sig, mac)};
  auth_mac(key, "net-signal", &part, 1, out);
}

void net_sig_seal(const uint8_t key[AUTH_KEY_BYTES], struct net_sig* s) {
  uint8_t mac[AUTH_MAC_BYTES];
  mac_of(key, s, mac);
  memcpy(s->mac, mac, NET_SIG_MAC_BYTES);
}

int net_sig_mac_ok(const uint8_t key[AUTH_KEY_BYTES], const struct net_sig* s) {
  uint8_t mac[AUTH_MAC_BYTES];
  mac_of(key, s, mac);
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
