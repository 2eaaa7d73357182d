/* algos.c - the GPU algorithms: each collective as one or two exchange plans (gpu.h) run by the LL
 * kernel (latency: packets, no semaphores) or the bulk kernel (bandwidth: steps of SM stores into
 * the peers' scratch with one semaphore round each).
 *
 *   allreduce_ll1   one-shot: every rank sends its whole input to every peer and reduces all n
 *   allreduce_ll2   two-shot: reduce-scatter of n slices, then allgather of the reduced slices (LL)
 *   allreduce_bulk  the same two phases with the bulk kernel
 *   allreduce_bulk1 one-shot with the bulk kernel: one launch and one set of rounds; on 2 ranks it
 *                   moves as many bytes as the two phases (on more, n - 1 times the message)
 *   allgather, reducescatter, alltoall, broadcast, reduce: _ll and _bulk, one plan each
 * An LL algorithm whose per-peer part exceeds the LL inbox (MSCCLPP_ALGO_GPU_LL_SLOT / 2 - 16
 * bytes) runs its bulk sibling instead (logged at debug level). Reductions combine in rank order,
 * so every rank computes the same bits, and reduce equals allreduce's result on the root. */
#include <string.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

/* The plan's common fields; every part starts empty. */
static void plan_init(struct gx_plan* p, const struct algo_args* a, int mode) {
  memset(p, 0, sizeof(*p));
  p->src = (const char*)a->send;
  p->dst = (char*)a->recv;
  p->mode = mode;
  p->dtype = a->dtype;
  p->op = a->op;
  p->scalar = a->scalar;
  p->scalar_dev = a->scalar_dev;
  p->scale_send = mode == GX_REDUCE && a->op == ELEM_OP_PREMUL;
}

/* Element offset and count of slice q of count elements cut in n (the last ones may be short). */
static void slice(size_t count, int n, int q, size_t* off, size_t* cnt) {
  size_t per = (count + (size_t)n - 1) / (size_t)n;
  *off = per * (size_t)q < count ? per * (size_t)q : count;
  *cnt = count - *off < per ? count - *off : per;
}

static mscclppResult_t launch(struct gpu_net* g, const struct gx_plan* p, int ll, void* stream) {
  return ll ? gpu_launch_ll(&g->d, p, stream) : gpu_launch_bulk(&g->d, p, stream);
}

/* True when a plan's parts fit the LL inbox; logs the switch to bulk otherwise. */
static int fits_ll(const struct gpu_net* g, const struct gx_plan* p, const char* name) {
  if (p->maxlen <= gpu_ll_max(&g->d)) return 1;
  LOG_DEBUG_(LOG_SUB_ALGO, "%s: parts of %llu bytes exceed the LL inbox (%llu): bulk kernel", name,
             (unsigned long long)p->maxlen, (unsigned long long)gpu_ll_max(&g->d));
  return 0;
}

/* ---- plans ------------------------------------------------------------------------------------- */

/* One-shot allreduce: every rank's whole input to every rank, each reduces all n. */
static void plan_one_shot(const struct algo_args* a, int nranks, struct gx_plan* p) {
  plan_init(p, a, GX_REDUCE);
  uint64_t bytes = (uint64_t)a->count * a->es;
  for (int q = 0; q < nranks; q++) p->send_len[q] = p->recv_len[q] = bytes;
  p->maxlen = bytes;
}

/* Reduce-scatter of slices into recv's own slice, then allgather of the slices within recv. */
static void plan_two_phase(const struct algo_args* a, int me, int n, struct gx_plan* rs, struct gx_plan* ag) {
  size_t es = a->es, off, cnt, moff, mcnt;
  plan_init(rs, a, GX_REDUCE);
  plan_init(ag, a, GX_COPY);
  ag->src = (const char*)a->recv;
  slice(a->count, n, me, &moff, &mcnt);
  for (int q = 0; q < n; q++) {
    slice(a->count, n, q, &off, &cnt);
    rs->send_off[q] = off * es, rs->send_len[q] = cnt * es, rs->recv_len[q] = mcnt * es;
    ag->send_off[q] = moff * es, ag->send_len[q] = mcnt * es;
    ag->recv_off[q] = off * es, ag->recv_len[q] = cnt * es;
  }
  rs->red_off = moff * es;
  rs->maxlen = ag->maxlen = (a->count + (size_t)n - 1) / (size_t)n * es;
}

