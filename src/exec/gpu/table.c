/* table.c - op tables (dev.h, struct xg_win): for one call shape - a buffer context, which fixes
 * every rank's buffers and their sizes, hence the per-size layout - and scratch generation, each
 * block's op windows and reference addresses, worked out once on the host with the kernel's own
 * size rules (dev.h). The kernel stages a block's table with its program and reads an op's window
 * and addresses from shared memory, where working them out took chains of dependent loads and
 * divisions at every op (docs/plans.md, Op tables). */
#include "exec/gpu/state.h"

#include <stdlib.h>

#include "plan/plan.h"
#include "util/err.h"

/* Address of reference r's range + s in a call using scratch half `half` (bytes; as the kernel's
 * xk_ptr finds it); 0 for switch references, which switch ops expand themselves. */
static uint64_t ref_addr(const struct xg_table_in* in, const struct plan_ref* r, uint64_t s, int pkt, uint64_t half) {
  if (r->kind == PLAN_REF_SWITCH) return 0;
  int owner = r->kind == PLAN_REF_LOCAL ? in->rank : r->rank;
  const char* base = r->btype == PLAN_BUF_SCR ? (in->scr ? in->scr[owner] : NULL) : in->io[owner * 2 + r->btype];
  uint64_t off = xg_chunk_off(in->x, r->btype, r->index) + s;
  return (uint64_t)(uintptr_t)base + (r->btype == PLAN_BUF_SCR ? half : 0) + (pkt ? 2 * off : off);
}

void xg_table_fill(const struct xg_table_in* in, const struct plan_block* bl, char* out) {
  struct xg_win* win = (struct xg_win*)out;
  uint32_t nested = 0; /* ops still to come of the pipeline being filled */
  for (uint32_t i = 0; i < bl->nops; i++) {
    const struct plan_op* op = &bl->ops[i];
    uint64_t len = xg_op_len(in->x, &bl->refs[op->first_ref], op->nsrc + op->ndst), s = 0, n = len;
    if (op->code == PLAN_OP_PIPELINE)
      n = xg_pipe_iters(in->x, op), nested = op->nested + 1;
    else if (nested == 0)
      xg_window(len, 0, 0, op->tbg_id, op->tbg_size, in->align, &s, &n);
    if (nested) nested--;
    win[i] = (struct xg_win){.s = s, .n = n};
    for (int h = 0; h < in->halves; h++) {
      uint64_t* ptr = (uint64_t*)(out + xg_tab_ptrs(bl->nops, bl->nrefs, (uint32_t)h));
      for (int j = 0; j < op->nsrc + op->ndst; j++)
        ptr[op->first_ref + j] = ref_addr(in, &bl->refs[op->first_ref + j], s, xg_ref_pkt(op->code, j, op->nsrc),
                                          (uint64_t)h * in->x->scr_stride);
    }
  }
}

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>

mscclppResult_t xg_table_make(const struct xg_state* st, const struct xg_image* img, const struct mscclppPlan* plan,
                              const struct plan_layout* l, const struct xg_ctx* ctx, char** out) {
  *out = NULL;
  const struct plan_rank* pr = &plan->ranks[st->rank];
  size_t stride = img->p.tab_stride, bytes = (size_t)pr->nblocks * stride;
  char* h = calloc(1, bytes ? bytes : 1);
  if (!h) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory for %s's op tables", plan->file);
  struct xg_layout x;
  xg_layout_of(l, &x);
  struct xg_table_in in = {.rank = st->rank, .io = ctx->host, .scr = st->scr_host, .x = &x, .align = img->p.align,
                           .halves = plan->double_scratch ? 2 : 1};
  for (int b = 0; b < pr->nblocks; b++) xg_table_fill(&in, &pr->blocks[b], h + (size_t)b * stride);
  mscclppResult_t res = xg_dev_alloc((void**)out, bytes, "op tables");
  if (res == mscclppSuccess) res = xg_upload(*out, h, bytes);
  free(h);
  if (res != mscclppSuccess && *out) {
    cudaFree(*out);
    *out = NULL;
  }
  return res;
}

#endif /* MSCCLPP_HAVE_CUDA */
