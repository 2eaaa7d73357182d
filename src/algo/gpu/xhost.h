/* xhost.h - GPU ranks on several hosts: the collectives and sends/receives of a GPU-rank
 * communicator whose ranks span hosts (hosts told apart by host hash: MSCCLPP_HOSTID, network
 * namespaces, machines).
 *
 * Device memory does not cross hosts here: a cross-host step copies what it sends into pinned host
 * memory (the stage) on the call's stream, runs the CPU ranks' machinery over it (the pipes of
 * algo/cpu/net.h: shm inside a host, the net or tcp transport between hosts) in a host function on
 * the same stream, and copies what it received back. So every such call stays asynchronous to the
 * calling thread and can be captured into a CUDA graph.
 *
 * Two families (xhost_algos.c), chosen by the table's hosts= rules:
 *   gpu_<coll>_host   any collective, any host layout: the whole exchange over the host pipes of
 *                     the communicator (the CPU algorithm the table picks for CPU ranks on as many
 *                     hosts), the GPU only copying in and out
 *   gpu_<coll>_hier   allreduce, allgather, reducescatter and broadcast when every host has the
 *                     same number of GPU ranks: NVLink inside a host (the LL and bulk kernels on a
 *                     communicator of the host's ranks) and, between hosts, a CPU communicator of
 *                     the ranks with the same local index (one per host), so each byte crosses
 *                     hosts once per host as in the CPU hierarchical algorithms
 * Sends and receives go through the host pipes (xhost_p2p.c).
 *
 * A host step that fails (a dead peer, a timeout) cannot fail its call, which has returned: it is
 * logged, the later host steps of the communicator do nothing, and every later call on the
 * communicator fails with that error. C only (host code). */
#ifndef MPP_ALGO_GPU_XHOST_H_
#define MPP_ALGO_GPU_XHOST_H_

#include <stddef.h>

#include <mscclpp/comm.h>

#include "algo/algo.h"

struct xh_step;
struct xh_mem;

struct gpu_xhost {
  struct algo_comm* ac; /* the communicator's (GPU ranks on several hosts) */
  int nhosts, host, lrank, lsize; /* this rank's host index, local index and its host's size */
  int uniform;          /* every host has lsize ranks: the hierarchical family can run */
  const struct cpu_hier* lay; /* the host layout (ac->hier, freed after this state) */
  mscclppComm_t local;  /* GPU ranks of this host (NVLink), made by the first hierarchical call */
  mscclppComm_t rail;   /* CPU ranks: the ranks with this local index, one per host (rank = host) */
  int children;         /* 0: not made yet, 1: made, -1: making them failed */
  char* stage;          /* pinned host memory, stage_bytes, mapped for the GPU at stage_dev */
  char* stage_dev;
  size_t stage_bytes;
  struct xh_mem* retired;  /* stages replaced by larger ones: steps queued earlier may still use them */
  struct xh_step* all;     /* every step record made (freed at teardown; a captured call's stays in
                            * use for its graph's later runs, an eager one's goes back to idle) */
  struct xh_step* idle;    /* records free for the next eager step: the calling thread's own list */
  _Atomic(struct xh_step*) returned; /* records host functions gave back (a stack they push onto;
                                      * the calling thread takes all of it at once) */
  _Atomic unsigned long long step_count, step_ns; /* host steps run and their time (logged at teardown) */
  struct p2p_op* p2p_tmp;  /* a group's staged ops, built on the calling thread (p2p_cap long) */
  int p2p_cap;
  _Atomic int failing;     /* claimed by the first host step that failed (it writes err, msg) */
  _Atomic int failed;      /* set once err and msg are written: every later call fails with them */
  mscclppResult_t err;
  char msg[512];
};

/* The state of ac (GPU ranks on several hosts), made on first use (no communication). Fails with
 * the recorded error once a host step has failed. */
mscclppResult_t xh_get(struct algo_comm* ac, struct gpu_xhost** out);
/* The local and rail communicators (collective: every rank calls it in the same call). */
mscclppResult_t xh_children(struct gpu_xhost* x);
/* RemoteError when a child communicator cannot run collectives any more (algo_health), its ranks
 * translated into the communicator's in the message. */
mscclppResult_t xh_children_health(struct gpu_xhost* x);
/* Releases everything, after waiting for the device (its queued host steps; abort: the child
 * communicators are aborted first, so a step waiting on a peer there returns at once). */
void xh_free(struct gpu_xhost* x, int abort);

/* The stage, at least bytes long (a larger one replaces it: never while the stream is captured
 * once it was made, since graphs keep the old address; the old one lives until teardown). */
mscclppResult_t xh_stage(struct gpu_xhost* x, size_t bytes, char** out);
/* The device address of host pointer p of the current stage (the GPU reads it over PCIe). */
static inline char* xh_stage_dev(const struct gpu_xhost* x, const char* p) { return x->stage_dev + (p - x->stage); }
/* The most elements of es bytes one staged piece carries (MSCCLPP_ALGO_GPU_HOST_CHUNK, at least 1). */
size_t xh_piece(size_t es);

/* Copies rows x width bytes between device and host on stream (pitches in bytes). */
mscclppResult_t xh_d2h(void* host, size_t hpitch, const void* dev, size_t dpitch, size_t width, size_t rows, void* stream);
mscclppResult_t xh_h2d(void* dev, size_t dpitch, const void* host, size_t hpitch, size_t width, size_t rows, void* stream);

/* Queues on stream a host step running CPU algorithm d of cac (a communicator of CPU pipes: x's
 * own, or its rail) on the host buffers of a; divide > 0: then divides a's count elements of
 * recv by it (avg finished across two levels). */
mscclppResult_t xh_host_coll(struct gpu_xhost* x, void* stream, struct algo_comm* cac, const struct algo_desc* d,
                             const struct algo_args* a, int divide);
/* Queues on stream a host step running the CPU engine over nops sends and receives of x's
 * communicator between host buffers (copied: the caller's array may go). */
mscclppResult_t xh_host_p2p(struct gpu_xhost* x, void* stream, const struct p2p_op* ops, int nops);

/* The algorithms (xhost_algos.c) and the sends/receives of a group (xhost_p2p.c). */
mscclppResult_t gpu_coll_host(struct algo_comm* ac, const struct algo_args* a);
mscclppResult_t gpu_coll_hier(struct algo_comm* ac, const struct algo_args* a);
/* The ops of ac among ops[0..nops) (the CPU engine links each to its predecessor itself). */
mscclppResult_t xh_p2p_comm(struct p2p_op* ops, int nops, struct algo_comm* ac);

#endif /* MPP_ALGO_GPU_XHOST_H_ */
