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
  pthread_mutex_t send_lock;   /* one message sealed and posted at a time (the proxy, the caller
                                  and the progress thread's credits may all send) */
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
/* A message to the peer before sealing (net_sig.h: a signal, or the staged path's STAGE/CREDIT). */
struct net_msg {
  uint32_t magic;
  uint64_t region, offset, value, reserved;
};
/* One attempt: seals m as the connection's next message and posts it, both under send_lock, so the
 * peer receives the sequence numbers in increasing order whichever threads send (its replay
 * window refuses numbers more than NET_SIG_WINDOW below the highest seen, so a message sealed
 * early and posted late behind others would be refused). p: the completion counter, or NULL for
 * fire and forget. Returns as net_fabric_post: 0 posted, 1 the provider's queue is full (nothing
 * sent; the number is skipped, which the window allows), -1 failed (recorded). */
int net_send_once(struct net_fabric* f, struct net_conn* c, struct net_pending* p, const struct net_msg* m);
/* net_post_op for the message m, sealed anew at every attempt (net_send_once). */
mscclppResult_t net_post_msg(struct transport_conn* conn, const struct net_msg* m);
/* Waits until done(conn, arg) holds, at most timeout_ms, failing at once when the connection
 * failed or the bootstrap reports a dead rank (asked every NET_LIVENESS_MS); Timeout unrecorded
 * (the caller names what it waited for). */
typedef int (*net_done_fn)(struct transport_conn* conn, void* arg);
mscclppResult_t net_wait(struct transport_conn* conn, net_done_fn done, void* arg, int64_t timeout_ms);
int64_t net_io_timeout_ms(void);

#endif /* MPP_TRANSPORT_NET_CONN_H_ */
