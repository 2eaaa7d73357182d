/* regs.c - the user's buffers as peers reach them: the whole allocation holding a buffer is
 * registered once (later buffers inside it hit the cache by address range), and each peer's
 * allocation is imported once (by the peer's registration id). A cache hit costs one driver call:
 * the allocation's buffer id, which changes when the memory is freed and allocated again at the
 * same address; such an entry is retired (kept, never used again) and the new allocation
 * registered. Registrations and imports live until teardown: ports and captured graphs may still
 * name them. */
#include "exec/gpu/state.h"

#if MSCCLPP_HAVE_CUDA
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/regmem.h"
#include "sys/cudawrap.h"
#include "util/err.h"

/* The driver's id of the allocation holding ptr (0 when it has none to give). */
static uint64_t buffer_id(const void* ptr) {
  unsigned long long id = 0;
  if (!cu_available() || cu.cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)ptr) != CUDA_SUCCESS)
    return 0;
  return (uint64_t)id;
}

static mscclppResult_t grow(void** a, int* cap, int need, size_t elem) {
  if (need <= *cap) return mscclppSuccess;
  int n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void* p = realloc(*a, (size_t)n * elem);
  if (!p) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
  *a = p, *cap = n;
  return mscclppSuccess;
}

/* A live entry holding [p, p + size) whose allocation is still the same, else NULL (retiring an
 * entry whose allocation was replaced). */
static struct xg_reg* find(struct xg_state* st, const char* p, uint64_t size) {
  for (int i = st->nregs - 1; i >= 0; i--) {
    struct xg_reg* r = &st->regs[i];
    if (!r->mem || p < r->base || p + size > r->base + r->size) continue;
    if (buffer_id(p) == r->buf_id) return r;
    r->mem = NULL; /* retired: the registration stays open until teardown (regs_fini) */
  }
  return NULL;
}

/* Registers the allocation info describes. */
static mscclppResult_t add(struct xg_state* st, const struct mem_info* info, struct xg_reg** out) {
  MPP_CHECK(grow((void**)&st->regs, &st->capregs, st->nregs + 1, sizeof(*st->regs)));
  struct xg_reg* r = &st->regs[st->nregs];
  memset(r, 0, sizeof(*r));
  r->base = info->base, r->size = info->alloc_size, r->buf_id = buffer_id(info->base), r->id = ++st->next_id;
  mscclppRegMem_t mem = NULL;
  MPP_CHECK(mscclppRegisterMemory(st->comm, r->base, r->size, &mem));
  size_t len = sizeof(r->blob);
  mscclppResult_t res = mscclppRegMemSerialize(mem, r->blob, &len);
  if (res != mscclppSuccess) {
    regmem_free(mem);
    return res;
  }
  r->blob_len = (uint32_t)len, r->mem = mem;
  st->nregs++;
  *out = r;
  return mscclppSuccess;
}

mscclppResult_t xg_reg_get(struct xg_state* st, const void* ptr, uint64_t size, const char* what, struct xg_reg** out) {
  struct xg_reg* r = find(st, ptr, size);
  if (r) {
    *out = r;
    return mscclppSuccess;
  }
  struct mem_info info;
  MPP_CHECK(mem_classify(ptr, size, &info));
  if (!mem_kind_is_device(info.kind))
    return MPP_ERR(mscclppInvalidArgument, "GPU executor (rank %d): %s %p is not GPU memory; GPU ranks take cudaMalloc "
                   "or cuMem memory of their device", st->rank, what, ptr);
  if (info.device != st->dev)
    return MPP_ERR(mscclppInvalidArgument, "GPU executor (rank %d): %s %p is memory of GPU %d, the communicator's is GPU %d",
                   st->rank, what, ptr, info.device, st->dev);
  return add(st, &info, out);
}

mscclppResult_t xg_import_get(struct xg_state* st, int peer, uint64_t id, const void* blob, size_t len,
                              struct xg_import** out) {
  for (int i = 0; i < st->nimports; i++)
    if (st->imports[i].peer == peer && st->imports[i].id == id) {
      *out = &st->imports[i];
      return mscclppSuccess;
    }
  MPP_CHECK(grow((void**)&st->imports, &st->capimports, st->nimports + 1, sizeof(*st->imports)));
  mscclppRegMem_t mem = NULL;
  void* base = NULL;
  int owner = -1;
  MPP_CHECK(mscclppRegMemDeserialize(st->comm, blob, len, &mem));
  mscclppResult_t res = mscclppRegMemInfo(mem, &base, NULL, &owner);
  if (res == mscclppSuccess && (owner != peer || base == NULL))
    res = MPP_ERR(mscclppInvalidUsage, "GPU executor (rank %d): rank %d's buffer %s", st->rank, peer,
                  owner != peer ? "was described by another rank" : "is not mapped here (GPU ranks of one host only)");
  if (res != mscclppSuccess) {
    regmem_free(mem);
    return res;
  }
  struct xg_import* im = &st->imports[st->nimports++];
  *im = (struct xg_import){.peer = peer, .id = id, .mem = mem, .base = base};
  *out = im;
  return mscclppSuccess;
}

void xg_regs_fini(struct xg_state* st) {
  for (int i = 0; i < st->nimports; i++) regmem_free(st->imports[i].mem);
  free(st->imports);
  /* Retired entries lost their handle in find(); the communicator's teardown releases those. */
  for (int i = 0; i < st->nregs; i++) regmem_free(st->regs[i].mem);
  free(st->regs);
}

#endif /* MSCCLPP_HAVE_CUDA */
