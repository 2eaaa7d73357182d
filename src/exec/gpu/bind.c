/* bind.c - the ports a plan's port puts use with one set of buffers: a port of the proxy names a
 * semaphore (the port channel), the destination memory (the peer's registration holding its
 * input, output or scratch) and the source memory (this rank's), so each (port channel, dst type,
 * src type) the plan uses (route.c) needs a port per buffer context and scratch generation. The
 * ports themselves are shared (chans.c finds them again by memory); the table of their ids is
 * uploaded once per (image, context, scratch generation) and kept with the image, beside the op
 * tables of the same key (table.c). */
#include "exec/gpu/state.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static const char* const type_name[3] = {"input", "output", "scratch"};

/* The registration of rank q's buffer of type t in this call. */
static mscclppRegMem_t mem_of(const struct xg_state* st, const struct xg_ctx* ctx, int q, int t) {
  if (t == PLAN_BUF_SCR) return q == st->rank ? st->scr_reg : st->scr_peer[q];
  return ctx->mem[q * 2 + t];
}

/* Fills table[p * 9 + kind] for every port the image needs. */
static mscclppResult_t make_ports(struct xg_state* st, const struct xg_image* img, const struct xg_ctx* ctx,
                                  uint32_t* table) {
  for (int p = 0; p < img->npch; p++) {
    int slot = img->pch_slot[p], peer = st->pch_host[slot].sem.wait.peer;
    for (int kind = 0; kind < 9; kind++) {
      if (!(img->pch_need[p] & (1u << kind))) continue;
      mscclppRegMem_t dst = mem_of(st, ctx, peer, kind / 3), src = mem_of(st, ctx, st->rank, kind % 3);
      if (!dst || !src)
        return MPP_ERR(mscclppInvalidUsage, "%s: a port put from this rank's (%d) %s to rank %d's %s, but the call has no "
                       "such buffer (0 bytes)", img->file, st->rank, type_name[kind % 3], peer, type_name[kind / 3]);
      MPP_CHECK(xg_port_get(st, slot, dst, src, &table[p * 9 + kind]));
    }
  }
  return mscclppSuccess;
}

/* A new entry's port ids (when the image has port puts) and op tables (when it stages them). */
static mscclppResult_t make(struct xg_state* st, const struct xg_image* img, const struct mscclppPlan* plan,
                            const struct plan_layout* l, const struct xg_ctx* ctx, struct xg_bind* b) {
  *b = (struct xg_bind){.ctx = ctx, .scr_gen = st->scr_gen};
  if (img->p.tab_stride) MPP_CHECK(xg_table_make(st, img, plan, l, ctx, &b->tab));
  if (img->npch == 0) return mscclppSuccess;
  size_t bytes = (size_t)img->npch * 9 * sizeof(uint32_t);
  uint32_t* table = calloc(1, bytes);
  if (!table) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
  mscclppResult_t res = make_ports(st, img, ctx, table);
  if (res == mscclppSuccess) res = xg_dev_alloc((void**)&b->dev, bytes, "port ids");
  if (res == mscclppSuccess) res = xg_upload(b->dev, table, bytes);
  free(table);
  return res;
}

mscclppResult_t xg_bind_get(struct xg_state* st, struct xg_image* img, const struct mscclppPlan* plan,
                            const struct plan_layout* l, const struct xg_ctx* ctx, void* stream,
                            const uint32_t** ports, const char** tab) {
  *ports = NULL, *tab = NULL;
  if (img->npch == 0 && img->p.tab_stride == 0) return mscclppSuccess;
  for (int i = img->nbinds - 1; i >= 0; i--)
    if (img->binds[i].ctx == ctx && img->binds[i].scr_gen == st->scr_gen) {
      *ports = img->binds[i].dev, *tab = img->binds[i].tab;
      return mscclppSuccess;
    }
  (void)stream; /* made during a capture too (exec_gpu_run: relaxed mode, nothing on the stream) */
  if (img->nbinds == img->capbinds) {
    int cap = img->capbinds ? img->capbinds * 2 : 8;
    struct xg_bind* b = realloc(img->binds, (size_t)cap * sizeof(*b));
    if (!b) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
    img->binds = b, img->capbinds = cap;
  }
  struct xg_bind b;
  mscclppResult_t res = make(st, img, plan, l, ctx, &b);
  if (res != mscclppSuccess) {
    if (b.dev) cudaFree(b.dev);
    if (b.tab) cudaFree(b.tab);
    return res;
  }
  img->binds[img->nbinds++] = b;
  *ports = b.dev, *tab = b.tab;
  return mscclppSuccess;
}

void xg_bind_free(struct xg_image* img) {
  for (int i = 0; i < img->nbinds; i++) {
    if (img->binds[i].dev) cudaFree(img->binds[i].dev);
    if (img->binds[i].tab) cudaFree(img->binds[i].tab);
  }
  free(img->binds);
  img->binds = NULL, img->nbinds = img->capbinds = 0;
}

#endif /* MSCCLPP_HAVE_CUDA */
