/* net_conn.h - a net connection's state and the helpers of net.c that its staged path
 * (net_stage.c) shares: posting with retries, bounded waits, the connection's status and sealed
 * messages. Only built with libfabric. */
#ifndef MPP_TRANSPORT_NET_CONN_H_
#define MPP_TRANSPORT_NET_CONN_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "transport/net_fabric.h"
#include "transport/net_sig.h"
#include "transport/transport.h"

#define NET_LIVENESS_MS 200 /* how often a wait asks the bootstrap whether a rank died */

struct net_stage;

struct net_conn {
  struct net_pending* p;
  uint64_t posted; /* operations posted (this connection's thread only) */
  uint64_t addr;   /* the peer's fi_addr_t */
  int broken;      /* a post failed (peer gone): later calls fail */
  uint32_t my_id;    /* this endpoint's id of the connection: the peer's signals carry it */
  uint32_t peer_id;  /* the peer's id of it: our signals carry it */
  uint64_t seq;                /* our messages' sequence numbers (the last one used), under send_lock */
  struct net_sig_mac send_mac; /* keyed with our direction's key (the receiver holds the same) */
  pthread_mutex_t send_lock;   /* one message sealed at a time (the proxy, the caller and the
                                  progress thread's credits may all send) */
  struct net_stage* stage;     /* the staged path and fences (rings only where a side has GPU memory) */
  int stage_all;               /* MSCCLPP_NET_STAGE_HOST=1: every write is staged (tests) */
  atomic_int unfenced;         /* a signal was posted since the last flush's fence (any thread) */
};

struct net_fabric* net_fabric_of(struct transport_conn* conn);
struct region_table* net_regions_of(struct transport_conn* conn);
/* RemoteError when an operation of the connection failed (peer gone, region released). */
mscclppResult_t net_status(struct transport_conn* conn);
/* Posts op (counted in the connection's completions), retrying while the provider's queue is
 * full, bounded by MSCCLPP_FLUSH_TIMEOUT with liveness checks. */
mscclppResult_t net_post_op(struct transport_conn* conn, const struct net_op* op);
/* Seals {magic, region, offset, value, reserved} as the connection's next message to the peer
 * into *out (under send_lock). */
void net_seal(struct net_conn* c, uint32_t magic, uint64_t region, uint64_t offset, uint64_t value, uint64_t reserved,
              struct net_sig* out);
/* Waits until done(conn, arg) holds, at most timeout_ms, failing at once when the connection
 * failed or the bootstrap reports a dead rank (asked every NET_LIVENESS_MS); Timeout unrecorded
 * (the caller names what it waited for). */
typedef int (*net_done_fn)(struct transport_conn* conn, void* arg);
mscclppResult_t net_wait(struct transport_conn* conn, net_done_fn done, void* arg, int64_t timeout_ms);
int64_t net_io_timeout_ms(void);

#endif /* MPP_TRANSPORT_NET_CONN_H_ */
