/* net_fabric.h - the net transport's libfabric side (net_fabric.c): one RDM endpoint per
 * communicator, its completion queue read by one progress thread, memory regions, and the posting
 * of RMA writes, reads and signal messages. net.c builds the transport row on it. Only built with
 * libfabric (MSCCLPP_HAVE_LIBFABRIC).
 *
 * Completions: every posted operation names a struct net_pending (one per connection) as its
 * context; the progress thread counts its completions there (and its first failure), so a
 * connection's flush waits until `done` reaches the number it posted. Operations are posted with
 * FI_DELIVERY_COMPLETE: a completion means the data has been placed in the peer's memory.
 * Signals are 64-byte messages (net_sig.h: {magic, connection id, sequence number, region, offset,
 * value, MAC}) received into buffers the progress thread keeps posted; it applies one only when
 * its connection id is known, its source address is that connection's peer (where the provider
 * reports sources, FI_SOURCE), its MAC checks under the connection's key and its sequence number
 * is fresh; then as a release store of the word (tcp_regions.c), after the writes before it
 * (FI_ORDER_SAW, required of the provider). Anything else is counted and logged (rate-limited). */
#ifndef MPP_TRANSPORT_NET_FABRIC_H_
#define MPP_TRANSPORT_NET_FABRIC_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <mscclpp/core.h>

#include "transport/net_sig.h"

#define NET_ADDR_MAX 64 /* bytes of an endpoint name exchanged over the bootstrap */

struct net_fabric;

/* A local memory region. */
struct net_mr {
  void* mr;      /* struct fid_mr* */
  void* desc;    /* fi_mr_desc, for local use as a source */
  uint64_t key;  /* the remote key */
  uint64_t base; /* remote address of the region's first byte (its address, or 0 for offset-based providers) */
};

/* Host memory registered with the provider: the staged path's buffers (net_stage.c), pinned
 * (cudaHostRegister) when dev >= 0 so that copies from and to GPU memory run at full speed. */
struct net_buf {
  char* ptr;
  size_t bytes;
  int pinned;
  struct net_mr mr;
};
/* Allocates and registers bytes (rounded up to 4 KiB) of host memory; pinned for device dev >= 0. */
mscclppResult_t net_buf_alloc(struct net_fabric* f, size_t bytes, int dev, struct net_buf* out);
/* Deregisters, unpins and frees b (NULL ptr: nothing). */
void net_buf_free(struct net_buf* b);

/* A connection's completion counters, written by the progress thread, and its bounce buffer. */
struct net_pending {
  atomic_uint_fast64_t done; /* completions (successful or not) of operations posted on it */
  atomic_int failed;         /* 1 once one of them failed (its text in why) */
  char why[160];             /* written once before failed is set (release) */
  struct net_pending* next;  /* net_fabric_retire's list */
  /* A registered host buffer (net_fabric_max_op bytes, made on first use) through which the
   * connection's unregistered host writes and reads go; freed with the counters. */
  void* bounce;
  struct net_mr bounce_mr;
  /* The staged path's send slots (net_stage.c), made on first use: RMA writes in flight read them,
   * so they go with the counters. */
  struct net_buf stage_tx;
};

/* Frees p and its bounce buffer (no operation may be in flight on it). */
void net_pending_free(struct net_pending* p);

/* Opens the provider chosen by MSCCLPP_NET_PROVIDER (default: libfabric's first RDM provider with
 * RMA, delivery completion and send-after-write order) on the interface of MSCCLPP_SOCKET_IFNAME's
 * address (as the bootstrap), and starts the progress thread; region writes of signals go to
 * regions (a struct region_table*). want_hmem: ask for FI_HMEM first (GPU ranks), taking a
 * provider without it when none has it (net_fabric_hmem says which). The progress thread works on
 * device cuda_dev (-1: none). InvalidUsage naming what is missing when nothing matches. */
mscclppResult_t net_fabric_open(int rank, void* regions, int cuda_dev, int want_hmem, struct net_fabric** out);
/* What net_fabric_open would choose, without opening it: 1 with its description in buf, or 0 with
 * the reason in buf. */
