/* cpu.h - the CPU executor: plans on CPU ranks, each threadblock on a host thread.
 *
 * Memory. Every rank has two host regions (mscclppMemAlloc, registered and imported by every other
 * rank once, mscclppRegisterBuffer):
 *  - sync (fixed size, made once): a slot per rank (its arrivals at the rank barrier and its
 *    mirror offsets for this call, written by that rank), then the counters other ranks signal
 *    into, [type][sender][ordinal];
 *  - data (grown collectively when a call needs more): the mirrors of the user's input and output,
 *    then the scratch. Plans touch peers' inputs and outputs directly (zero copy), but user buffers
 *    are private memory, so a call copies the user's input (and output, so that what the plan does
 *    not write survives) into the mirrors, meets every rank at a barrier, runs the blocks, meets
 *    again and copies the output mirror back. Overlapping input and output (in-place calls) share
 *    one mirror at the same relative offset, so aliasing works as on a GPU.
 *
 * Peers. A peer of this host maps both regions here: ops load and store its memory directly. A
 * peer on another host is reached over a tcp connection (remote.c): stores become writes, loads
 * become reads (answered by the peer's transport thread), signals and barrier arrivals become
 * 64-bit updates ordered after the connection's earlier writes. Ops go through block.h's
 * blk_write / blk_read, which pick the path per owner.
 *
 * Semantics (docs/plans.md): a signal on the channel (type, peer, ordinal j) adds 1 to the peer's
 * counter [type][me][j] with release; a wait takes the next expected value of its own counter
 * [type][peer][j] (a per-communicator running count, so balanced plans stay in step across calls)
 * and spins until the counter reaches it (acquire). Every spin is bounded by MSCCLPP_EXEC_TIMEOUT_MS
 * and stops when another block of this rank failed. */
#ifndef MPP_EXEC_CPU_CPU_H_
#define MPP_EXEC_CPU_CPU_H_

#include <pthread.h>
#include <stdint.h>

#include <mscclpp/memory.h>

#include "plan/plan.h"

#define EXEC_MAX_ORD 64     /* channels of one type between one pair of ranks */
#define EXEC_PLAN_CACHE 16  /* plans whose per-rank state is kept per communicator */
#define EXEC_TILE 512       /* bytes of each source a packet reduction holds at once */

#define EXEC_RTILE (64 * 1024) /* bytes of each operand a block moves at once to or from another host */
#define EXEC_CONN_TAG 0x584543  /* the tag of the executor's connections to other hosts */

/* Rank q's slot in every rank's sync region (the sync region starts with nranks of them, then the
 * counters). Only rank q writes it (directly or over its connection). */
struct exec_sync_slot {
  uint64_t arrive;                   /* rank barrier: how many barriers rank q entered */
  uint64_t in_off, out_off, scr_off; /* rank q's mirror offsets in its data region for this call */
};

struct exec_pool;

/* Per (plan, communicator): intra-rank barriers and semaphores, and temp space per block. */
struct exec_plan_state {
  uint64_t plan_id;
  int nblocks;
  uint64_t* bar_count;   /* [barrier id]: arrivals of the current round */
  uint64_t* bar_round;   /* [barrier id]: completed rounds */
  int64_t* sems;
  char** temp;           /* [block]: (EXEC_TILE + 2 pointers) x (maxrefs + 1) bytes */
  char** rtemp;          /* [block]: EXEC_RTILE x (maxrefs + 3) bytes (only with peers on other hosts) */
  char* errs;            /* [block][EXEC_ERR_LEN]: a call's failures */
  int* rcs;              /* [block] */
  uint32_t maxrefs;      /* most references (or switch group ranks) of one op */
};

struct exec_cpu {
  struct mscclppComm* comm;
  int rank, nranks;
  char* sync;                      /* own sync region */
  char** peer_sync;                /* [rank] mapped sync regions (own included; NULL: another host) */
  mscclppRegisteredMemory sync_reg;
  uint64_t* expected;              /* [type-1][peer][ord]: waits taken so far */
  char* data;                      /* own data region */
  uint64_t data_cap;
  char** peer_data;                /* [rank] (NULL: another host) */
  mscclppRegisteredMemory data_reg;
  int have_data;
  uint64_t launches;               /* calls so far; packet flags and scratch halves come from it */
  uint64_t barriers;               /* rank barriers entered */
  uint64_t* peer_off;              /* [rank][3]: this call's mirror offsets of every rank */
  struct exec_remote* rem;         /* connections to ranks of other hosts (remote.c); NULL: none */
  struct exec_pool* pool;
  struct exec_plan_state plans[EXEC_PLAN_CACHE];
  int plan_next;
  int64_t timeout_ns;
};

