/* algo.h - the built-in collectives inside the library: what one call asks for (struct algo_args),
 * the per-communicator state of this layer (struct algo_comm), the algorithm registry and the
 * single dispatch point every public entry point goes through.
 *
 * Layering: algo/ sits above core/ (communicators, registered memory, connections, semaphores) and
 * uses only their public API plus core/comm.h and core/connection.h; nothing below includes it. */
#ifndef MPP_ALGO_ALGO_H_
#define MPP_ALGO_ALGO_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/collectives.h>

#include "elem/redop.h"

struct mscclppComm;
struct cpu_net;
struct cpu_hier;
struct gpu_net;
struct gpu_xhost;

enum algo_coll {
  ALGO_COLL_ALLREDUCE = 0,
  ALGO_COLL_ALLGATHER,
  ALGO_COLL_REDUCESCATTER,
  ALGO_COLL_BROADCAST,
  ALGO_COLL_REDUCE,
  ALGO_COLL_ALLTOALL,
  ALGO_COLL_SENDRECV,
  ALGO_COLL_COUNT
};

/* "allreduce", "allgather", ... (the names of the tuning table and of mscclpp-perf). */
const char* algo_coll_name(enum algo_coll coll);

/* Broadcast and reduce: the collectives with a root (only the root has an input / an output). */
int algo_coll_rooted(enum algo_coll coll);

/* Allreduce, reducescatter and reduce: the collectives that combine the ranks' data with an op. */
int algo_coll_reduces(enum algo_coll coll);

/* One collective call, checked. count keeps the API's meaning (per rank block for allgather,
 * reducescatter and alltoall). */
struct algo_args {
  enum algo_coll coll;
  const void* send;
  void* recv;
  size_t count;
  int dtype;
  size_t es;              /* element size */
  mscclppRedOp_t user_op; /* as the caller passed it */
  enum elem_op op;        /* resolved kind (reductions only) */
  elem_scalar scalar;     /* this rank's premulsum scalar */
  const void* scalar_dev; /* GPU ranks, device-resident premulsum scalar: read by the kernel (else NULL) */
  int root;
  void* stream;
  size_t bytes;           /* the message size the selection table uses (see tuning/algo.tsv) */
  int captured;           /* GPU ranks: the stream is being captured into a CUDA graph (set by dispatch) */
  const struct algo_win* win[2]; /* GPU ranks: the windows holding send and recv, both or neither (set by dispatch) */
  int registered;         /* GPU ranks: an eager call large enough on registered buffers (set by dispatch) */
};

/* A pre-multiplied-sum operator made by mscclppRedOpCreatePreMulSum. */
struct algo_premul {
  int used;
  int dtype;
  int residence;      /* mscclppScalarResidence_t */
  const void* ptr;    /* Device residence: read at every call */
  unsigned char value[8]; /* HostImmediate: the value, copied at creation */
};

/* A window (window.c): this rank's buffer and, on GPU ranks, every peer's as mapped here. */
#define ALGO_WIN_MAX_RANKS 8 /* GPU ranks of one communicator (gpu.h checks GPU_MAX_RANKS against it) */
struct algo_win {
  char* base;
  size_t size;
  char* peer[ALGO_WIN_MAX_RANKS]; /* GPU ranks: rank q's buffer (q == rank: base); NULL on CPU ranks */
  struct algo_win* next;
};

/* What this layer keeps per communicator. Found through algo_comm_get (state.c). */
struct algo_comm {
  struct mscclppComm* comm;
  int rank, nranks;
  int nhosts; /* hosts the ranks are on (distinct host hashes) */
  int kind; /* mscclppRankCpu or mscclppRankGpu: every rank's (mixed communicators are refused) */
  struct algo_premul* premul;
  int npremul;
  struct cpu_net* net; /* CPU ranks: scratch and pipes, made on first use */
  struct cpu_hier* hier; /* CPU ranks: the host layout of the hierarchical algorithms, made on first use */
  struct gpu_net* gnet; /* GPU ranks: scratch and memory channels, made on first use (algo/gpu/gpu.h) */
  struct gpu_xhost* xh; /* GPU ranks on several hosts: stage and host communicators (algo/gpu/xhost.h) */
  struct algo_win* wins; /* registered windows, newest first */
  struct algo_win* regs; /* buffers registered locally (mscclppCommBufferRegister; no peers), newest first */
};

