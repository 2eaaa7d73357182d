/* transport_netsig.c - the net transport's signal messages (net_sig.h): the MAC covers every field
 * and needs the connection's key; keys differ per direction, tag and nonces; the replay window
 * accepts each sequence number once, in any order within the window, and nothing older. Prints
 * the cost of sealing and checking one message. */
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "transport/net_sig.h"

static void keys(uint8_t comm[AUTH_KEY_BYTES], uint8_t na[NET_SIG_NONCE_BYTES], uint8_t nb[NET_SIG_NONCE_BYTES]) {
  for (int i = 0; i < AUTH_KEY_BYTES; i++) comm[i] = (uint8_t)(i * 7 + 1);
  for (int i = 0; i < NET_SIG_NONCE_BYTES; i++) {
    na[i] = (uint8_t)(i + 100);
    nb[i] = (uint8_t)(i + 200);
  }
}

static void test_keys(void) {
  uint8_t comm[AUTH_KEY_BYTES], na[NET_SIG_NONCE_BYTES], nb[NET_SIG_NONCE_BYTES];
  uint8_t k1[AUTH_KEY_BYTES], k2[AUTH_KEY_BYTES];
  keys(comm, na, nb);
  CHECK_OK(net_sig_key(comm, 0, 1, 5, na, nb, k1));
  CHECK_OK(net_sig_key(comm, 0, 1, 5, na, nb, k2));
  CHECK_MSG(memcmp(k1, k2, sizeof(k1)) == 0, "the same inputs gave different keys");
  CHECK_OK(net_sig_key(comm, 1, 0, 5, nb, na, k2)); /* the other direction */
  CHECK_MSG(memcmp(k1, k2, sizeof(k1)) != 0, "both directions have one key");
  CHECK_OK(net_sig_key(comm, 0, 1, 6, na, nb, k2)); /* another tag */
  CHECK_MSG(memcmp(k1, k2, sizeof(k1)) != 0, "two tags have one key");
  nb[3] ^= 1; /* the same connection made again: another nonce */
  CHECK_OK(net_sig_key(comm, 0, 1, 5, na, nb, k2));
  CHECK_MSG(memcmp(k1, k2, sizeof(k1)) != 0, "a new nonce gave the old key");
  comm[0] ^= 1; /* another secret or communicator */
  nb[3] ^= 1;
  CHECK_OK(net_sig_key(comm, 0, 1, 5, na, nb, k2));
  CHECK_MSG(memcmp(k1, k2, sizeof(k1)) != 0, "another communicator key gave the same key");
}

static void test_mac(void) {
  uint8_t comm[AUTH_KEY_BYTES], na[NET_SIG_NONCE_BYTES], nb[NET_SIG_NONCE_BYTES], k[AUTH_KEY_BYTES], other[AUTH_KEY_BYTES];
  keys(comm, na, nb);
  CHECK_OK(net_sig_key(comm, 0, 1, 5, na, nb, k));
  CHECK_OK(net_sig_key(comm, 1, 0, 5, nb, na, other));
  struct net_sig_mac mk, mo;
  CHECK_OK(net_sig_mac_init(&mk, k));
  CHECK_OK(net_sig_mac_init(&mo, other));
  struct net_sig s = {.magic = NET_SIG_MAGIC, .conn_id = 3, .seq = 9, .region = 2, .offset = 64, .value = 77};
  net_sig_seal(&mk, &s);
  CHECK_MSG(net_sig_mac_ok(&mk, &s), "a sealed message does not check");
  CHECK_MSG(!net_sig_mac_ok(&mo, &s), "a message checks under another key");
  /* Every bit of every field before the MAC, and of the MAC itself, is covered. */
  for (size_t byte = 0; byte < sizeof(s); byte++) {
    for (int bit = 0; bit < 8; bit++) {
      struct net_sig t = s;
      ((uint8_t*)&t)[byte] ^= (uint8_t)(1u << bit);
      CHECK_MSG(!net_sig_mac_ok(&mk, &t), "flipping bit %d of byte %zu went unnoticed", bit, byte);
    }
  }
  CHECK_MSG(net_sig_mac_ok(&mk, &s), "the keyed context does not restart cleanly");
  net_sig_mac_free(&mk);
  net_sig_mac_free(&mo);
}

static void test_replay(void) {
  struct net_replay r = {0, 0};
  CHECK_MSG(!net_replay_accept(&r, 0), "sequence number 0 accepted");
  CHECK(net_replay_accept(&r, 1));
  CHECK_MSG(!net_replay_accept(&r, 1), "1 accepted twice");
  CHECK(net_replay_accept(&r, 3));
  CHECK_MSG(net_replay_accept(&r, 2), "2 after 3 (within the window) refused");
  CHECK_MSG(!net_replay_accept(&r, 2) && !net_replay_accept(&r, 3), "a replay accepted");
  CHECK(net_replay_accept(&r, 1000));
  CHECK_MSG(net_replay_accept(&r, 1000 - (NET_SIG_WINDOW - 1)), "the window's oldest refused");
  CHECK_MSG(!net_replay_accept(&r, 1000 - NET_SIG_WINDOW), "older than the window accepted");
  CHECK_MSG(!net_replay_accept(&r, 3), "an old number accepted after a jump");
  CHECK(net_replay_accept(&r, 1001));
  CHECK_MSG(!net_replay_accept(&r, 1000), "1000 accepted twice across a shift");
  CHECK(net_replay_accept(&r, UINT64_MAX));
  CHECK_MSG(!net_replay_accept(&r, UINT64_MAX), "the largest number accepted twice");
  CHECK_MSG(!net_replay_accept(&r, 1002), "a number far below the top accepted");
}

/* The cost the transport pays per signal: one seal (sender) and one check (receiver). */
static void cost(void) {
  uint8_t k[AUTH_KEY_BYTES] = {1};
  struct net_sig_mac m;
  CHECK_OK(net_sig_mac_init(&m, k));
  struct net_sig s = {.magic = NET_SIG_MAGIC, .conn_id = 1};
  const int n = 20000;
  struct timespec a, b, ca, cb;
  int ok = 0;
  clock_gettime(CLOCK_MONOTONIC, &a);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
  for (int i = 0; i < n; i++) {
    s.seq = (uint64_t)i + 1;
    net_sig_seal(&m, &s);
    ok += net_sig_mac_ok(&m, &s);
  }
  clock_gettime(CLOCK_MONOTONIC, &b);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
  net_sig_mac_free(&m);
  CHECK(ok == n);
  double us = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / n / 1e3;
  double cpu = ((double)(cb.tv_sec - ca.tv_sec) * 1e9 + (double)(cb.tv_nsec - ca.tv_nsec)) / n / 1e3;
  printf("transport_netsig: seal + check of one signal %.2f us (%.2f us of CPU)\n", us, cpu);
}

int main(void) {
  test_keys();
  test_mac();
  test_replay();
  cost();
  printf("transport_netsig: ok\n");
  return 0;
}
