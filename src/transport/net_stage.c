/* net_stage.c - the net transport's staged path: GPU memory (and, for tests, host memory) through
 * rings of pinned host slots, STAGE and CREDIT messages (net_stage.h has the protocol). */
#if MSCCLPP_HAVE_LIBFABRIC
#include "transport/net_stage.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tcp_regions.h"
#include "util/err.h"
#include "util/log.h"

struct net_stage {
  struct net_fabric* f;
  int dev; /* this rank's device (-1: CPU rank): where the ring is pinned for */
  /* Receiving (the progress thread only, in the hook): our ring and what we owe the peer. */
  struct net_buf rx;
  uint32_t rx_slots, rx_slot_bytes;
  uint64_t owed;        /* slots placed but not yet credited */
  uint64_t owed_failed; /* of them, pieces that could not be placed */
  uint64_t owed_fence;  /* the last FENCE handled, not yet answered (0: none) */
  /* Sending (the writing thread; free_mask and failed also the progress thread). */
  struct net_stage_desc peer; /* the peer's ring (slots 0: none) */
  atomic_uint_fast64_t free_mask; /* bit j: send slot j is ours again (its credit came back) */
  atomic_uint_fast64_t failed;    /* pieces the peer reported it could not place, not yet told */
  uint64_t fence_sent;            /* FENCE messages sent (the writing thread) */
  atomic_uint_fast64_t fence_done; /* the last FENCE the peer answered */
  uint32_t next;                  /* the next slot, in ring order */
};

static uint64_t all_slots(uint32_t n) { return n >= 64 ? ~0ull : (1ull << n) - 1; }

mscclppResult_t net_stage_open(struct transport_conn* conn, int with_ring, struct net_stage** out,
                               struct net_stage_desc* mine) {
  struct net_stage* st = calloc(1, sizeof(*st));
  if (st == NULL) return MPP_ERR(mscclppSystemError, "net transport: out of host memory");
  st->f = net_fabric_of(conn);
  st->dev = conn->tc->cuda_dev;
  memset(mine, 0, sizeof(*mine));
  *out = st;
  if (!with_ring) return mscclppSuccess; /* fences only */
  st->rx_slots = NET_STAGE_SLOTS;
  st->rx_slot_bytes = NET_STAGE_SLOT_BYTES;
  MPP_CHECK(net_buf_alloc(st->f, (size_t)st->rx_slots * st->rx_slot_bytes, st->dev, &st->rx));
  *mine = (struct net_stage_desc){.key = st->rx.mr.key, .base = st->rx.mr.base, .slots = st->rx_slots,
                                  .slot_bytes = st->rx_slot_bytes};
  return mscclppSuccess;
}

mscclppResult_t net_stage_arm(struct transport_conn* conn, struct net_stage* st, const struct net_stage_desc* peer) {
  if (peer->slots > 64 || (peer->slots != 0 && (peer->slot_bytes < 4096 || peer->slot_bytes > (64u << 20))))
    return MPP_ERR(mscclppRemoteError, "net transport: rank %d described a staging ring of %u slots of %u bytes "
                   "(1..64 slots of 4 KiB..64 MiB)", conn->peer, peer->slots, peer->slot_bytes);
  if (peer->base + (uint64_t)peer->slots * peer->slot_bytes < peer->base)
    return MPP_ERR(mscclppRemoteError, "net transport: rank %d's staging ring address overflows", conn->peer);
  st->peer = *peer;
  /* Relaxed: set before the connection is handed to any other thread. */
  atomic_store_explicit(&st->free_mask, all_slots(peer->slots), memory_order_relaxed);
  return mscclppSuccess;
}

/* ---- the owner: placing pieces and giving slots back (the progress thread) ------------------ */

/* Sends what the owner owes as one CREDIT message; when the provider's queue is full it stays
 * owed and the progress thread calls again (net_fabric_owe). Fire and forget: no completion is
 * counted (a lost credit means the peer is gone, which its waits notice). */
static void send_credits(struct transport_conn* conn, struct net_stage* st) {
  if (st->owed == 0 && st->owed_fence == 0) return;
  struct net_conn* c = conn->priv;
  struct net_msg msg = {.magic = NET_CREDIT_MAGIC, .offset = st->owed_fence, .value = st->owed,
                        .reserved = st->owed_failed};
  int r = net_send_once(st->f, c, NULL, &msg);
  if (r == 1) {
    net_fabric_owe(st->f);
    return;
  }
  if (r < 0) err_clear(); /* the peer is gone; its own waits say so */
  st->owed = 0;
  st->owed_failed = 0;
  st->owed_fence = 0;
}

/* Copies a STAGE message's slot into its region (bounds-checked by the region table, which names
 * the region, offset and size on a violation; cudaMemcpy into GPU memory, synchronous) and owes
 * the slot back. */
