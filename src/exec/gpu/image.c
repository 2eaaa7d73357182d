/* image.c - a plan's device image for this rank: per block, one program segment (dev.h) with its
 * lowered ops, references and channel references (plan.h) and what the kernel needs resolved on
 * the host (route.c): each channel reference's slot, each port put's route; the switch groups;
 * and the plan's device state (barrier words, semaphores, the finished-block count). Made on the
 * plan's first call on the communicator (connecting the channels it needs), possibly while the
 * stream is captured; looked up among the last XG_MAX_IMAGES plans, older ones retired but kept
 * until teardown (kernels and graphs captured earlier may still use them). */
#include "exec/gpu/image.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "exec/gpu/launch.h"
#include "util/err.h"

/* Byte offsets of the arrays inside the image's one allocation (each 16-aligned). */
struct layout_off {
  size_t prog, pch, sw_ranks, sw_off, sw_n, bar_count, bar_round, sems, sem_init, done, total;
};

static size_t take(size_t* at, size_t bytes) {
  size_t o = *at;
  *at += (bytes + 15) / 16 * 16;
  return o;
}

/* The segment stride: the largest block's program (dev.h). */
static uint32_t seg_stride(const struct plan_rank* pr) {
  uint32_t most = 0;
  for (int b = 0; b < pr->nblocks; b++) {
    struct xg_seg sg;
    xg_seg_layout(pr->blocks[b].nops, pr->blocks[b].nrefs, pr->blocks[b].nchans, &sg);
    if (sg.bytes > most) most = sg.bytes;
  }
  return most;
}

static void plan_offsets(const struct plan_rank* pr, const struct xg_counts* n, int npch, struct layout_off* o) {
  size_t at = 0;
  o->prog = take(&at, (size_t)pr->nblocks * seg_stride(pr));
  o->pch = take(&at, (size_t)npch * sizeof(int32_t));
  o->sw_ranks = take(&at, n->sw_members * sizeof(int32_t));
  o->sw_off = take(&at, (size_t)n->nswitch * sizeof(int32_t));
  o->sw_n = take(&at, (size_t)n->nswitch * sizeof(int32_t));
  o->bar_count = take(&at, (size_t)n->nbarriers * sizeof(uint64_t));
  o->bar_round = take(&at, (size_t)n->nbarriers * sizeof(uint64_t));
  o->sems = take(&at, (size_t)n->nsems * sizeof(uint64_t));
  o->sem_init = take(&at, (size_t)n->nsems * sizeof(int64_t));
  o->done = take(&at, sizeof(uint32_t));
  o->total = at;
}

/* Block bl's program segment at seg (laid out as xg_seg_layout); op, ref, ch: the block's first
 * op, reference and channel reference in the rank-wide arrays of rt. */
static void stage_block(const struct plan_block* bl, const struct xg_routes* rt, uint32_t op, uint32_t ref, uint32_t ch,
                        char* seg) {
  struct xg_seg sg;
  xg_seg_layout(bl->nops, bl->nrefs, bl->nchans, &sg);
  *(struct xg_seg_head*)seg = (struct xg_seg_head){.nops = bl->nops, .nrefs = bl->nrefs, .nchans = bl->nchans};
  if (bl->nops) memcpy(seg + sg.ops, bl->ops, bl->nops * sizeof(struct plan_op));
  for (uint32_t i = 0; i < bl->nops; i++) ((struct plan_op*)(seg + sg.ops))[i].pad = rt->op_flags[op + i];
  if (bl->nrefs) {
    memcpy(seg + sg.refs, bl->refs, bl->nrefs * sizeof(struct plan_ref));
    memcpy(seg + sg.routes, rt->route + ref, bl->nrefs * sizeof(int32_t));
  }
  if (bl->nchans) {
    memcpy(seg + sg.chans, bl->chans, bl->nchans * sizeof(struct plan_chanref));
    memcpy(seg + sg.slots, rt->slot + ch, bl->nchans * sizeof(int32_t));
  }
}

