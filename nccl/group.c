/* group.c - ncclGroupStart/End per thread. Collectives and point-to-point calls inside a group go
 * to the library's own groups (mscclppGroupStart/End, which run them at the outermost end);
 * communicator inits inside a group (nccl-tests -g N: one thread initialises several ranks) wait
 * for the outermost ncclGroupEnd, which runs them all at once, each on a thread, since every
 * rank's init waits for the others. */
#include <stdlib.h>

#include "shim.h"

static _Thread_local int depth;
static _Thread_local ncclComm_t* pending;
static _Thread_local int npending, cappending;

int shim_group_depth(void) { return depth; }

ncclResult_t shim_group_defer_init(ncclComm_t comm) {
  if (npending == cappending) {
    int n = cappending ? cappending * 2 : 8;
    ncclComm_t* q = realloc(pending, (size_t)n * sizeof(*q));
    if (!q) return shim_fail(comm, ncclSystemError, "ncclCommInitRank in a group: out of memory");
    pending = q, cappending = n;
  }
  pending[npending++] = comm;
  return ncclSuccess;
}

static void* init_thread(void* arg) {
  (void)shim_init_now(arg);
  return NULL;
}

/* The group's deferred inits, all at once; the first failure is returned (each failed
 * communicator stays, in state FAILED, for the caller to destroy). */
static ncclResult_t run_pending(void) {
  ncclResult_t res = ncclSuccess;
  pthread_t* th = calloc((size_t)npending + 1, sizeof(*th));
  int started = 0;
  if (npending == 1 || !th) {
    for (int i = 0; i < npending; i++) {
      ncclResult_t r = shim_init_now(pending[i]);
      if (res == ncclSuccess) res = r;
    }
  } else {
    for (; started < npending; started++)
      if (pthread_create(&th[started], NULL, init_thread, pending[started]) != 0) break;
    for (int i = started; i < npending; i++) (void)shim_init_now(pending[i]); /* no thread: may wait its bound */
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < npending && res == ncclSuccess; i++) res = pending[i]->async;
  }
  free(th);
  npending = 0;
  return res;
}

NCCL_API(ncclResult_t, GroupStart, void) {
  mscclppResult_t r = mscclppGroupStart();
  if (r != mscclppSuccess) return shim_fail_lib(NULL, r, "ncclGroupStart");
  depth++;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, GroupEnd, void) {
  if (depth == 0) return shim_fail(NULL, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  ncclResult_t res = ncclSuccess;
  if (--depth == 0 && npending) res = run_pending();
  mscclppResult_t r = mscclppGroupEnd();
  if (r != mscclppSuccess && res == ncclSuccess) res = shim_fail_lib(NULL, r, "ncclGroupEnd");
  return res;
}

/* Simulation (a time estimate without running) is not provided: the group is ended as by
 * ncclGroupEnd, so its operations run, and the call says so with InvalidUsage. */
NCCL_API(ncclResult_t, GroupSimulateEnd, ncclSimInfo_t* simInfo) {
  ncclResult_t res = ncclGroupEnd();
  if (res != ncclSuccess) return res;
  if (simInfo) simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
  return shim_fail(NULL, ncclInvalidUsage, "ncclGroupSimulateEnd: this library does not simulate groups; the group was "
                   "ended as by ncclGroupEnd and its operations ran");
}
