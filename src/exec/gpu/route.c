/* route.c - what the host works out once per plan for the kernel: sizes, each channel reference's
 * slot, each port put's route (the plan-local port channel it goes through and the buffer types
 * at both ends, which pick the port), and the per-size checks the kernel would otherwise have to
 * fail on mid-call. */
#include "exec/gpu/image.h"

#if MSCCLPP_HAVE_CUDA
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static int is_switch_op(int c) {
  return c == PLAN_OP_GLRE || c == PLAN_OP_GLRES || c == PLAN_OP_GSTORE || c == PLAN_OP_GSTOREPKT;
}

static int is_reduce_op(int c) {
  return c == PLAN_OP_RE || c == PLAN_OP_RES || c == PLAN_OP_RRE || c == PLAN_OP_RRES || c == PLAN_OP_REPKT ||
         c == PLAN_OP_RESPKT || c == PLAN_OP_RECPKT || c == PLAN_OP_RECSPKT || c == PLAN_OP_GLRE || c == PLAN_OP_GLRES;
}

/* Buffer pointers op needs at once (a switch reference stands for every member of its group). */
static uint32_t op_ptrs(const struct plan_rank* pr, const struct plan_block* bl, const struct plan_op* op) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < (uint32_t)op->nsrc + op->ndst; i++) {
    const struct plan_ref* r = &bl->refs[op->first_ref + i];
    n += r->kind == PLAN_REF_SWITCH && is_switch_op(op->code) ? (uint32_t)pr->sw[r->sw].nranks : 1u;
  }
  return n;
}

mscclppResult_t xg_count(const struct mscclppPlan* plan, int rank, struct xg_counts* n) {
  const struct plan_rank* pr = &plan->ranks[rank];
  memset(n, 0, sizeof(*n));
  n->nblocks = pr->nblocks, n->nswitch = pr->nswitch, n->nbarriers = pr->nbarriers, n->nsems = pr->nsems;
  n->maxptrs = 1;
  for (int i = 0; i < pr->nswitch; i++) n->sw_members += (size_t)pr->sw[i].nranks;
  for (int b = 0; b < pr->nblocks; b++) {
    const struct plan_block* bl = &pr->blocks[b];
    n->ops += bl->nops, n->refs += bl->nrefs, n->chans += bl->nchans;
    for (uint32_t i = 0; i < bl->nops; i++) {
      uint32_t k = op_ptrs(pr, bl, &bl->ops[i]);
      if (k > XG_MAX_PTRS)
        return MPP_ERR(mscclppInvalidUsage, "%s: gpu %d threadblock %d op %u (%s) touches %u buffers at once; the GPU "
                       "executor takes at most %d per op", plan->file, rank, b, i, plan_op_name(bl->ops[i].code), k,
                       XG_MAX_PTRS);
      if (k > n->maxptrs) n->maxptrs = k;
    }
  }
  return mscclppSuccess;
}

/* The plan-local index of port-channel slot `slot` (added on first use). */
static int pch_index(struct xg_routes* rt, int32_t slot) {
  for (int i = 0; i < rt->npch; i++)
    if (rt->pch_slot[i] == slot) return i;
  rt->pch_slot[rt->npch] = slot;
  rt->pch_need[rt->npch] = 0;
  return rt->npch++;
}

/* The channel (index in the op's list) a port put to destination d (of the op's dsts, on rank
 * `owner`) goes through: channel d when the op pairs them (flag), else the first to that rank. */
static int pick_chan(const struct plan_block* bl, const struct plan_op* op, int d, int owner, int paired) {
  const struct plan_chanref* c = &bl->chans[op->first_chan];
  int remote_first = op->code == PLAN_OP_RES || op->code == PLAN_OP_RRES; /* dst 0 is local */
  int k = d - remote_first;
  if (paired && k >= 0 && k < op->nchan && c[k].peer == owner) return k;
  for (int i = 0; i < op->nchan; i++)
    if (c[i].peer == owner) return i;
  return -1;
}

/* 1 when an op's destination d goes through channel d for every d (one trigger per put). */
static int paired(const struct plan_block* bl, const struct plan_op* op) {
  if (op->code != PLAN_OP_PUT && op->code != PLAN_OP_PWS && op->code != PLAN_OP_PWSF) return 0;
  if (op->nchan != op->ndst) return 0;
  for (int d = 0; d < op->ndst; d++)
    if (bl->chans[op->first_chan + d].peer != bl->refs[op->first_ref + op->nsrc + d].rank) return 0;
  return 1;
}