/* Copies the plan's arrays into the host staging area h (laid out as o). */
static void stage_plan(const struct plan_rank* pr, const struct xg_routes* rt, const struct layout_off* o, char* h) {
  uint32_t op = 0, ref = 0, ch = 0, stride = seg_stride(pr);
  for (int b = 0; b < pr->nblocks; b++) {
    const struct plan_block* bl = &pr->blocks[b];
    stage_block(bl, rt, op, ref, ch, h + o->prog + (size_t)b * stride);
    op += bl->nops, ref += bl->nrefs, ch += bl->nchans;
  }
  memcpy(h + o->pch, rt->pch_slot, (size_t)rt->npch * sizeof(int32_t));
  int32_t *ranks = (int32_t*)(h + o->sw_ranks), *off = (int32_t*)(h + o->sw_off), *cnt = (int32_t*)(h + o->sw_n);
  int32_t at = 0;
  for (int i = 0; i < pr->nswitch; i++) {
    off[i] = at, cnt[i] = pr->sw[i].nranks;
    for (int g = 0; g < pr->sw[i].nranks; g++) ranks[at++] = pr->sw[i].ranks[g];
  }
  if (pr->nsems > 0) { /* the first call starts from init_value; the last block resets them after each */
    memcpy(h + o->sems, pr->sem_init, (size_t)pr->nsems * sizeof(int64_t));
    memcpy(h + o->sem_init, pr->sem_init, (size_t)pr->nsems * sizeof(int64_t));
  }
}

/* Whether every op of the rank's part may run in the lean kernel (launch.h). */
static int plan_lean(const struct plan_rank* pr) {
  for (int b = 0; b < pr->nblocks; b++)
    for (uint32_t i = 0; i < pr->blocks[b].nops; i++)
      if (!xg_op_lean(&pr->blocks[b].ops[i])) return 0;
  return 1;
}

/* The op table stride: the largest block's (dev.h). */
static uint32_t tab_stride(const struct plan_rank* pr, int halves) {
  uint32_t most = 0;
  for (int b = 0; b < pr->nblocks; b++) {
    uint32_t n = xg_tab_bytes(pr->blocks[b].nops, pr->blocks[b].nrefs, (uint32_t)halves);
    if (n > most) most = n;
  }
  return most;
}

/* The kernel's dynamic shared memory: the op pointers, the call's buffer table, each block's
 * program segment when the largest fits in XG_STAGE_MAX bytes, and then (tables set) its op table
 * when that fits too. */
static void smem_plan(struct xg_image* img, const struct mscclppPlan* plan, const struct plan_rank* pr, int nranks,
                      int tables) {
  struct xg_params* p = &img->p;
  uint32_t ts = tab_stride(pr, plan->double_scratch ? 2 : 1);
  p->seg_stride = seg_stride(pr);
  p->smem_io = xg_a16((uint32_t)img->maxptrs * (uint32_t)sizeof(char*));
  p->smem_prog = p->smem_io + xg_a16(5u * (uint32_t)nranks * (uint32_t)sizeof(char*));
  p->stage = p->seg_stride <= XG_STAGE_MAX;
  p->nranks = nranks;
  p->smem_tab = p->smem_prog + (p->stage ? p->seg_stride : 0);
  p->tab_stride = tables && p->stage && ts <= XG_STAGE_MAX ? ts : 0;
  img->smem = p->smem_tab + p->tab_stride;
}

/* The kernel's parameters that come from the image, pointing into its allocation at d. */
static void image_params(struct xg_image* img, const struct mscclppPlan* plan, const struct plan_rank* pr,
                         const struct layout_off* o, char* d) {
  struct xg_params* p = &img->p;
  p->prog = d + o->prog;
  p->pch_slot = (const int32_t*)(d + o->pch);
  p->sw_ranks = (const int32_t*)(d + o->sw_ranks);
  p->sw_off = (const int32_t*)(d + o->sw_off);
  p->sw_n = (const int32_t*)(d + o->sw_n);
  p->bar_count = (uint64_t*)(d + o->bar_count);
  p->bar_round = (uint64_t*)(d + o->bar_round);
  p->sems = (unsigned long long*)(d + o->sems);
  p->sem_init = (const int64_t*)(d + o->sem_init);
  p->done = (uint32_t*)(d + o->done);
  p->nblocks = pr->nblocks, p->nsems = pr->nsems, p->nbarriers = pr->nbarriers, p->maxptrs = img->maxptrs;
  p->align = plan->align < 8 ? 8 : plan->align;
  p->plan_id = plan->id;
  p->double_scratch = plan->double_scratch;
  p->counted = plan->ll || plan->double_scratch || pr->nsems > 0 || pr->nbarriers > 0;
}