/* The plan of a one-plan collective (allgather, reducescatter, alltoall, broadcast, reduce). */
static void plan_one(const struct algo_args* a, int me, int n, struct gx_plan* p) {
  int root = a->root;
  uint64_t block = (uint64_t)a->count * a->es;
  switch (a->coll) {
    case ALGO_COLL_ALLGATHER:
      plan_init(p, a, GX_COPY);
      for (int q = 0; q < n; q++) p->send_len[q] = p->recv_len[q] = block, p->recv_off[q] = (uint64_t)q * block;
      break;
    case ALGO_COLL_REDUCESCATTER:
      plan_init(p, a, GX_REDUCE);
      for (int q = 0; q < n; q++) p->send_off[q] = (uint64_t)q * block, p->send_len[q] = p->recv_len[q] = block;
      break;
    case ALGO_COLL_ALLTOALL:
      plan_init(p, a, GX_COPY);
      for (int q = 0; q < n; q++)
        p->send_off[q] = p->recv_off[q] = (uint64_t)q * block, p->send_len[q] = p->recv_len[q] = block;
      break;
    case ALGO_COLL_BROADCAST:
      plan_init(p, a, GX_COPY);
      for (int q = 0; q < n && me == root; q++) p->send_len[q] = block;
      p->recv_len[root] = block;
      break;
    default: /* reduce: every part to the root, which reduces; the others only send */
      plan_init(p, a, me == root ? GX_REDUCE : GX_NONE);
      p->scale_send = a->op == ELEM_OP_PREMUL;
      p->send_len[root] = block;
      for (int q = 0; q < n && me == root; q++) p->recv_len[q] = block;
      break;
  }
  p->maxlen = block;
}

/* Slice of rank q in a rooted plan split as gpu_rooted_split says (the ranks after the root take
 * the n - 1 slices in turn when it is root-free). */
static void rooted_slice(size_t count, int n, int root, enum gpu_rooted_split split, int q, size_t* off, size_t* cnt) {
  if (split == GPU_ROOTED_ROOT_ALONE || split == GPU_ROOTED_RING) {
    *off = 0, *cnt = q == root ? count : 0;
  } else if (split == GPU_ROOTED_EVEN || n == 1) {
    slice(count, n, q, off, cnt);
  } else if (q == root) {
    *off = 0, *cnt = 0;
  } else {
    slice(count, n - 1, (q - root - 1 + n) % n, off, cnt);
  }
}

int gpu_reduce_ring(const struct algo_args* a, int nranks) {
  int64_t min = param_int(PARAM_ALGO_GPU_REDUCE_RING_MIN);
  return a->coll == ALGO_COLL_REDUCE && nranks >= 3 && min >= 0 && (uint64_t)a->count * a->es >= (uint64_t)min &&
         a->op != ELEM_OP_AVG && a->op != ELEM_OP_PREMUL;
}

enum gpu_rooted_split gpu_rooted_split(const struct algo_args* a, int nranks, int chain, int ring) {
  uint64_t bytes = (uint64_t)a->count * a->es;
  int64_t alone = param_int(PARAM_ALGO_GPU_ROOT_ALONE_MIN);
  if (nranks == 2 && alone >= 0 && bytes >= (uint64_t)alone) return GPU_ROOTED_ROOT_ALONE;
  if (ring && gpu_reduce_ring(a, nranks)) return GPU_ROOTED_RING;
  if (chain || (a->coll == ALGO_COLL_REDUCE && nranks >= 3 && bytes >= GPU_ROOT_FREE_MIN)) return GPU_ROOTED_ROOT_FREE;
  return GPU_ROOTED_EVEN;
}

