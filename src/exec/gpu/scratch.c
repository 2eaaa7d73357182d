/* scratch.c - the GPU executor's scratch: device memory of every rank (cuMem, so peers map it),
 * zeroed (a zero packet flag is never valid), registered and imported by every other rank. It
 * grows by doubling from 1 MiB when a call needs more; every rank decides the same (same plan,
 * same sizes), so growing is a collective step: each pair swaps the new registration.
 *
 * Nothing is freed before teardown: kernels still running, and graphs captured earlier, keep the
 * device array of pointers of their generation (and the ports made for it), so they stay
 * consistent with the scratch they were made for. Growth doubles, so the old ones add up to less
 * than the current one. */
#include "exec/gpu/state.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/regmem.h"
#include "transport/transport.h"
#include "util/err.h"
#include "util/log.h"

#define XG_SCR_MAGIC 0x58534352u /* "XSCR" */
#define XG_SCR_MIN (1ull << 20)

/* A scratch generation that was replaced (or the current one, at teardown). */
struct xg_scratch_old {
  struct xg_scratch_old* next;
  char* ptr;
  mscclppRegMem_t reg;
  mscclppRegMem_t* peer; /* [rank] */
  char** dev;
};

struct scr_hello {
  uint32_t magic, ok;
  uint64_t cap, blob_len;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

/* This rank's new scratch of cap bytes: allocated, zeroed, registered; *hello describes it. */
static mscclppResult_t make_local(struct xg_state* st, uint64_t cap, char** ptr, mscclppRegMem_t* reg,
                                  struct scr_hello* hello) {
  MPP_CHECK(mscclppMemAlloc((void**)ptr, cap, mscclppMemCuda)); /* zeroed before it returns */
  MPP_CHECK(mscclppRegisterMemory(st->comm, *ptr, cap, reg));
  size_t len = sizeof(hello->blob);
  MPP_CHECK(mscclppRegMemSerialize(*reg, hello->blob, &len));
  hello->blob_len = len, hello->ok = 1;
  return mscclppSuccess;
}

/* Swaps hellos with every peer and imports their scratch into peer[] / host[]. A side that failed
 * locally still swaps (ok = 0) so that every rank fails at once instead of waiting. */
static mscclppResult_t exchange(struct xg_state* st, mscclppResult_t local, const struct scr_hello* mine,
                                mscclppRegMem_t* peer, char** host) {
  mscclppResult_t res = local;
  for (int q = 0; q < st->nranks; q++) {
    if (q == st->rank) continue;
    struct scr_hello theirs;
    mscclppResult_t r = xg_swap(st, q, XG_TAG_SCRATCH, mine, &theirs, sizeof(theirs));
    if (r == mscclppSuccess && (theirs.magic != XG_SCR_MAGIC || theirs.blob_len > sizeof(theirs.blob)))
      r = MPP_ERR(mscclppRemoteError, "GPU executor: malformed scratch message from rank %d", q);
    else if (r == mscclppSuccess && !theirs.ok)
      r = MPP_ERR(mscclppRemoteError, "GPU executor: rank %d failed to grow its scratch", q);
    else if (r == mscclppSuccess && theirs.cap != mine->cap)
      r = MPP_ERR(mscclppInvalidUsage, "GPU executor: rank %d grows its scratch to %llu bytes, rank %d to %llu (every "
                  "rank must run the same plans with the same sizes)", q, (unsigned long long)theirs.cap, st->rank,
                  (unsigned long long)mine->cap);
    if (r == mscclppSuccess && res == mscclppSuccess) r = mscclppRegMemDeserialize(st->comm, theirs.blob, theirs.blob_len, &peer[q]);
    if (r == mscclppSuccess && res == mscclppSuccess) r = mscclppRegMemInfo(peer[q], (void**)&host[q], NULL, NULL);
    if (r == mscclppSuccess && res == mscclppSuccess && host[q] == NULL) {
      if (transport_same_host(&st->comm->tc, q))
        r = MPP_ERR(mscclppInvalidUsage, "GPU executor: rank %d's scratch is not mapped here", q);
      host[q] = XG_UNMAPPED; /* another host's: reached by port puts only (exec_plan_unfit) */
    }
    if (res == mscclppSuccess) res = r;
  }
  return res;
}

/* Keeps the current generation for teardown. */
static mscclppResult_t retire(struct xg_state* st) {
  if (!st->scr) return mscclppSuccess;
  struct xg_scratch_old* o = calloc(1, sizeof(*o));
  if (!o) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
  *o = (struct xg_scratch_old){.next = st->old, .ptr = st->scr, .reg = st->scr_reg, .peer = st->scr_peer, .dev = st->scr_dev};
  st->old = o;
  st->scr = NULL, st->scr_reg = NULL, st->scr_peer = NULL, st->scr_dev = NULL;
  return mscclppSuccess;
}

mscclppResult_t xg_scratch_ensure(struct xg_state* st, uint64_t bytes) {
  if (st->scr && bytes <= st->scr_cap) return mscclppSuccess;
  uint64_t cap = XG_SCR_MIN;
  while (cap < bytes) cap *= 2;
  struct scr_hello mine;
  memset(&mine, 0, sizeof(mine));
  mine.magic = XG_SCR_MAGIC, mine.cap = cap;
  char* ptr = NULL;
  mscclppRegMem_t reg = NULL;
  mscclppRegMem_t* peer = calloc((size_t)st->nranks, sizeof(*peer));
  char** host = calloc((size_t)st->nranks, sizeof(char*));
  mscclppResult_t local = peer && host ? make_local(st, cap, &ptr, &reg, &mine)
                                       : MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
  mscclppResult_t res = exchange(st, local, &mine, peer, host);
  if (res == mscclppSuccess) res = retire(st);
  char** dev = NULL;
  if (res == mscclppSuccess) {
    host[st->rank] = ptr;
    res = xg_dev_alloc((void**)&dev, (size_t)st->nranks * sizeof(char*), "scratch pointers");
  }
  if (res == mscclppSuccess) res = xg_upload(dev, host, (size_t)st->nranks * sizeof(char*));
  if (res != mscclppSuccess) { /* internal releases: the failure's message stays the last error */
    if (dev) cudaFree(dev);
    for (int q = 0; peer && q < st->nranks; q++) regmem_free(peer[q]);
    regmem_free(reg);
    if (ptr) mem_free(ptr);
    free(peer), free(host);
    return res;
  }
  free(st->scr_host);
  st->scr = ptr, st->scr_cap = cap, st->scr_reg = reg, st->scr_peer = peer, st->scr_host = host, st->scr_dev = dev;
  st->scr_gen++;
  LOG_INFO_(LOG_SUB_EXEC, "GPU executor: rank %d scratch %llu bytes (generation %d)", st->rank, (unsigned long long)cap,
            st->scr_gen);
  return mscclppSuccess;
}

void xg_scratch_fini(struct xg_state* st) {
  (void)retire(st);
  while (st->old) {
    struct xg_scratch_old* o = st->old;
    st->old = o->next;
    for (int q = 0; o->peer && q < st->nranks; q++) regmem_free(o->peer[q]);
    regmem_free(o->reg);
    if (o->ptr) mem_free(o->ptr);
    if (o->dev) cudaFree(o->dev);
    free(o->peer);
    free(o);
  }
  free(st->scr_host);
}

#endif /* MSCCLPP_HAVE_CUDA */
