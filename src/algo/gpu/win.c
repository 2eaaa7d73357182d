/* win.c - a window's peers mapped on a GPU rank (mscclppCommWindowRegister, algo/window.c): the
 * allocation holding this rank's buffer is registered (core/ubuf.c) and described to every peer,
 * each peer's is imported, and the window keeps where each rank's buffer lies here. The mappings
 * live as long as the communicator's GPU state (captured graphs may name them). */
#include <string.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "bootstrap/bootstrap.h"
#include "channel/ext.h"
#include "core/comm.h"
#include "util/err.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>

#define WIN_MAGIC 0x4e495747u /* "GWIN" */
#define WIN_TAG 3             /* under BOOT_TAG_ALGO (2: zc.c's per-call exchange) */

struct win_hello {
  uint32_t magic, ok; /* ok 0: this rank could not register its buffer */
  uint64_t id, off, len, blob_len;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

static mscclppResult_t describe(struct gpu_net* g, const struct algo_win* w, struct win_hello* h) {
  memset(h, 0, sizeof(*h));
  h->magic = WIN_MAGIC;
  struct ubuf_reg* reg = NULL;
  MPP_CHECK(ubuf_reg_get(&g->ub, w->base, w->size, "window", &reg));
  h->id = reg->id, h->off = (uint64_t)(w->base - reg->base), h->len = w->size, h->blob_len = reg->blob_len;
  memcpy(h->blob, reg->blob, reg->blob_len);
  h->ok = 1;
  return mscclppSuccess;
}

static mscclppResult_t accept(struct gpu_net* g, int q, const struct win_hello* th, struct algo_win* w) {
  if (th->magic != WIN_MAGIC) return MPP_ERR(mscclppRemoteError, "mscclppCommWindowRegister: malformed message from rank %d", q);
  if (!th->ok) return MPP_ERR(mscclppRemoteError, "mscclppCommWindowRegister: rank %d could not register its buffer", q);
  struct ubuf_import* im = NULL;
  MPP_CHECK(ubuf_import_range(&g->ub, q, th->id, th->blob, th->blob_len, th->off, th->len, &im));
  w->peer[q] = im->base + th->off;
  return mscclppSuccess;
}

mscclppResult_t gpu_win_map(struct algo_comm* ac, struct algo_win* w) {
  struct gpu_net* g = NULL;
  MPP_CHECK(gpu_net_get(ac, NULL, &g));
  int prev = ext_dev_enter(g->dev);
  struct win_hello mine;
  mscclppResult_t res = describe(g, w, &mine);
  w->peer[ac->rank] = w->base;
  /* Every peer gets this rank's message, also after a failure, so that nobody waits for it. */
  for (int q = 0; q < ac->nranks; q++) {
    if (q == ac->rank) continue;
    struct win_hello th;
    mscclppResult_t r = bootstrap_swap(ac->comm->boot, q, boot_tag(BOOT_TAG_ALGO, WIN_TAG), &mine, &th, sizeof(th));
    if (r == mscclppSuccess && res == mscclppSuccess) r = accept(g, q, &th, w);
    if (res == mscclppSuccess) res = r;
  }
  ext_dev_leave(prev, g->dev);
  return res;
}

#else /* CPU-only build: there are no GPU ranks */

mscclppResult_t gpu_win_map(struct algo_comm* ac, struct algo_win* w) {
  (void)ac, (void)w;
  return MPP_ERR(mscclppInvalidUsage, "mscclppCommWindowRegister: this library was built without CUDA");
}

#endif