/* Dynamic shared memory above 48 KiB needs the kernel's opt-in, up to what the device allows. */
static mscclppResult_t smem_allow(const struct xg_image* img, const struct mscclppPlan* plan, int rank) {
  if (img->smem <= 48 * 1024) return mscclppSuccess;
  cudaError_t e = (cudaError_t)xg_smem_optin(img->lean, img->smem);
  if (e != cudaSuccess)
    return MPP_ERR(mscclppInvalidUsage, "%s: gpu %d needs %zu bytes of shared memory per block (%d pointers for its "
                   "largest op, %d ranks' buffers); this GPU gives less: %s", plan->file, rank, img->smem, img->maxptrs,
                   img->p.nranks, cudaGetErrorString(e));
  return mscclppSuccess;
}

/* How many of the image's blocks the GPU runs at once: per SM, and SMs. */
static cudaError_t residency(const struct xg_image* img, int dev, int* per_sm, int* sms) {
  *per_sm = 0, *sms = 0;
  cudaError_t e = (cudaError_t)xg_occupancy(img->lean, img->threads, img->smem, per_sm);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
  return e;
}

/* Whether the op tables' shared memory keeps every block resident (they are an optimization:
 * without them the image is built as before). */
static int tables_fit(const struct xg_image* img, int dev) {
  int per_sm = 0, sms = 0;
  if (img->smem > 48 * 1024 && xg_smem_optin(img->lean, img->smem) != 0) {
    (void)cudaGetLastError(); /* the refusal is an answer, not an error for later calls */
    return 0;
  }
  return residency(img, dev, &per_sm, &sms) == cudaSuccess && (long)per_sm * sms >= (long)img->nblocks;
}

/* Every block of the plan must be resident at once (blocks wait for each other). */
static mscclppResult_t check_fits(const struct xg_image* img, const struct mscclppPlan* plan, int rank, int dev) {
  int per_sm = 0, sms = 0;
  cudaError_t e = residency(img, dev, &per_sm, &sms);
  if (e != cudaSuccess)
    return MPP_ERR(mscclppInternalError, "GPU executor: occupancy of the kernel: %s", cudaGetErrorString(e));
  if ((long)per_sm * sms < (long)img->nblocks)
    return MPP_ERR(mscclppInvalidUsage, "%s: gpu %d has %d threadblocks of %d threads; this GPU runs at most %d such "
                   "blocks at once (%d SMs x %d), and every block of a plan must run at the same time",
                   plan->file, rank, img->nblocks, img->threads, per_sm * sms, sms, per_sm);
  return mscclppSuccess;
}

static mscclppResult_t build_mem(struct xg_image* img, const struct mscclppPlan* plan, const struct plan_rank* pr,
                                 const struct xg_counts* n, const struct xg_routes* rt) {
  struct layout_off o;
  plan_offsets(pr, n, rt->npch, &o);
  char* h = calloc(1, o.total);
  if (!h) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory for %s", plan->file);
  stage_plan(pr, rt, &o, h);
  mscclppResult_t res = xg_dev_alloc(&img->mem, o.total, "a plan");
  if (res == mscclppSuccess) res = xg_upload(img->mem, h, o.total);
  free(h);
  if (res == mscclppSuccess) image_params(img, plan, pr, &o, img->mem);
  return res;
}

static void image_free(struct xg_image* img) {
  if (!img) return;
  xg_bind_free(img);
  if (img->mem) cudaFree(img->mem);
  free(img->file), free(img->pch_slot), free(img->pch_need), free(img);
}