void gpu_plan_rooted(const struct algo_args* a, int rank, int nranks, enum gpu_rooted_split split, struct gx_plan* p) {
  size_t es = a->es, off, cnt, moff, mcnt;
  int m = split == GPU_ROOTED_ROOT_ALONE || split == GPU_ROOTED_RING ? 1 : split == GPU_ROOTED_ROOT_FREE && nranks > 1 ? nranks - 1 : nranks;
  plan_init(p, a, GX_REDUCE);
  p->scale_send = 0;
  rooted_slice(a->count, nranks, a->root, split, rank, &moff, &mcnt);
  for (int q = 0; q < nranks; q++) {
    rooted_slice(a->count, nranks, a->root, split, q, &off, &cnt);
    p->send_off[q] = off * es, p->send_len[q] = cnt * es;
  }
  p->recv_len[rank] = mcnt * es;
  p->red_off = moff * es;
  p->maxlen = (a->count + (size_t)m - 1) / (size_t)m * es;
  p->one_src = a->coll == ALGO_COLL_BROADCAST;
  p->one_dst = a->coll == ALGO_COLL_REDUCE;
  p->root = a->root;
  p->ring = split == GPU_ROOTED_RING;
}

int gpu_plans(const struct algo_args* a, int rank, int nranks, int two_phase, struct gx_plan out[2]) {
  if (a->coll != ALGO_COLL_ALLREDUCE) {
    plan_one(a, rank, nranks, &out[0]);
    return 1;
  }
  if (!two_phase) {
    plan_one_shot(a, nranks, &out[0]);
    return 1;
  }
  plan_two_phase(a, rank, nranks, &out[0], &out[1]);
  return 2;
}

/* Builds and launches the plans; ll: the LL kernel, unless a part exceeds the LL inbox; skip: NULL,
 * or a device word for the bulk launches (gx_plan.skip). */
static mscclppResult_t run_skip(struct algo_comm* ac, const struct algo_args* a, int ll, int two_phase,
                                const uint32_t* skip) {
  struct gpu_net* g;
  MPP_CHECK(gpu_net_get(ac, a->stream, &g));
  struct gx_plan p[2];
  if (ll && !two_phase && a->coll == ALGO_COLL_ALLREDUCE && (uint64_t)a->count * a->es > gpu_ll_max(&g->d))
    two_phase = 1; /* one-shot parts too large for the LL inbox: two-shot LL first */
  int np = gpu_plans(a, ac->rank, ac->nranks, two_phase, p);
  if (ll && !fits_ll(g, &p[0], algo_coll_name(a->coll))) ll = 0;
  for (int i = 0; i < np; i++) {
    p[i].skip = ll ? NULL : skip;
    MPP_CHECK(launch(g, &p[i], ll, a->stream));
  }
  return mscclppSuccess;
}

static mscclppResult_t run(struct algo_comm* ac, const struct algo_args* a, int ll, int two_phase) {
  return run_skip(ac, a, ll, two_phase, NULL);
}

mscclppResult_t gpu_bulk_skippable(struct algo_comm* ac, const struct algo_args* a, const uint32_t* skip) {
  return run_skip(ac, a, 0, a->coll == ALGO_COLL_ALLREDUCE, skip);
}

mscclppResult_t gpu_allreduce_ll1(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 1, 0); }
mscclppResult_t gpu_allreduce_ll2(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 1, 1); }
mscclppResult_t gpu_allreduce_bulk(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 0, 1); }
mscclppResult_t gpu_allreduce_bulk1(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 0, 0); }
mscclppResult_t gpu_allgather_ll(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 1, 0); }
mscclppResult_t gpu_allgather_bulk(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 0, 0); }
mscclppResult_t gpu_reducescatter_ll(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 1, 0); }
mscclppResult_t gpu_reducescatter_bulk(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 0, 0); }
mscclppResult_t gpu_alltoall_ll(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 1, 0); }
mscclppResult_t gpu_alltoall_bulk(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 0, 0); }
mscclppResult_t gpu_broadcast_ll(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 1, 0); }
mscclppResult_t gpu_broadcast_bulk(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 0, 0); }
mscclppResult_t gpu_reduce_ll(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 1, 0); }
mscclppResult_t gpu_reduce_bulk(struct algo_comm* ac, const struct algo_args* a) { return run(ac, a, 0, 0); }

algo_run_fn gpu_bulk_of(enum algo_coll coll) {
  switch (coll) {
    case ALGO_COLL_ALLREDUCE: return gpu_allreduce_bulk;
    case ALGO_COLL_ALLGATHER: return gpu_allgather_bulk;
    case ALGO_COLL_REDUCESCATTER: return gpu_reducescatter_bulk;
    case ALGO_COLL_BROADCAST: return gpu_broadcast_bulk;
    case ALGO_COLL_REDUCE: return gpu_reduce_bulk;
    default: return gpu_alltoall_bulk;
  }
}
