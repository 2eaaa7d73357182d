/* mem.c - ncclMemAlloc/Free (memory peers can map: cuMem on a GPU, shareable host memory on a
 * machine without one) and buffer / window registration handles. */
#include <stdint.h>
#include <stdlib.h>

#include <mscclpp/memory.h>

#include "shim.h"

NCCL_API(ncclResult_t, MemAlloc, void** ptr, size_t size) {
  if (!ptr) return shim_fail(NULL, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = NULL;
  if (size == 0) return shim_fail(NULL, ncclInvalidArgument, "ncclMemAlloc: size 0");
  /* GPU memory; on a machine (or build) without a usable GPU, host memory for CPU ranks: learnt
   * from the first refusal, so that it is logged once per process, not at every call. */
  static _Atomic int no_gpu;
  mscclppResult_t r = mscclppInvalidUsage;
  if (!atomic_load(&no_gpu)) r = mscclppMemAlloc(ptr, size, mscclppMemCuda);
  if (r == mscclppInvalidUsage) {
    atomic_store(&no_gpu, 1);
    r = mscclppMemAlloc(ptr, size, mscclppMemHost);
  }
  return shim_fail_lib(NULL, r, "ncclMemAlloc");
}

NCCL_API(ncclResult_t, MemFree, void* ptr) {
  if (!ptr) return ncclSuccess;
  return shim_fail_lib(NULL, mscclppMemFree(ptr), "ncclMemFree");
}

/* A registration: the range and the communicator it was made with. */
#define REG_MAGIC 0x52454731u
struct shim_reg {
  uint32_t magic;
  ncclComm_t comm;
  void* buff;
  size_t size;
  int flags;
};

static ncclResult_t reg_make(ncclComm_t comm, void* buff, size_t size, int flags, const char* call, void** out) {
  ncclResult_t res = shim_ready(comm, call);
  if (res != ncclSuccess) return res;
  if (!out || !buff || size == 0)
    return shim_fail(comm, ncclInvalidArgument, "%s: buffer %p of %zu bytes, handle at %p", call, buff, size, (void*)out);
  struct shim_reg* g = malloc(sizeof(*g));
  if (!g) return shim_fail(comm, ncclSystemError, "%s: out of memory", call);
  *g = (struct shim_reg){REG_MAGIC, comm, buff, size, flags};
  *out = g;
  return ncclSuccess;
}

static ncclResult_t reg_free(ncclComm_t comm, void* handle, const char* call) {
  ncclResult_t res = shim_ready(comm, call);
  if (res != ncclSuccess) return res;
  struct shim_reg* g = handle;
  if (!g || g->magic != REG_MAGIC || g->comm != comm)
    return shim_fail(comm, ncclInvalidArgument, "%s: %p is not a registration of this communicator", call, handle);
  g->magic = 0;
  free(g);
  return ncclSuccess;
}

/* Registration records the range for the communicator. The built-in algorithms do not yet take
 * registered buffers differently from others (docs/nccl.md). */
NCCL_API(ncclResult_t, CommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return reg_make(comm, buff, size, 0, "ncclCommRegister", handle);
}

NCCL_API(ncclResult_t, CommDeregister, const ncclComm_t comm, void* handle) {
  return reg_free(comm, handle, "ncclCommDeregister");
}

NCCL_API(ncclResult_t, CommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  if (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)
    return shim_fail(shim_live(comm) ? comm : NULL, ncclInvalidArgument, "ncclCommWindowRegister: flags 0x%x", winFlags);
  return reg_make(comm, buff, size, winFlags, "ncclCommWindowRegister", (void**)win);
}

NCCL_API(ncclResult_t, CommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  return reg_free(comm, win, "ncclCommWindowDeregister");
}
