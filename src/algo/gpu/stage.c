/* stage.c - the staged collectives (allreduce, allgather, reducescatter, alltoall): the zero-copy
 * kernel (zc.cu) run over the peers' scratch instead of their own buffers, so that it serves every
 * call, eager or captured, on any buffers, with no exchange of addresses.
 *
 * Each rank's stage is the bulk region of its scratch (gpu.h), mapped on every peer at setup. A
 * rank first copies the parts its peers read (reductions: part q of its input, read by rank q)
 * into its own stage; after the opening round the kernel reads the peers' stages where zero copy
 * reads their inputs, and writes the peers' stages where zero copy writes their outputs; after a
 * second round each rank copies what was written into its stage out to its output. Against the
 * bulk kernel's pipeline this moves every byte over NVLink once, with three rounds in all, for the
 * price of two local copies at memory speed (zc.cu).
 *
 * A call whose staged buffer (the input of reductions, the output of copies) exceeds the stage runs
 * in pieces when it is an allreduce (each piece a whole allreduce of a range of the elements) and
 * as the bulk sibling otherwise; pre-multiplied sums and empty calls run the bulk sibling too. The
 * stage size is agreed at setup, so every rank takes the same path. An eager such call first
 * launches a probe over the whole call (ezc.c): when it goes zero copy, it has done the call and
 * the pieces or the bulk launches after it find its word set and return at once. */
#include <string.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

#if MSCCLPP_HAVE_CUDA

/* Bytes of the stage: the whole bulk region. */
static uint64_t stage_bytes(const struct gpu_net* g) { return 2ull * (uint64_t)g->d.nranks * g->d.bulk_slot; }

/* Calls whose pieces (ranges of the elements) are whole calls of their own. */
static int sliceable(enum algo_coll c) {
  return c == ALGO_COLL_ALLREDUCE || algo_coll_rooted(c);
}

/* Bytes of the buffer a call stages: its input (reductions, broadcast) or output (copies). */
static uint64_t staged_bytes(const struct algo_comm* ac, const struct algo_args* a) {
  uint64_t b = (uint64_t)a->count * a->es, n = (uint64_t)ac->nranks;
  return sliceable(a->coll) ? b : b * n;
}

/* The call's plan for the staged kernel: allreduce's reduce-scatter phase (put_reduced:
 * each slice also goes to every peer), broadcast's and reduce's sliced plans (when the call may go
 * zero copy, may_ezc: a broadcast root-free for the push chain, a reduce as the ring), the others'
 * one plan; the own buffers in z (the peers' are the caller's to set). */
static void stage_plan(struct algo_comm* ac, const struct algo_args* a, int may_ezc, struct gx_plan* p,
                       struct gx_zc* z) {
  struct gx_plan two[2];
  if (algo_coll_rooted(a->coll)) {
    int chain = may_ezc && gpu_bcast_chain(a, ac->nranks);
    int ring = may_ezc && param_int(PARAM_ALGO_GPU_EAGER_ZC) != 0; /* may_ezc: eager calls only */
    gpu_plan_rooted(a, ac->rank, ac->nranks, gpu_rooted_split(a, ac->nranks, chain, ring), p);
  } else {
    (void)gpu_plans(a, ac->rank, ac->nranks, a->coll == ALGO_COLL_ALLREDUCE, two);
    *p = two[0];
  }
  memset(z, 0, sizeof(*z));
  z->peer_src[ac->rank] = (const char*)a->send;
  z->peer_dst[ac->rank] = (char*)a->recv;
  z->put_reduced = a->coll == ALGO_COLL_ALLREDUCE || a->coll == ALGO_COLL_BROADCAST;
  z->staged = 1;
}

/* Launches the staged kernel with plan p and z on the call's stream (t0: when the call began). */
static mscclppResult_t stage_go(struct gpu_net* g, const struct algo_args* a, struct gx_plan* p, struct gx_zc* z,
                                uint64_t t0) {
  gpu_zc_shape(g, p, z);
  MPP_CHECK(gpu_launch_zc(&g->d, p, z, a->stream));
  g->graph_launches++;
  if (z->ezc) g->ez.launch_ns += time_now_ns() - t0;
  return mscclppSuccess;
}

