/* net_sig.h - the net transport's signal message (net_sig.c): its wire layout, the per-connection
 * keys that MAC it, and the window that refuses replays. Pure functions and data: no libfabric.
 *
 * A signal ({region, offset, value}: "store value at offset of region") is the one message the
 * net transport receives; unchecked, any process that reaches the endpoint could set a semaphore.
 * So every signal carries the receiver's id of the connection, a sequence number (from 1) and an
 * HMAC-SHA256 (first 16 bytes) under the key of that connection and direction; the receiver
 * applies it only after the MAC checks and the sequence number is fresh. */
#ifndef MPP_TRANSPORT_NET_SIG_H_
#define MPP_TRANSPORT_NET_SIG_H_

#include <stdint.h>

#include <mscclpp/core.h>

#include "util/auth.h"

#define NET_SIG_MAGIC 0x3247534eu /* "NSG2" */
/* The staged path's messages (net_stage.h) share the layout, key, sequence and checks:
 * STAGE "the slot holds size bytes for region+offset" (value = size, reserved = slot) and
 * CREDIT "these slots are free again" (value = mask of slots, reserved = how many of them could
 * not be placed). */
#define NET_STAGE_MAGIC 0x3254534eu  /* "NST2" */
#define NET_CREDIT_MAGIC 0x3252434eu /* "NCR2" */
#define NET_SIG_MAC_BYTES 16
#define NET_SIG_NONCE_BYTES 16
#define NET_SIG_WINDOW 64 /* sequence numbers this far below the highest seen are still accepted once */

/* On the wire in host byte order (both hosts must share it, as over tcp). 64 bytes. */
struct net_sig {
  uint32_t magic;
  uint32_t conn_id; /* the receiver's id of the connection (net_fabric_auth_add) */
  uint64_t seq;     /* 1, 2, ... per connection and direction */
  uint64_t region, offset, value;
  uint64_t reserved; /* 0 for signals; the staged path's messages: above */
  uint8_t mac[NET_SIG_MAC_BYTES];
};
_Static_assert(sizeof(struct net_sig) == 64, "a signal message is 64 bytes");

/* The key of the direction from rank `from` to rank `to` of the connection with this tag: HKDF of
 * the communicator's net key over both ranks, the tag and both sides' fresh nonces (swapped over
 * the authenticated bootstrap), so a connection made again with the same tag has a new key and
 * messages recorded from the old one fail. */
mscclppResult_t net_sig_key(const uint8_t comm_key[AUTH_KEY_BYTES], int from, int to, int tag,
                            const uint8_t from_nonce[NET_SIG_NONCE_BYTES], const uint8_t to_nonce[NET_SIG_NONCE_BYTES],
                            uint8_t out[AUTH_KEY_BYTES]);
/* An HMAC-SHA256 keyed once (libcrypto's EVP_MAC context: a one-shot HMAC() per message would look
 * the algorithm up each time, several microseconds). One thread at a time per object. */
struct net_sig_mac {
  void* ctx; /* EVP_MAC_CTX* */
};
mscclppResult_t net_sig_mac_init(struct net_sig_mac* m, const uint8_t key[AUTH_KEY_BYTES]);
void net_sig_mac_free(struct net_sig_mac* m);
/* Writes s->mac over every field before it. */
void net_sig_seal(struct net_sig_mac* m, struct net_sig* s);
/* 1 when s->mac is right (compared in time independent of the contents). */
int net_sig_mac_ok(struct net_sig_mac* m, const struct net_sig* s);

/* Sequence numbers seen on one direction: the highest, and which of the NET_SIG_WINDOW below it. */
struct net_replay {
  uint64_t top;
  uint64_t seen; /* bit i: top - i was accepted */
};
/* 1 when seq is new (and records it), 0 when it was seen already, is 0, or is older than the
 * window. Call only for messages whose MAC checked. */
int net_replay_accept(struct net_replay* r, uint64_t seq);

#endif /* MPP_TRANSPORT_NET_SIG_H_ */
