/* net.h - how CPU ranks move the data of collectives: a bounded scratch buffer per rank
 * (mscclppMemAlloc host memory, registered once) split into one inbox per peer, and a pipe per
 * peer that carries chunks both ways.
 *
 * Scratch layout of every rank: nranks regions of CPU_NSLOTS slots; region p is the inbox of the
 * chunks rank p sends here; this rank's own region serves as staging for tcp writes. A slot is a
 * 64-byte header (struct chunk_hdr) followed by up to `chunk` data bytes.
 *
 * A pipe to peer p is one connection (Auto: shm on one host, tcp across hosts) and two host
 * semaphores: `data` (the sender signals that a chunk sits in the receiver's inbox) and `ack` (the
 * receiver signals that it consumed one, freeing the slot). Chunk k of a pipe goes to slot
 * k % CPU_NSLOTS of the receiver's inbox, so a sender runs at most CPU_NSLOTS chunks ahead of its
 * receiver. Over shm the sender writes straight into the peer's mapped inbox; over tcp it fills its
 * staging slot and writes it with one connection write. The signal orders the data before it.
 *
 * Deadlock freedom of the blocking collectives: every rank runs the same sequence of steps; in a
 * step a rank first sends (at most one chunk per pipe), then receives and acknowledges everything
 * the step brings it. A send then waits only for the ack of a chunk sent two or more steps earlier,
 * which its receiver has acknowledged before finishing that step. */
#ifndef MPP_ALGO_CPU_NET_H_
#define MPP_ALGO_CPU_NET_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/collectives.h>
#include <mscclpp/connection.h>

#include "algo/algo.h"

#define CPU_NSLOTS 2
#define CPU_HDR_BYTES 64
#define CPU_CONN_TAG 0x616c67 /* "alg": the connections of the collectives */

/* The header in front of every chunk: what the sender is doing, so that the receiver can tell a
 * mismatched call (another collective, count, datatype, op or root) from a correct one. */
struct chunk_hdr {
  uint32_t magic;
  uint16_t coll;  /* enum algo_coll */
  uint8_t dtype;
  uint8_t op;     /* enum elem_op (reductions), else 0 */
  int32_t root;   /* -1 when the collective has none */
  uint32_t bytes; /* data bytes in this chunk */
  uint64_t seq;   /* index of the chunk on its pipe */
  uint64_t total; /* bytes of the whole call (count * element size) */
  uint64_t offset; /* of this chunk within the sender's part */
  elem_scalar scalar; /* the sender's premulsum scalar */
};
#define CHUNK_MAGIC 0x4d504348u

struct cpu_pipe {
  int peer;
  int ready; /* connected */
  mscclppConnection_t conn;
  mscclppHostSemaphore_t data, ack;
  mscclppRegMem_t remote; /* the peer's scratch, imported */
  char* remote_inbox;     /* this rank's inbox in the peer's scratch when mapped here (shm), else NULL */
  int stream_src;         /* tcp: a chunk's data is sent from where it is (no copy into the staging slot) */
  uint64_t remote_off;    /* offset of that inbox in the peer's scratch */
  char* inbox;            /* the peer's inbox in this rank's scratch */
  uint64_t sent, acked, recvd;
};

struct cpu_net {
  struct algo_comm* ac;
  char* scratch;
  size_t scratch_bytes;
  mscclppRegMem_t reg;
  size_t chunk;  /* data bytes per slot: a multiple of 64 */
  size_t slot;   /* CPU_HDR_BYTES + chunk */
  size_t region; /* CPU_NSLOTS * slot */
  char* staging; /* this rank's own region */
  struct cpu_pipe* pipes; /* nranks entries; pipes[rank] unused */
  unsigned char blob[MSCCLPP_REGMEM_BLOB_BYTES];
  size_t blob_len;
  int coll;            /* the collective running (enum algo_coll), for messages */
  const void** srcs;   /* nranks reduction sources (no allocation per call) */
  elem_scalar* scalars; /* ... and their owners' premulsum scalars */
  unsigned char* want; /* nranks flags: peers a group needs (p2p.c) */
  int* last_op[2];     /* nranks each: last queued send/recv op per peer in a group (p2p.c) */
  /* The first failure of a chunk transfer (a mismatched call, a dead or timed-out peer): the pipes
   * then hold chunks of a call that never finished, so every later call fails naming this one. */
  mscclppResult_t broken;
  char broken_msg[400];
};

/* The CPU network of ac, made on first use (scratch allocated and registered; no peer connected). */
mscclppResult_t cpu_net_get(struct algo_comm* ac, struct cpu_net** out);
/* Frees a network with its connections, semaphores and registration (NULL is ignored). */
void cpu_net_free(struct cpu_net* net);
/* Connects the pipe to peer if it is not yet (both ranks call it; pairs connect in increasing peer
 * order on every rank). */