/* ---- windows (window.c) ----------------------------------------------------------------------- */

/* The windows holding the call's send and receive buffers into a->win, when both lie in windows
 * (GPU ranks, collectives with a zero-copy algorithm; else both NULL); else a->registered when both
 * lie in registered buffers (or windows) and the call has at least MSCCLPP_REGISTERED_ZC_MIN bytes. */
void algo_win_find(const struct algo_comm* ac, struct algo_args* a);
/* Releases every window of ac (teardown). */
void algo_win_free_all(struct algo_comm* ac);

/* The state of comm, made on first use (no communication) in the communicator's COMM_EXT_ALGO slot
 * and released at communicator teardown. Lock-free once made. */
mscclppResult_t algo_comm_get(struct mscclppComm* comm, struct algo_comm** out);
/* RemoteError, naming the cause, when comm's collectives cannot run any more: a rank died, or a
 * bounded device wait of an earlier call ran out (health.c). who: the caller's name for messages. */
mscclppResult_t algo_health(struct mscclppComm* comm, const char* who);

/* Resolves op for dtype on ac: the kind and, for a pre-multiplied sum, this rank's scalar (read now
 * for Device residence). InvalidArgument names fn and what is wrong. */
mscclppResult_t algo_resolve_op(const char* fn, struct algo_comm* ac, mscclppRedOp_t op, int dtype, enum elem_op* kind,
                                elem_scalar* scalar);

/* The device-resident scalar of op on a GPU-rank communicator (read by the kernels at every call),
 * or NULL. */
const void* algo_premul_device_scalar(struct algo_comm* ac, mscclppRedOp_t op);

/* ---- registry and selection (select.c) -------------------------------------------------------- */

typedef mscclppResult_t (*algo_run_fn)(struct algo_comm* ac, const struct algo_args* a);

struct algo_desc {
  const char* name;
  enum algo_coll coll;
  int kind; /* mscclppRankCpu or mscclppRankGpu */
  algo_run_fn run;
  int graph_only; /* 1: chosen by the table only for calls captured into a CUDA graph (zero copy) */
};

/* The algorithm for a call: MSCCLPP_ALGO's choice when it names one for this collective and rank
 * kind, else the first matching row of the tuning table (by size, ranks, hosts and datatype; rows of
 * graph-only algorithms match captured calls only), else the first registered one. NULL with *none set when no algorithm
 * exists for the rank kind; an error (bad MSCCLPP_ALGO, bad table) otherwise. */
mscclppResult_t algo_select(enum algo_coll coll, int kind, int nranks, int nhosts, size_t bytes, int dtype,
                            int captured, const struct algo_desc** out);
/* 1 when MSCCLPP_ALGO names an algorithm for this collective and rank kind (0 too when the
 * environment or the table is bad: algo_select reports that). */
int algo_forced(enum algo_coll coll, int kind);
/* The registry (for tests and tools): *count entries. */
const struct algo_desc* algo_registry(int* count);

/* ---- point-to-point (cpu/p2p.c, gpu/p2p.c) ------------------------------------------------------ */

/* A send or receive of a group, in call order among the group's others. */
struct p2p_op {
  struct algo_comm* ac;
  int is_send;
  int peer;
  char* buf;
  size_t bytes;
  size_t done; /* bytes moved */
  int pred;    /* index of the previous op with the same communicator, peer and direction, or -1 */
  void* stream; /* GPU ranks: the stream the op is ordered on */
  int finished;
};

#endif /* MPP_ALGO_ALGO_H_ */
