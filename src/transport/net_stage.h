/* net_stage.h - the net transport's staged path (net_stage.c): memory the provider cannot reach
 * directly (GPU memory where FI_HMEM is not granted on both sides; host memory too under
 * MSCCLPP_NET_STAGE_HOST=1, for tests) crosses through pinned host memory, with bounded memory:
 *
 * - Each side of a connection that may carry GPU memory keeps a receive ring of NET_STAGE_SLOTS
 *   slots of NET_STAGE_SLOT_BYTES, registered for remote writes; its key, address and shape go to
 *   the peer in the connection's hello. The writer keeps send slots of the same shape (made on
 *   first use).
 * - A write is cut into pieces of at most one slot. For each piece the writer takes the next slot
 *   in ring order once its credit is back, copies the piece into its send slot (cudaMemcpy for GPU
 *   memory, memcpy for host), RMA-writes it into the same slot of the peer's ring and sends a
 *   sealed STAGE message {region, offset, size, slot} (net_sig.h: MAC, sequence number).
 * - The owner's progress thread handles it after the write before it (send-after-write order),
 *   and in the order messages were sent (FI_ORDER_SAS): it copies the slot into the region
 *   (bounds-checked against its region table; cudaMemcpy into GPU memory) and returns the slot
 *   with a sealed CREDIT message (a mask of slots; how many could not be placed).
 * - A signal sent after staged writes is thus applied after their copies (same message order);
 *   where the provider does not keep message order the signal first waits for every credit. A
 *   flush waits for the provider's completions, then sends a FENCE (STAGE for slot
 *   NET_STAGE_FENCE, numbered in offset) that the owner answers in a CREDIT (offset: the fence's
 *   number) once it has handled every earlier message, then waits for every credit: the data is in
 *   the peer's memory, GPU memory included, and every earlier signal has been applied.
 * Every connection has the fence (a flush after a signal waits until the owner applied it), also
 * those without rings (CPU ranks). Only built with libfabric. */
#ifndef MPP_TRANSPORT_NET_STAGE_H_
#define MPP_TRANSPORT_NET_STAGE_H_

#include <stdint.h>

#include "transport/net_conn.h"

#define NET_STAGE_SLOTS 8                  /* at most 64 (a credit is a mask) */
#define NET_STAGE_SLOT_BYTES (512u << 10)  /* 4 MiB of ring per side and direction */
#define NET_STAGE_FENCE (~0ull)            /* the slot of a FENCE message (offset: its number) */

/* What a side tells its peer of its receive ring (slots 0: none). */
struct net_stage_desc {
  uint64_t key, base;
  uint32_t slots, slot_bytes;
};
#define NET_STAGE_DESC_BYTES 24

/* Makes conn's staging: with_ring, its receive ring (pinned on a GPU rank), described in *mine;
 * without, only what fences need (*mine: no ring). Every net connection has one. */
mscclppResult_t net_stage_open(struct transport_conn* conn, int with_ring, struct net_stage** out,
                               struct net_stage_desc* mine);
/* Records the peer's ring; InvalidArgument (RemoteError) naming the field when it is malformed. */
mscclppResult_t net_stage_arm(struct transport_conn* conn, struct net_stage* st, const struct net_stage_desc* peer);
/* The progress thread's hook for conn's STAGE and CREDIT messages (net_fabric_auth_hook; arg: conn). */
void net_stage_on_msg(void* arg, const struct net_sig* msg);
/* Stages size bytes at src (GPU memory of device src_dev, or host memory when -1) into the peer's
 * region (its id) at offset; returns once the pieces are posted (src may be reused at once). */
mscclppResult_t net_stage_write(struct transport_conn* conn, uint64_t region, uint64_t offset, const char* src,
                                int src_dev, uint64_t size);
/* Tests (net_test_stage_raw): a STAGE message for slot (taken first when it is one of the peer's)
 * without data. */
mscclppResult_t net_stage_test_raw(struct transport_conn* conn, uint64_t region, uint64_t offset, uint64_t size,
                                   uint64_t slot);
/* 1 when no staged piece awaits its credit. */
int net_stage_idle(struct net_stage* st);
/* Waits, at most timeout_ms, until every staged piece has been placed by the peer (every credit is
 * back); RemoteError when the peer could not place some (released region, out of bounds). */
mscclppResult_t net_stage_drain(struct transport_conn* conn, int64_t timeout_ms, const char* what);
/* Sends a FENCE (a STAGE message for slot NET_STAGE_FENCE) and waits, at most timeout_ms, for its
 * answer: the owner handles it after every earlier message of the connection, so when it returns
 * every earlier signal has been applied and every staged piece placed (credits go before). */
mscclppResult_t net_stage_fence(struct transport_conn* conn, int64_t timeout_ms, const char* what);
/* 1 when both sides have a ring (staged writes can go). */
int net_stage_has_ring(const struct net_stage* st);
/* "ring of 8 x 512 KiB" for the connection's log line. */
void net_stage_describe(const struct net_stage* st, char* buf, size_t len);
/* Frees the ring (call after net_fabric_auth_remove: no message reaches it any more). */
void net_stage_close(struct net_stage* st);

#endif /* MPP_TRANSPORT_NET_STAGE_H_ */