/* Routes of one port op's remote destinations (refs route[] from the block's first ref). */
static mscclppResult_t op_routes(const struct xg_state* st, const struct mscclppPlan* plan, int b, uint32_t i,
                                 const struct plan_block* bl, struct xg_routes* rt, int32_t* route, const int32_t* slot) {
  const struct plan_op* op = &bl->ops[i];
  int pr = paired(bl, op);
  for (int d = 0; d < op->ndst; d++) {
    const struct plan_ref* r = &bl->refs[op->first_ref + op->nsrc + d];
    if (r->kind != PLAN_REF_REMOTE) continue;
    int c = pick_chan(bl, op, d, r->rank, pr);
    if (c < 0)
      return MPP_ERR(mscclppInvalidUsage, "%s: gpu %d threadblock %d op %u (%s): destination %d is rank %d's buffer, but "
                     "none of the op's port channels goes to rank %d", plan->file, st->rank, b, i,
                     plan_op_name(op->code), d, r->rank, r->rank);
    int src_type = op->code == PLAN_OP_RES || op->code == PLAN_OP_RRES ? bl->refs[op->first_ref + op->nsrc].btype
                   : bl->refs[op->first_ref + (op->nsrc == op->ndst ? d : 0)].btype;
    int p = pch_index(rt, slot[op->first_chan + c]);
    int kind = r->btype * 3 + src_type;
    rt->pch_need[p] |= (uint16_t)(1u << kind);
    route[op->first_ref + op->nsrc + d] = p * 9 + kind;
  }
  return mscclppSuccess;
}

/* Slots of one block's channel references. */
static mscclppResult_t block_slots(const struct xg_state* st, const struct mscclppPlan* plan, int b,
                                   const struct plan_block* bl, int32_t* slot) {
  for (uint32_t i = 0; i < bl->nops; i++) {
    const struct plan_op* op = &bl->ops[i];
    for (int c = 0; c < op->nchan; c++) {
      const struct plan_chanref* ch = &bl->chans[op->first_chan + c];
      int32_t s = -1;
      if (op->chan_type == PLAN_CH_MEMORY) s = st->mem_slot[ch->peer * XG_MAX_ORD + ch->ord];
      if (op->chan_type == PLAN_CH_PORT) s = st->port_slot[ch->peer * XG_MAX_ORD + ch->ord];
      if ((op->chan_type == PLAN_CH_MEMORY || op->chan_type == PLAN_CH_PORT) && s < 0)
        return MPP_ERR(mscclppInternalError, "%s: gpu %d threadblock %d op %u: channel to rank %d (ordinal %d) was not made",
                       plan->file, st->rank, b, i, ch->peer, ch->ord);
      slot[op->first_chan + c] = s;
    }
  }
  return mscclppSuccess;
}

static mscclppResult_t routes_fill(const struct xg_state* st, const struct mscclppPlan* plan, struct xg_routes* rt) {
  const struct plan_rank* pr = &plan->ranks[st->rank];
  size_t op0 = 0, ref0 = 0, ch0 = 0;
  for (int b = 0; b < pr->nblocks; b++) {
    const struct plan_block* bl = &pr->blocks[b];
    int32_t *slot = rt->slot + ch0, *route = rt->route + ref0;
    MPP_CHECK(block_slots(st, plan, b, bl, slot));
    for (uint32_t i = 0; i < bl->nops; i++) {
      const struct plan_op* op = &bl->ops[i];
      rt->op_flags[op0 + i] = paired(bl, op) ? XG_OP_PAIRED : 0;
      int put = op->code == PLAN_OP_PUT || op->code == PLAN_OP_PWS || op->code == PLAN_OP_PWSF ||
                op->code == PLAN_OP_RES || op->code == PLAN_OP_RRES || op->code == PLAN_OP_RPPKT;
      if (op->chan_type == PLAN_CH_PORT && put) MPP_CHECK(op_routes(st, plan, b, i, bl, rt, route, slot));
    }
    op0 += bl->nops, ref0 += bl->nrefs, ch0 += bl->nchans;
  }
  return mscclppSuccess;
}