/* What every block of one call shares (run.c). */
struct exec_call {
  struct exec_cpu* st;
  const struct mscclppPlan* plan;
  const struct plan_rank* pr;
  struct exec_plan_state* ps;
  struct plan_layout layout;
  int dtype;
  size_t esize;
  uint32_t flag;
  uint64_t scr_half;          /* offset of this call's scratch half (double scratch) */
  int _Atomic failed;
  char* errs;                 /* ps->errs */
  int* rcs;                   /* ps->rcs */
};
#define EXEC_ERR_LEN 320

/* state.c */
mscclppResult_t exec_cpu_get(struct mscclppComm* comm, struct exec_cpu** out);
mscclppResult_t exec_cpu_data(struct exec_cpu* st, uint64_t bytes);
mscclppResult_t exec_cpu_plan_state(struct exec_cpu* st, const struct mscclppPlan* p, struct exec_plan_state** out);
uint64_t* exec_sem_counter(struct exec_cpu* st, int owner, int type, int sender, int ord);
/* Meets every rank: publishes this rank's arrival (and, offsets != 0, its slot's mirror offsets)
 * in every rank's sync region, then spins on its own region until every rank arrived; bounded. */
mscclppResult_t exec_rank_barrier(struct exec_cpu* st, int offsets);

/* The slot of rank q in the sync region at base. */
static inline struct exec_sync_slot* exec_slot(char* base, int q) { return (struct exec_sync_slot*)base + q; }
/* Byte offset of counter [type][sender][ord] in a sync region. */
uint64_t exec_sem_offset(const struct exec_cpu* st, int type, int sender, int ord);

/* remote.c: ranks on other hosts, over tcp. Each call is InvalidUsage for a mapped owner. */
struct exec_remote;
/* Connects to every rank whose sync region is not mapped here (collective, first call). */
mscclppResult_t exec_remote_open(struct exec_cpu* st);
void exec_remote_close(struct exec_cpu* st, int abort);
/* Copies n bytes of host memory src to owner's sync (sync != 0) or data region at off. */
mscclppResult_t exec_remote_write(struct exec_cpu* st, int owner, int sync, uint64_t off, const void* src, uint64_t n);
/* Copies n bytes of owner's data region at off into dst; returns once they are here. */
mscclppResult_t exec_remote_read(struct exec_cpu* st, int owner, uint64_t off, void* dst, uint64_t n);
/* Stores value in owner's sync region at off (8-aligned), after every earlier write to owner. */
mscclppResult_t exec_remote_store(struct exec_cpu* st, int owner, uint64_t off, uint64_t value);
/* One more signal on counter [type][me][ord] of owner: its running count, stored (as above). */
mscclppResult_t exec_remote_signal(struct exec_cpu* st, int owner, int type, int ord);
/* Waits until every earlier write and store to owner has landed. */
mscclppResult_t exec_remote_flush(struct exec_cpu* st, int owner);
/* RemoteError when owner (on another host) is known to be gone; Success otherwise. */
mscclppResult_t exec_remote_alive(struct exec_cpu* st, int owner);
/* RemoteError when rank r is known to be gone: its tcp connection (another host) or its process
 * (this host: comm_peer_alive, a syscall and a /proc read, so waits call it only now and then). */
mscclppResult_t exec_peer_alive(struct exec_cpu* st, int r);

/* pool.c: runs fn(arg, b) for b in [0, n) on n threads at once (the caller runs block 0). */
typedef void (*exec_block_fn)(void* arg, int block);
mscclppResult_t exec_pool_run(struct exec_pool** pool, int n, exec_block_fn fn, void* arg);
void exec_pool_destroy(struct exec_pool* pool);

/* block.c: runs one block of a call; failures land in call->errs/rcs. */
void exec_block(void* call, int block);

/* run.c */
mscclppResult_t exec_cpu_run(struct mscclppComm* comm, struct mscclppPlan* plan, const void* send, void* recv,
                             uint64_t send_bytes, uint64_t recv_bytes, int dtype);

#endif /* MPP_EXEC_CPU_CPU_H_ */