/* The threads per block, and the plan's fit to this communicator. */
static mscclppResult_t check_plan(const struct xg_state* st, const struct mscclppPlan* plan) {
  if (plan->nranks != st->nranks)
    return MPP_ERR(mscclppInvalidUsage, "%s: a plan for %d ranks on a communicator of %d", plan->file, plan->nranks,
                   st->nranks);
  if (plan->threads_per_block < 1 || plan->threads_per_block > XG_MAX_THREADS)
    return MPP_ERR(mscclppInvalidUsage, "%s: num_threads_per_block %u; GPU blocks take 1 to %d threads", plan->file,
                   plan->threads_per_block, XG_MAX_THREADS);
  return mscclppSuccess;
}

static mscclppResult_t build(struct xg_state* st, const struct mscclppPlan* plan, struct xg_image* img) {
  const struct plan_rank* pr = &plan->ranks[st->rank];
  MPP_CHECK(check_plan(st, plan));
  mscclppResult_t res = xg_chans_ensure(st, pr);
  if (res != mscclppSuccess) return xg_break(st, res); /* the pairs may be out of step now */
  struct xg_counts n;
  struct xg_routes rt;
  MPP_CHECK(xg_count(plan, st->rank, &n));
  img->nblocks = pr->nblocks, img->threads = (int)plan->threads_per_block, img->maxptrs = (int)n.maxptrs;
  img->lean = plan_lean(pr);
  memset(&img->p, 0, sizeof(img->p));
  smem_plan(img, plan, pr, st->nranks, st->op_tables);
  if (img->p.tab_stride && !tables_fit(img, st->dev)) smem_plan(img, plan, pr, st->nranks, 0);
  MPP_CHECK(smem_allow(img, plan, st->rank));
  MPP_CHECK(check_fits(img, plan, st->rank, st->dev));
  MPP_CHECK(xg_routes_make(st, plan, &n, &rt));
  res = build_mem(img, plan, pr, &n, &rt);
  img->npch = rt.npch, img->pch_slot = rt.pch_slot, img->pch_need = rt.pch_need;
  free(rt.slot), free(rt.route), free(rt.op_flags);
  return res;
}

mscclppResult_t xg_image_get(struct xg_state* st, const struct mscclppPlan* plan, void* stream, struct xg_image** out) {
  for (int i = 0; i < st->nimages; i++)
    if (st->images[i]->plan_id == plan->id) {
      *out = st->images[i];
      return mscclppSuccess;
    }
  (void)stream;
  int at = st->nimages < XG_MAX_IMAGES ? st->nimages : st->next_image;
  if (st->images[at] && st->nretired == st->capretired) { /* room to retire the oldest first */
    int cap = st->capretired ? 2 * st->capretired : 16;
    struct xg_image** r = realloc(st->retired, (size_t)cap * sizeof(*r));
    if (!r) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
    st->retired = r, st->capretired = cap;
  }
  struct xg_image* img = calloc(1, sizeof(*img));
  if (img) img->file = strdup(plan->file);
  if (!img || !img->file) {
    image_free(img);
    return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
  }
  img->plan_id = plan->id;
  mscclppResult_t res = build(st, plan, img);
  if (res != mscclppSuccess) {
    image_free(img);
    return res;
  }
  if (st->nimages < XG_MAX_IMAGES) st->nimages++;
  /* The oldest leaves the lookup but is not freed before teardown: a kernel may still run it, and
   * a graph captured earlier names its memory in every replay. */
  if (st->images[at]) st->retired[st->nretired++] = st->images[at];
  st->images[at] = img;
  st->next_image = (at + 1) % XG_MAX_IMAGES;
  *out = img;
  return mscclppSuccess;
}

void xg_images_fini(struct xg_state* st) {
  for (int i = 0; i < st->nimages; i++) image_free(st->images[i]);
  for (int i = 0; i < st->nretired; i++) image_free(st->retired[i]);
  free(st->retired);
  st->retired = NULL, st->nimages = st->nretired = st->capretired = 0;
}

#endif /* MSCCLPP_HAVE_CUDA */