int net_fabric_probe(char* buf, size_t len);
/* Stops the progress thread and closes everything (what is in flight is dropped). */
void net_fabric_close(struct net_fabric* f);
/* This endpoint's name (at most NET_ADDR_MAX bytes) and its length. */
size_t net_fabric_name(const struct net_fabric* f, void* buf);
/* Adds a peer's endpoint name to the address vector; *addr is its fi_addr_t. */
mscclppResult_t net_fabric_add_peer(struct net_fabric* f, int peer, const void* name, size_t len, uint64_t* addr);
/* "provider fabric domain" of the endpoint, for messages. */
const char* net_fabric_desc(const struct net_fabric* f);
/* 1 when the provider granted FI_HMEM (net_fabric_reg_dev works). */
int net_fabric_hmem(const struct net_fabric* f);
/* 1 when messages are received in the order they were sent (FI_ORDER_SAS). */
int net_fabric_sas(const struct net_fabric* f);

/* Registers [ptr, ptr+size) for remote reads and writes and local use. */
mscclppResult_t net_fabric_reg(struct net_fabric* f, void* ptr, size_t size, struct net_mr* out);
/* Registers GPU memory of device dev (FI_HMEM_CUDA) likewise; only where net_fabric_hmem. */
mscclppResult_t net_fabric_reg_dev(struct net_fabric* f, void* ptr, size_t size, int dev, struct net_mr* out);
void net_fabric_dereg(struct net_mr* m);

/* One operation to post: an RMA write of size bytes from local (desc: its region's, or NULL) to
 * raddr/key, an RMA read of them into local, or a signal (the peer stores value at offset of its
 * region after every earlier write of this endpoint to it). */
enum net_op_kind { NET_OP_WRITE, NET_OP_READ, NET_OP_SIGNAL };
struct net_op {
  enum net_op_kind kind;
  void* local;
  size_t size; /* at most net_fabric_max_op */
  void* desc;
  uint64_t raddr, key;       /* write, read */
  const struct net_sig* sig; /* signal: sealed (copied by the provider before the post returns) */
};
/* Posts op to the peer at addr, its completion counted in p: 0 posted, 1 the provider's queue is
 * full (try again later), -1 failed (the error recorded). */
int net_fabric_post(struct net_fabric* f, struct net_pending* p, uint64_t addr, const struct net_op* op);
/* The largest bytes of one write or read. */
size_t net_fabric_max_op(const struct net_fabric* f);

/* The receiving side of a connection: reserve gives an id (from 1) to send to the peer, whose
 * signals are refused until set says that they come from addr (where the provider reports
 * sources) with a MAC under key. */
mscclppResult_t net_fabric_auth_reserve(struct net_fabric* f, uint32_t* id);
mscclppResult_t net_fabric_auth_set(struct net_fabric* f, uint32_t id, int peer, uint64_t addr,
                                    const uint8_t key[AUTH_KEY_BYTES]);
/* Forgets id: later signals carrying it are refused. */
void net_fabric_auth_remove(struct net_fabric* f, uint32_t id);
/* The staged path's messages (magic NET_STAGE_MAGIC or NET_CREDIT_MAGIC) of connection id, once
 * checked like signals, go to fn(arg, msg) on the progress thread, in receive order, with the
 * receiving table's lock held (so not after net_fabric_auth_remove returns). fn(arg, NULL): the
 * progress thread calls every hook so again after net_fabric_owe (something could not be sent). */
typedef void (*net_msg_fn)(void* arg, const struct net_sig* msg);
void net_fabric_auth_hook(struct net_fabric* f, uint32_t id, net_msg_fn fn, void* arg);
void net_fabric_owe(struct net_fabric* f);
/* Copies the last signal message f accepted (for the tests' replay); 0 when none yet. */
int net_fabric_last_signal(struct net_fabric* f, struct net_sig* out);
/* Signal messages refused by any endpoint of this process so far. */
uint64_t net_fabric_refused_total(void);

/* Hands p to f, which frees it once no completion can reach it any more (at close): for a
 * connection closed with operations still in flight. */
void net_fabric_retire(struct net_fabric* f, struct net_pending* p);

#endif /* MPP_TRANSPORT_NET_FABRIC_H_ */
