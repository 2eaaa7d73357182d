/* order.h - the order check: which accesses of a plan's ranks to each other's buffers its
 * synchronization leaves unordered when calls run back to back with no barrier between them (as
 * on GPU ranks), and which waits can never be satisfied.
 *
 * Model: every op of a block is an event in program order; a call's first op of every block of a
 * rank comes after that rank's previous call ended (the stream orders launches), where the rank's
 * caller may read and write its input and output. Happens-before edges: the n-th signal (signal,
 * rlxsignal, pws, pwsf) on a channel to the n-th wait on the paired channel (per pipeline
 * context; a pipeline body counts once; with several signalling blocks, the signals a wait must
 * have seen: struct rg_group), barrier occurrences, semaphore releases to acquires, and
 * every packet write to the packet reads of the same scratch bytes in the same call. Two accesses
 * to the same bytes of a rank's buffer (scratch per half with use_double_scratch_buffer; in
 * place, input and output aliased as NCCL's in-place forms say), at least one a write, must be
 * ordered. A port channel's puts and signals (put, pws, signal, rlxsignal) run on a proxy
 * thread of their own, in order (plan/order/port.c): the transfer reads and writes there, the peer's
 * wait follows the proxy's signal, and only a flush (flush, pwsf: done when the op is) orders
 * them before the block's later ops. Relaxed signals order like release ones. The graph
 * (plan/order/graph.c) holds a vector clock per event; plan/order/access.c collects the accesses and reports. */
#ifndef MPP_PLAN_ORDER_ORDER_H_
#define MPP_PLAN_ORDER_ORDER_H_

#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"

/* An event: op i (0-based, flattened pipeline) of call c of thread t; for the caller threads
 * (nblock_threads .. + nranks) the caller's turn before call c (i = 0); for a proxy thread (after
 * those) its i-th transfer or signal of call c. */
struct rg_ev {
  int t;
  int c;
  uint32_t i;
};

struct rg_pred { /* a same-call predecessor of an op: op i of thread t */
  int t;
  uint32_t i;
};

struct rg_edge { /* op i of thread t comes after `from` (same call) */
  int t;
  uint32_t i;
  struct rg_pred from;
};

struct rg_edges {
  struct rg_edge* e;
  size_t n, cap;
  size_t max; /* at most this many (rg_add_edge fails past it; g->over says why) */
};

/* A counter (channel semaphore, or a rank's semaphore) incremented by several blocks and waited on
 * by one: which increments a wait has seen depends on the order, so its edges are refined once
 * the clocks are known (plan/order/edges.c: rg_refine). */
struct rg_group {
  struct rg_pred* inc; /* by block, then program order */
  size_t ninc;
  struct rg_pred* wt;  /* program order */
  size_t nwt;
  int64_t init;
};

/* The proxy of one port channel (rank -> peer, ordinal) that one block drives: its events in
 * order, each the op (block thread, op) that triggered it. */
struct rg_proxy {
  int rank, peer, ord, block;
  struct rg_pred* src;
  size_t n, cap;
};

struct rg_graph {
  const struct mscclppPlan* p;
  int calls;         /* calls unrolled: 2, or 3 with double scratch */
  int nthreads;      /* blocks of every rank, one caller thread per rank, then the proxies */
  int nblock_threads;
  int first_proxy;   /* nblock_threads + nranks */
  struct rg_proxy* proxies;
  size_t nproxies, capproxies;
  uint32_t* per_call; /* [thread]: events per call (block: its ops; caller: 1; proxy: its events) */
  int* rank_of;      /* [thread] */
  int* first_thread; /* [rank]: the rank's first block thread */
  const struct plan_block** blk; /* [thread < nblock_threads] */
  struct rg_edges el;  /* every edge, laid out per op as pred_at/preds */
  uint32_t** pred_at; /* [thread][event + 1] (blocks and proxies): CSR offsets into preds */
  struct rg_pred* preds;
  size_t npreds;
  struct rg_group* groups;
  size_t ngroups, capgroups;
  size_t work_left; /* steps the check may still take (rg_spend) */
  int over;         /* it ran out: the plan is too large to check */
  uint32_t** vc;      /* [thread]: (events of the thread) x nthreads clocks, event k (1-based) at k - 1 */
  uint32_t* done;     /* [thread]: events with clocks */
};

/* Steps the check may take: 8 per clock of its memory budget, and at most RG_MAX_STEPS (about 2 s
 * of a loaded core), so that even the API's larger budget cannot make one check run for long. */
#define RG_MAX_STEPS ((size_t)64 << 20)
static inline size_t rg_step_budget(size_t max_clocks) {
  return max_clocks * 8 < RG_MAX_STEPS ? max_clocks * 8 : RG_MAX_STEPS;
}
/* Takes n steps from the check's budget (every loop over pairs pays for its steps, so that no
 * plan can make the check run for long); 1 when the budget is spent (g->over set). */
static inline int rg_spend(struct rg_graph* g, size_t n) {
  if (g->work_left < n) {
    g->work_left = 0, g->over = 1;
    return 1;
  }
  g->work_left -= n;
  return 0;
}

/* Events of thread t over all calls: ops x calls, or calls for a caller thread. */
uint32_t rg_nevents(const struct rg_graph* g, int t);
/* 1-based index of an event in its thread. */
uint32_t rg_index(const struct rg_graph* g, struct rg_ev e);
/* a happens before b (a != b). */
int rg_before(const struct rg_graph* g, struct rg_ev a, struct rg_ev b);

/* Builds the edges and clocks. Returns 0 on success; 1 when the analysis does not apply (why in
 * why: a channel or semaphore shared by blocks, a graph over max_clocks entries); 2 when some wait
 * can never be satisfied (why names the first such op); -1 out of memory. */
int rg_build(struct rg_graph* g, const struct mscclppPlan* p, size_t max_clocks, char* why, size_t why_len);
void rg_free(struct rg_graph* g);

/* Whether reference i of op code's sources (dst 0) or destinations (dst 1) holds packets
 * (shape.c's rule table). */
int plan_ref_is_packet(int code, int dst, int i);

/* The order check of a whole plan: writes one line per finding (at most max_lines) into text
 * and returns the number of findings, or -1 when the analysis could not run (the reason is the
 * text). *never (when not NULL): 1 when the one finding is a wait that can never be satisfied
 * (a cycle of waits, packets no op writes): the plan would hang on every call. */
int plan_race_check(const struct mscclppPlan* p, size_t max_clocks, int max_lines, char* text, size_t len, int* never);

/* At load, as MSCCLPP_PLAN_ORDER_CHECK says (on plans small enough to check quickly): off;
 * warn: log the first finding (when the check does not apply: warn about an LL plan without
 * double scratch); fix: also turn double scratch on when that leaves fewer findings; strict: a
 * finding is the load's error (InvalidArgument). */
mscclppResult_t plan_order_at_load(struct mscclppPlan* p);

#endif /* MPP_PLAN_ORDER_ORDER_H_ */