mscclppResult_t xg_routes_make(const struct xg_state* st, const struct mscclppPlan* plan, const struct xg_counts* n,
                               struct xg_routes* rt) {
  memset(rt, 0, sizeof(*rt));
  rt->slot = malloc((n->chans + 1) * sizeof(int32_t));
  rt->route = malloc((n->refs + 1) * sizeof(int32_t));
  rt->op_flags = calloc(n->ops + 1, 1);
  rt->pch_slot = malloc((n->chans + 1) * sizeof(int32_t));
  rt->pch_need = calloc(n->chans + 1, sizeof(uint16_t));
  mscclppResult_t res = mscclppSuccess;
  if (!rt->slot || !rt->route || !rt->op_flags || !rt->pch_slot || !rt->pch_need)
    res = MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
  for (size_t i = 0; res == mscclppSuccess && i < n->refs; i++) rt->route[i] = -1;
  if (res == mscclppSuccess) res = routes_fill(st, plan, rt);
  if (res != mscclppSuccess) {
    free(rt->slot), free(rt->route), free(rt->op_flags), free(rt->pch_slot), free(rt->pch_need);
    memset(rt, 0, sizeof(*rt));
  }
  return res;
}

/* ---- per-size checks ------------------------------------------------------------------------- */

/* One op (index i, nested in a pipeline of unit u and iters iterations when u != 0). */
static mscclppResult_t check_op(const struct mscclppPlan* plan, int rank, int b, uint32_t i, const struct plan_block* bl,
                                const struct xg_layout* x, uint64_t u, uint64_t iters, uint64_t esize) {
  const struct plan_op* op = &bl->ops[i];
  uint64_t len = xg_op_len(x, &bl->refs[op->first_ref], op->nsrc + op->ndst), s, n;
  uint64_t align = plan->align < 8 ? 8 : plan->align;
  if (u && len > iters * u)
    return MPP_ERR(mscclppInvalidUsage, "%s: rank %d block %d op %u (%s): moves %llu bytes but its pipeline covers %llu x %llu",
                   plan->file, rank, b, i, plan_op_name(op->code), (unsigned long long)len, (unsigned long long)iters,
                   (unsigned long long)u);
  if (!is_reduce_op(op->code)) return mscclppSuccess;
  uint64_t its[2] = {0, u && len ? (len - 1) / u : 0}; /* every full iteration is like the first */
  for (int k = 0; k < 2; k++) {
    xg_window(len, its[k], u, op->tbg_id, op->tbg_size, align, &s, &n);
    if (n % esize)
      return MPP_ERR(mscclppInvalidUsage, "%s: rank %d block %d op %u (%s): reduces %llu bytes, not a whole number of "
                     "%llu-byte elements", plan->file, rank, b, i, plan_op_name(op->code), (unsigned long long)n,
                     (unsigned long long)esize);
  }
  return mscclppSuccess;
}

/* Every rank's ops (so that every rank refuses the same sizes, before any collective step). */
static mscclppResult_t check_all(const struct mscclppPlan* plan, const struct xg_layout* x, uint64_t esize) {
  for (int r = 0; r < plan->nranks; r++)
    for (int b = 0; b < plan->ranks[r].nblocks; b++) {
      const struct plan_block* bl = &plan->ranks[r].blocks[b];
      for (uint32_t i = 0; i < bl->nops; i++) {
        const struct plan_op* op = &bl->ops[i];
        if (op->code != PLAN_OP_PIPELINE) {
          MPP_CHECK(check_op(plan, r, b, i, bl, x, 0, 1, esize));
          continue;
        }
        uint64_t iters = xg_pipe_iters(x, op);
        for (uint32_t j = 1; j <= op->nested; j++) MPP_CHECK(check_op(plan, r, b, i + j, bl, x, op->unit_size, iters, esize));
        i += op->nested;
      }
    }
  return mscclppSuccess;
}

mscclppResult_t xg_image_check_sizes(struct xg_image* img, const struct mscclppPlan* plan, const struct plan_layout* l,
                                     uint64_t esize) {
  for (int i = 0; i < img->nsizes; i++)
    if (img->sizes_ok[i].in == l->in_bytes && img->sizes_ok[i].out == l->out_bytes && img->sizes_ok[i].esize == esize)
      return mscclppSuccess;
  struct xg_layout x;
  xg_layout_of(l, &x);
  MPP_CHECK(check_all(plan, &x, esize));
  int at = img->nsizes < XG_SIZE_CACHE ? img->nsizes++ : (int)(l->in_bytes % XG_SIZE_CACHE);
  img->sizes_ok[at].in = l->in_bytes, img->sizes_ok[at].out = l->out_bytes, img->sizes_ok[at].esize = esize;
  return mscclppSuccess;
}

#endif /* MSCCLPP_HAVE_CUDA */