/* One staged launch of call a (its staged buffer fits the stage), eager zero copy when the call is
 * eager; skip: NULL, or the word of a probe before it (then a plain staged launch that does nothing
 * when the probe went zero copy). */
static mscclppResult_t stage_launch(struct gpu_net* g, struct algo_comm* ac, const struct algo_args* a,
                                    const uint32_t* skip) {
  uint64_t t0 = time_now_ns();
  struct gx_plan p;
  struct gx_zc z;
  stage_plan(ac, a, !a->captured && skip == NULL, &p, &z);
  for (int q = 0; q < ac->nranks; q++)
    if (q != ac->rank) z.peer_src[q] = z.peer_dst[q] = g->d.peer_scratch[q] + g->d.ll_bytes;
  p.skip = skip;
  if (!a->captured && skip == NULL) MPP_CHECK(gpu_ezc_prepare(g, ac, a, &z));
  return stage_go(g, a, &p, &z, t0);
}

/* An eager call larger than the stage: one launch over the whole call that goes zero copy when
 * every rank's buffers are mapped on every peer, and otherwise only records that it did not
 * (*skip: the word the launches doing the call then read; NULL when eager zero copy is off). */
static mscclppResult_t stage_probe(struct gpu_net* g, struct algo_comm* ac, const struct algo_args* a,
                                   const uint32_t** skip) {
  uint64_t t0 = time_now_ns();
  struct gx_plan p;
  struct gx_zc z;
  stage_plan(ac, a, 1, &p, &z);
  MPP_CHECK(gpu_ezc_prepare(g, ac, a, &z));
  *skip = NULL;
  if (!z.ezc) return mscclppSuccess;
  z.went = g->ez.went;
  MPP_CHECK(stage_go(g, a, &p, &z, t0));
  *skip = g->ez.went;
  return mscclppSuccess;
}

/* An allreduce, broadcast or reduce larger than the stage: pieces of whole 16-byte groups per
 * rank, each its own call (a buffer the rank does not have stays NULL). */
static mscclppResult_t stage_pieces(struct gpu_net* g, struct algo_comm* ac, const struct algo_args* a,
                                    const uint32_t* skip) {
  uint64_t per = stage_bytes(g) / a->es, align = (uint64_t)ac->nranks * 16;
  per = per / align * align;
  LOG_DEBUG_(LOG_SUB_ALGO, "%s (staged): %zu elements in pieces of %llu", algo_coll_name(a->coll), a->count,
             (unsigned long long)per);
  for (uint64_t done = 0; done < a->count; done += per) {
    struct algo_args piece = *a;
    piece.count = a->count - done < per ? (size_t)(a->count - done) : (size_t)per;
    piece.send = a->send ? (const char*)a->send + done * a->es : NULL;
    piece.recv = a->recv ? (char*)a->recv + done * a->es : NULL;
    MPP_CHECK(stage_launch(g, ac, &piece, skip));
  }
  return mscclppSuccess;
}

mscclppResult_t gpu_coll_stage(struct algo_comm* ac, const struct algo_args* a) {
  int red = algo_coll_reduces(a->coll);
  if (a->count == 0 || (red && a->op == ELEM_OP_PREMUL)) return gpu_bulk_of(a->coll)(ac, a);
  struct gpu_net* g;
  MPP_CHECK(gpu_net_get(ac, a->stream, &g));
  if (staged_bytes(ac, a) <= stage_bytes(g)) return stage_launch(g, ac, a, NULL);
  const uint32_t* skip = NULL;
  if (!a->captured) MPP_CHECK(stage_probe(g, ac, a, &skip));
  if (sliceable(a->coll) && stage_bytes(g) / a->es >= (uint64_t)ac->nranks * 16)
    return stage_pieces(g, ac, a, skip);
  LOG_DEBUG_(LOG_SUB_ALGO, "%s: %llu bytes exceed the stage (%llu): bulk kernel", algo_coll_name(a->coll),
             (unsigned long long)staged_bytes(ac, a), (unsigned long long)stage_bytes(g));
  return gpu_bulk_skippable(ac, a, skip);
}

#else /* no CUDA */

mscclppResult_t gpu_coll_stage(struct algo_comm* ac, const struct algo_args* a) { return gpu_bulk_of(a->coll)(ac, a); }

#endif