mscclppResult_t cpu_connect(struct cpu_net* net, int peer);
/* Connects every pipe (a collective: every rank calls it). */
mscclppResult_t cpu_connect_all(struct cpu_net* net);
/* Success, or the error that broke net's pipes (its code, a message naming fn and that first failure). */
mscclppResult_t cpu_net_usable(struct cpu_net* net, const char* fn);
/* Records res (with this thread's last error message) as what broke net, once; returns res. */
mscclppResult_t cpu_net_break(struct cpu_net* net, mscclppResult_t res);
/* The prologue of every CPU collective: the network, every pipe connected, net->coll set. */
mscclppResult_t cpu_begin(struct algo_comm* ac, const struct algo_args* a, struct cpu_net** net);

/* Slice i of k of len elements: [*off, *off + *n), as even as possible (later slices may be
 * shorter or empty). */
static inline void cpu_slice(size_t len, int k, int i, size_t* off, size_t* n) {
  size_t per = (len + (size_t)k - 1) / (size_t)k, o = per * (size_t)i;
  if (o > len) o = len;
  *off = o;
  *n = len - o < per ? len - o : per;
}

static inline size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* ---- moving chunks (xfer.c) ------------------------------------------------------------------- */

/* Waits until the pipe's next slot is free; *data is where the chunk's bytes go (the peer's inbox
 * over shm, the staging slot over tcp). Follow with cpu_send_commit. */
mscclppResult_t cpu_send_begin(struct cpu_net* net, struct cpu_pipe* p, void** data);
/* Sends the chunk prepared after cpu_send_begin: h's fields except seq describe it. */
mscclppResult_t cpu_send_commit(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* h);
/* begin + copy of h->bytes bytes from src + commit. */
mscclppResult_t cpu_send(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* h, const void* src);
/* Non-blocking: *ok = 1 when the next slot is free (consuming an ack if one arrived). */
mscclppResult_t cpu_send_ready(struct cpu_net* net, struct cpu_pipe* p, int* ok);

/* Waits for the pipe's next chunk and checks its header against `want` (coll, dtype, op, root,
 * total, bytes, offset; seq is filled in here). *h points at the header in the inbox, the data
 * follows it. Follow with cpu_recv_done once the data is consumed. */
mscclppResult_t cpu_recv(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* want, const struct chunk_hdr** h);
/* Non-blocking: *h = NULL when no chunk arrived yet. */
mscclppResult_t cpu_recv_poll(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* want,
                              const struct chunk_hdr** h);
/* Frees the slot of the chunk cpu_recv returned: acknowledges it to the sender. */
mscclppResult_t cpu_recv_done(struct cpu_net* net, struct cpu_pipe* p);
/* Receives from peer q the chunk of cnt elements at element offset elem_off of the call, copies it
 * to the same place in a->recv and releases the slot (cpu_recv + copy + cpu_recv_done). */
mscclppResult_t cpu_recv_copy(struct cpu_net* net, const struct algo_args* a, int q, size_t elem_off, size_t cnt);

static inline const void* chunk_data(const struct chunk_hdr* h) { return (const char*)h + CPU_HDR_BYTES; }

/* A header for a chunk of collective a (seq is set when it is sent). */
struct chunk_hdr cpu_hdr(const struct algo_args* a, uint64_t offset, size_t bytes);

/* ---- the CPU algorithms ----------------------------------------------------------------------- */

/* Steps shared by allreduce and reduce (allreduce.c), over super-chunk [base, base+len) split in
 * nranks slices: send slice q of the input to every rank q; receive this rank's slice from every
 * rank (left unacknowledged) into net->srcs/scalars in rank order (*cnt = 0: empty slice);
 * acknowledge every other rank's chunk. */
mscclppResult_t cpu_rs_send(struct cpu_net* net, const struct algo_args* a, size_t base, size_t len);
mscclppResult_t cpu_rs_gather_inputs(struct cpu_net* net, const struct algo_args* a, size_t base, size_t len, size_t* off,
                                     size_t* cnt);
mscclppResult_t cpu_done_all(struct cpu_net* net);

mscclppResult_t cpu_allreduce_allpairs(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_allreduce_rsag(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_allgather_direct(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_reducescatter_direct(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_broadcast_scatter_ag(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_reduce_rs_gather(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t cpu_alltoall_direct(struct algo_comm* ac, const struct algo_args* a);

/* Runs a group's sends and receives (p2p.c). */
mscclppResult_t cpu_p2p_run(struct p2p_op* ops, int nops);

#endif /* MPP_ALGO_CPU_NET_H_ */