static void place(struct transport_conn* conn, struct net_stage* st, const struct net_sig* m) {
  uint64_t slot = m->reserved, size = m->value;
  if (slot >= st->rx_slots || size == 0 || size > st->rx_slot_bytes) {
    log_msg(LOG_WARN, LOG_SUB_NET, "net: rank %d dropped a staging message from rank %d: slot %llu, %llu bytes "
            "(its ring has %u slots of %u bytes)", conn->tc->rank, conn->peer, (unsigned long long)slot,
            (unsigned long long)size, st->rx_slots, st->rx_slot_bytes);
    return;
  }
  const char* from = st->rx.ptr + slot * st->rx_slot_bytes;
  int quiet = err_quiet(1); /* logged once, below */
  mscclppResult_t res = region_write(net_regions_of(conn), m->region, m->offset, from, size);
  err_quiet(quiet);
  if (res != mscclppSuccess) {
    log_msg(LOG_WARN, LOG_SUB_NET, "net: rank %d could not place a staged write of rank %d: %s", conn->tc->rank,
            conn->peer, err_last());
    err_clear();
    st->owed_failed++;
  }
  st->owed |= 1ull << slot;
}

void net_stage_on_msg(void* arg, const struct net_sig* msg) {
  struct transport_conn* conn = arg;
  struct net_stage* st = ((struct net_conn*)conn->priv)->stage;
  if (msg != NULL && msg->magic == NET_CREDIT_MAGIC) {
    if (msg->reserved != 0) atomic_fetch_add_explicit(&st->failed, msg->reserved, memory_order_relaxed);
    /* Release: the flush that sees its fence answered (acquire) sees the failures counted above.
     * Only this thread stores it, so a larger value is never overwritten by a smaller one. */
    if (msg->offset > atomic_load_explicit(&st->fence_done, memory_order_relaxed))
      atomic_store_explicit(&st->fence_done, msg->offset, memory_order_release);
    /* Release: the writer that sees the bit (acquire) also sees the failure count above. */
    atomic_fetch_or_explicit(&st->free_mask, msg->value & all_slots(st->peer.slots), memory_order_release);
    return;
  }
  if (msg != NULL && msg->reserved == NET_STAGE_FENCE) st->owed_fence = msg->offset; /* all before it applied */
  else if (msg != NULL) place(conn, st, msg);
  send_credits(conn, st);
}

/* ---- the writer --------------------------------------------------------------------------- */

struct slot_wait {
  struct net_stage* st;
  uint64_t mask;
};

static int slots_free(struct transport_conn* conn, void* arg) {
  (void)conn;
  const struct slot_wait* w = arg;
  /* Acquire: pairs with the progress thread's release when a credit came back. */
  return (atomic_load_explicit(&w->st->free_mask, memory_order_acquire) & w->mask) == w->mask;
}

static mscclppResult_t wait_slots(struct transport_conn* conn, struct net_stage* st, uint64_t mask, int64_t timeout_ms,
                                  const char* what) {
  struct slot_wait w = {.st = st, .mask = mask};
  mscclppResult_t res = net_wait(conn, slots_free, &w, timeout_ms);
  if (res == mscclppTimeout)
    return MPP_ERR(mscclppTimeout, "net %s to rank %d (tag %d): staging slots not given back within %lld ms (the "
                   "peer's progress thread stalled?)", what, conn->peer, conn->tag, (long long)timeout_ms);
  return res;
}

/* The connection's send slots, made on first use (they live with its completion counters). */
static mscclppResult_t send_slots(struct transport_conn* conn, struct net_stage* st, struct net_buf** out) {
  struct net_buf* b = &((struct net_conn*)conn->priv)->p->stage_tx;
  if (b->ptr == NULL) MPP_CHECK(net_buf_alloc(st->f, (size_t)st->peer.slots * st->peer.slot_bytes, st->dev, b));
  *out = b;
  return mscclppSuccess;
}

/* One piece of at most a slot: wait for the slot, copy, write it, tell the owner. */
static mscclppResult_t stage_piece(struct transport_conn* conn, struct net_stage* st, struct net_buf* tx,
                                   uint64_t region, uint64_t offset, const char* src, int src_dev, size_t n) {
  uint32_t j = st->next;
  uint64_t bit = 1ull << j;
  MPP_CHECK(wait_slots(conn, st, bit, net_io_timeout_ms(), "staged write"));
  /* Relaxed: only this thread clears bits; the credit that sets it again comes after our STAGE. */
  atomic_fetch_and_explicit(&st->free_mask, ~bit, memory_order_relaxed);
  char* at = tx->ptr + (size_t)j * st->peer.slot_bytes;
  /* A credit for slot j means the owner processed its piece, so the provider is done reading
   * this send slot too: it is ours to fill. */
  MPP_CHECK(mem_copy(at, -1, src, src_dev, n));
  struct net_op w = {.kind = NET_OP_WRITE, .local = at, .size = n, .desc = tx->mr.desc,
                     .raddr = st->peer.base + (uint64_t)j * st->peer.slot_bytes, .key = st->peer.key};
  MPP_CHECK(net_post_op(conn, &w));
  struct net_msg m = {.magic = NET_STAGE_MAGIC, .region = region, .offset = offset, .value = n, .reserved = j};
  MPP_CHECK(net_post_msg(conn, &m));
  st->next = (j + 1) % st->peer.slots;
  return mscclppSuccess;
}

