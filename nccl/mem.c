/* mem.c - ncclMemAlloc/Free (memory peers can map: cuMem on a GPU, shareable host memory on a
 * machine without one) and buffer / window registration handles. */
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

#define SHIM_REG_LOCAL (-1) /* flags of an ncclCommRegister registration (window flags are >= 0) */

/* A registration: the range. The communicator lists its live ones, so a handle is checked by
 * looking it up there, never by reading through it (it may have been freed). */
struct shim_reg {
  void* buff;
  size_t size;
  int flags;
  mscclppWindow_t win;    /* symmetric windows: the library's window (its zero-copy algorithms use it) */
  mscclppBufferReg_t reg; /* ncclCommRegister: the library's registration (large eager calls go zero copy) */
};

/* Adds g to comm's list (1), or 0 when out of memory. */
static int reg_list_add(ncclComm_t comm, struct shim_reg* g) {
  pthread_mutex_lock(&comm->lock);
  int ok = 1;
  if (comm->nregs == comm->capregs) {
    size_t n = comm->capregs ? comm->capregs * 2 : 8;
    void** q = realloc(comm->regs, n * sizeof(*q));
    if (q) comm->regs = q, comm->capregs = n;
    else ok = 0;
  }
  if (ok) comm->regs[comm->nregs++] = g;
  pthread_mutex_unlock(&comm->lock);
  return ok;
}

/* Removes handle from comm's list; 1 when it was there. */
static int reg_list_remove(ncclComm_t comm, void* handle) {
  pthread_mutex_lock(&comm->lock);
  int found = 0;
  for (size_t i = 0; i < comm->nregs && !found; i++)
    if (comm->regs[i] == handle) comm->regs[i] = comm->regs[--comm->nregs], found = 1;
  pthread_mutex_unlock(&comm->lock);
  return found;
}

static ncclResult_t reg_make(ncclComm_t comm, void* buff, size_t size, int flags, const char* call, void** out) {
  ncclResult_t res = shim_ready(comm, call);
  if (res != ncclSuccess) return res;
  if (!out || !buff || size == 0)
    return shim_fail(comm, ncclInvalidArgument, "%s: buffer %p of %zu bytes, handle at %p", call, buff, size, (void*)out);
  struct shim_reg* g = malloc(sizeof(*g));
  if (!g) return shim_fail(comm, ncclSystemError, "%s: out of memory", call);
  *g = (struct shim_reg){buff, size, flags, NULL, NULL};
  if (!reg_list_add(comm, g)) {
    free(g);
    return shim_fail(comm, ncclSystemError, "%s: out of memory", call);
  }
  /* The library's window: collective, so inside a group it waits for ncclGroupEnd (several ranks of
   * one thread register together there), and it fails on every rank alike. */
  if (flags != SHIM_REG_LOCAL && (flags & NCCL_WIN_COLL_SYMMETRIC)) {
    struct shim_op op = {.kind = SHIM_WINDOW, .call = call, .send = buff, .recv = &g->win, .count = size, .comm = comm};
    res = shim_submit(&op);
  } else if (flags == SHIM_REG_LOCAL) {
    res = shim_fail_lib(comm, mscclppCommBufferRegister(comm->c, buff, size, &g->reg), call);
  }
  if (res != ncclSuccess) {
    reg_list_remove(comm, g);
    free(g);
    return res;
  }
  *out = g;
  return ncclSuccess;
}

static ncclResult_t reg_free(ncclComm_t comm, void* handle, const char* call) {
  ncclResult_t res = shim_ready(comm, call);
  if (res != ncclSuccess) return res;
  if (!handle || !reg_list_remove(comm, handle))
    return shim_fail(comm, ncclInvalidArgument, "%s: %p is not a registration of this communicator", call, handle);
  struct shim_reg* g = handle;
  if (g->win) res = shim_fail_lib(comm, mscclppCommWindowDeregister(comm->c, g->win), call);
  if (g->reg) res = shim_fail_lib(comm, mscclppCommBufferDeregister(comm->c, g->reg), call);
  free(g);
  return res;
}

void shim_regs_free(ncclComm_t comm) {
  for (size_t i = 0; i < comm->nregs; i++) free(comm->regs[i]);
  free(comm->regs);
  comm->regs = NULL, comm->nregs = comm->capregs = 0;
}

/* Registration records the range for the communicator. Windows registered with
 * NCCL_WIN_COLL_SYMMETRIC are the library's windows too: collectives whose buffers lie in them take
 * the zero-copy algorithms also in eager calls (mscclppCommWindowRegister). Buffers of
 * ncclCommRegister are the library's registrations (mscclppCommBufferRegister): eager calls of at
 * least MSCCLPP_REGISTERED_ZC_MIN bytes on them take the zero-copy algorithms, with an exchange of
 * the buffers per call (docs/nccl.md). */
NCCL_API(ncclResult_t, CommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  ncclResult_t real_res;
  if (!shim_live(comm) && shim_fallback_register(comm, buff, size, handle, &real_res)) return real_res;
  return reg_make(comm, buff, size, SHIM_REG_LOCAL, "ncclCommRegister", handle);
}

NCCL_API(ncclResult_t, CommDeregister, const ncclComm_t comm, void* handle) {
  ncclResult_t real_res;
  if (!shim_live(comm) && shim_fallback_deregister(comm, handle, 0, &real_res)) return real_res;
  return reg_free(comm, handle, "ncclCommDeregister");
}

NCCL_API(ncclResult_t, CommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  if (winFlags & ~NCCL_WIN_COLL_SYMMETRIC)
    return shim_fail(shim_live(comm) ? comm : NULL, ncclInvalidArgument, "ncclCommWindowRegister: flags 0x%x", winFlags);
  return reg_make(comm, buff, size, winFlags, "ncclCommWindowRegister", (void**)win);
}

NCCL_API(ncclResult_t, CommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  ncclResult_t real_res;
  if (!shim_live(comm) && shim_fallback_deregister(comm, win, 1, &real_res)) return real_res;
  return reg_free(comm, win, "ncclCommWindowDeregister");
}
