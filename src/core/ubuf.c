/* ubuf.c - users' GPU buffers registered for peers and peers' buffers imported (ubuf.h). */
#include "core/ubuf.h"

#include <string.h>

void ubuf_init(struct ubuf_cache* uc, struct mscclppComm* comm, int rank, int dev, const char* who) {
  memset(uc, 0, sizeof(*uc));
  uc->comm = comm, uc->rank = rank, uc->dev = dev, uc->who = who;
}

#if MSCCLPP_HAVE_CUDA
#include <stdlib.h>

#include "core/comm.h"
#include "core/regmem.h"
#include "transport/transport.h"
#include "sys/cudawrap.h"
#include "util/err.h"

/* The driver's id of the allocation holding ptr (0 when it has none to give). */
static uint64_t buffer_id(const void* ptr) {
  unsigned long long id = 0;
  if (!cu_available() || cu.cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)ptr) != CUDA_SUCCESS)
    return 0;
  return (uint64_t)id;
}

static mscclppResult_t grow(const struct ubuf_cache* uc, void** a, int* cap, int need, size_t elem) {
  if (need <= *cap) return mscclppSuccess;
  int n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void* p = realloc(*a, (size_t)n * elem);
  if (!p) return MPP_ERR(mscclppSystemError, "%s: out of host memory", uc->who);
  *a = p, *cap = n;
  return mscclppSuccess;
}

/* A live entry holding [p, p + size) whose allocation is still the same, else NULL (retiring an
 * entry whose allocation was replaced). */
static struct ubuf_reg* find(struct ubuf_cache* uc, const char* p, uint64_t size) {
  for (int i = uc->nregs - 1; i >= 0; i--) {
    struct ubuf_reg* r = &uc->regs[i];
    if (!r->mem || p < r->base || p + size > r->base + r->size) continue;
    if (buffer_id(p) == r->buf_id) return r;
    r->mem = NULL; /* retired: the registration stays open until teardown (regs_fini) */
  }
  return NULL;
}

/* Registers the allocation info describes. */
static mscclppResult_t add(struct ubuf_cache* uc, const struct mem_info* info, struct ubuf_reg** out) {
  MPP_CHECK(grow(uc, (void**)&uc->regs, &uc->capregs, uc->nregs + 1, sizeof(*uc->regs)));
  struct ubuf_reg* r = &uc->regs[uc->nregs];
  memset(r, 0, sizeof(*r));
  r->base = info->base, r->size = info->alloc_size, r->buf_id = buffer_id(info->base), r->id = ++uc->next_id;
  mscclppRegMem_t mem = NULL;
  MPP_CHECK(mscclppRegisterMemory(uc->comm, r->base, r->size, &mem));
  size_t len = sizeof(r->blob);
  mscclppResult_t res = mscclppRegMemSerialize(mem, r->blob, &len);
  if (res != mscclppSuccess) {
    regmem_free(mem);
    return res;
  }
  r->blob_len = (uint32_t)len, r->mem = mem;
  uc->nregs++;
  *out = r;
  return mscclppSuccess;
}

mscclppResult_t ubuf_reg_get(struct ubuf_cache* uc, const void* ptr, uint64_t size, const char* what, struct ubuf_reg** out) {
  struct ubuf_reg* r = find(uc, ptr, size);
  if (r) {
    *out = r;
    return mscclppSuccess;
  }
  struct mem_info info;
  MPP_CHECK(mem_classify(ptr, size, &info));
  if (!mem_kind_is_device(info.kind))
    return MPP_ERR(mscclppInvalidArgument, "%s (rank %d): %s %p is not GPU memory; GPU ranks take cudaMalloc "
                   "or cuMem memory of their device", uc->who, uc->rank, what, ptr);
  if (info.device != uc->dev)
    return MPP_ERR(mscclppInvalidArgument, "%s (rank %d): %s %p is memory of GPU %d, the communicator's is GPU %d",
                   uc->who, uc->rank, what, ptr, info.device, uc->dev);
  return add(uc, &info, out);
}

mscclppResult_t ubuf_import_get(struct ubuf_cache* uc, int peer, uint64_t id, const void* blob, size_t len,
                              struct ubuf_import** out) {
  for (int i = 0; i < uc->nimports; i++)
    if (uc->imports[i].peer == peer && uc->imports[i].id == id) {
      *out = &uc->imports[i];
      return mscclppSuccess;
    }
  MPP_CHECK(grow(uc, (void**)&uc->imports, &uc->capimports, uc->nimports + 1, sizeof(*uc->imports)));
  mscclppRegMem_t mem = NULL;
  void* base = NULL;
  int owner = -1;
  MPP_CHECK(mscclppRegMemDeserialize(uc->comm, blob, len, &mem));
  mscclppResult_t res = mscclppRegMemInfo(mem, &base, NULL, &owner);
  /* a peer of another host is reached through port channels only: its memory is not mapped here */
  int mapped = transport_same_host(&uc->comm->tc, peer);
  if (res == mscclppSuccess && (owner != peer || (base == NULL && mapped)))
    res = MPP_ERR(mscclppInvalidUsage, "%s (rank %d): rank %d's buffer %s", uc->who, uc->rank, peer,
                  owner != peer ? "was described by another rank" : "is not mapped here");
  if (res != mscclppSuccess) {
    regmem_free(mem);
    return res;
  }
  struct ubuf_import* im = &uc->imports[uc->nimports++];
  *im = (struct ubuf_import){.peer = peer, .id = id, .mem = mem, .base = base};
  *out = im;
  return mscclppSuccess;
}

mscclppResult_t ubuf_import_range(struct ubuf_cache* uc, int peer, uint64_t id, const void* blob, size_t blob_len,
                                  uint64_t off, uint64_t len, struct ubuf_import** out) {
  if (blob_len > MSCCLPP_REGMEM_BLOB_BYTES)
    return MPP_ERR(mscclppRemoteError, "%s: malformed buffer message from rank %d", uc->who, peer);
  struct ubuf_import* im = NULL;
  MPP_CHECK(ubuf_import_get(uc, peer, id, blob, blob_len, &im));
  size_t size = 0;
  MPP_CHECK(mscclppRegMemInfo(im->mem, NULL, &size, NULL));
  if (off > size || len > size - off)
    return MPP_ERR(mscclppRemoteError, "%s: rank %d's buffer (%llu bytes at %llu) exceeds its %zu-byte allocation",
                   uc->who, peer, (unsigned long long)len, (unsigned long long)off, size);
  *out = im;
  return mscclppSuccess;
}

void ubuf_fini(struct ubuf_cache* uc) {
  for (int i = 0; i < uc->nimports; i++) regmem_free(uc->imports[i].mem);
  free(uc->imports);
  /* Retired entries lost their handle in find(); the communicator's teardown releases those. */
  for (int i = 0; i < uc->nregs; i++) regmem_free(uc->regs[i].mem);
  free(uc->regs);
}

#else

void ubuf_fini(struct ubuf_cache* uc) { (void)uc; }

#endif /* MSCCLPP_HAVE_CUDA */