mscclppResult_t net_stage_write(struct transport_conn* conn, uint64_t region, uint64_t offset, const char* src,
                                int src_dev, uint64_t size) {
  struct net_stage* st = ((struct net_conn*)conn->priv)->stage;
  if (st->peer.slots == 0)
    return MPP_ERR(mscclppInvalidUsage, "net connection to rank %d: this write must be staged (GPU memory without "
                   "FI_HMEM on both sides, a source that is no net region, or MSCCLPP_NET_STAGE_HOST=1) but the peer "
                   "has no staging ring (neither rank is a GPU rank; MSCCLPP_NET_STAGE_HOST must be the same on every "
                   "rank)", conn->peer);
  struct net_buf* tx;
  MPP_CHECK(send_slots(conn, st, &tx));
  size_t piece = st->peer.slot_bytes < net_fabric_max_op(st->f) ? st->peer.slot_bytes : net_fabric_max_op(st->f);
  for (uint64_t done = 0; done < size;) {
    size_t n = (size_t)(size - done < piece ? size - done : piece);
    mscclppResult_t res = stage_piece(conn, st, tx, region, offset + done, src + done, src_dev, n);
    if (res != mscclppSuccess)
      return MPP_ERR(res, "net staged write of %llu bytes to rank %d (offset %llu): %s", (unsigned long long)size,
                     conn->peer, (unsigned long long)offset, err_copy().text);
    done += n;
  }
  return mscclppSuccess;
}

mscclppResult_t net_stage_test_raw(struct transport_conn* conn, uint64_t region, uint64_t offset, uint64_t size,
                                   uint64_t slot) {
  struct net_stage* st = ((struct net_conn*)conn->priv)->stage;
  if (slot < st->peer.slots) { /* taken as a real piece would be: its credit is waited for */
    MPP_CHECK(wait_slots(conn, st, 1ull << slot, net_io_timeout_ms(), "test message"));
    atomic_fetch_and_explicit(&st->free_mask, ~(1ull << slot), memory_order_relaxed);
  }
  struct net_msg m = {.magic = NET_STAGE_MAGIC, .region = region, .offset = offset, .value = size, .reserved = slot};
  return net_post_msg(conn, &m);
}

int net_stage_idle(struct net_stage* st) {
  uint64_t all = all_slots(st->peer.slots);
  /* Acquire: as slots_free. */
  return st->peer.slots == 0 || (atomic_load_explicit(&st->free_mask, memory_order_acquire) & all) == all;
}

static int fence_answered(struct transport_conn* conn, void* arg) {
  struct net_stage* st = ((struct net_conn*)conn->priv)->stage;
  (void)arg;
  /* Acquire: pairs with the progress thread's release store when the answer came. */
  return atomic_load_explicit(&st->fence_done, memory_order_acquire) >= st->fence_sent;
}

mscclppResult_t net_stage_fence(struct transport_conn* conn, int64_t timeout_ms, const char* what) {
  struct net_stage* st = ((struct net_conn*)conn->priv)->stage;
  struct net_msg m = {.magic = NET_STAGE_MAGIC, .offset = ++st->fence_sent, .reserved = NET_STAGE_FENCE};
  MPP_CHECK(net_post_msg(conn, &m));
  mscclppResult_t res = net_wait(conn, fence_answered, NULL, timeout_ms);
  if (res == mscclppTimeout)
    return MPP_ERR(mscclppTimeout, "net %s to rank %d (tag %d): rank %d did not confirm within %lld ms that it applied "
                   "what came before (its progress thread stalled?)", what, conn->peer, conn->tag, conn->peer,
                   (long long)timeout_ms);
  return res;
}

mscclppResult_t net_stage_drain(struct transport_conn* conn, int64_t timeout_ms, const char* what) {
  struct net_stage* st = ((struct net_conn*)conn->priv)->stage;
  if (st->peer.slots == 0) return mscclppSuccess;
  MPP_CHECK(wait_slots(conn, st, all_slots(st->peer.slots), timeout_ms, what));
  uint64_t failed = atomic_exchange_explicit(&st->failed, 0, memory_order_relaxed);
  if (failed != 0)
    return MPP_ERR(mscclppRemoteError, "net %s to rank %d (tag %d): rank %d could not place %llu staged piece(s) "
                   "(a released region, or out of its bounds: its log names it)", what, conn->peer, conn->tag,
                   conn->peer, (unsigned long long)failed);
  return mscclppSuccess;
}

int net_stage_has_ring(const struct net_stage* st) { return st->rx_slots != 0 && st->peer.slots != 0; }

void net_stage_describe(const struct net_stage* st, char* buf, size_t len) {
  snprintf(buf, len, "ring of %u x %u KiB", st->rx_slots, st->rx_slot_bytes >> 10);
}

void net_stage_close(struct net_stage* st) {
  if (st == NULL) return;
  net_buf_free(&st->rx);
  free(st);
}
#endif /* MSCCLPP_HAVE_LIBFABRIC */
