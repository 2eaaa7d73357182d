/* fake_nccl.c - a stand-in for a real NCCL (libfakenccl.so), for testing the fallback on machines
 * without a GPU: it exports the NCCL functions fallback.c loads, counts the calls, and marks the
 * output of each collective so that a test can tell a forwarded call from a native one:
 * allreduce writes 1000 + rank + the first byte of the communicator's unique id into every float.
 * Like NCCL, it completes an init made inside a group only at the group's end, refuses a
 * collective on a communicator whose init has not completed, and calls its own exported functions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

struct fake_comm {
  int rank, nranks;
  unsigned char id0;
  int ready; /* as NCCL: an init made inside a group completes at the group's end */
};

static int depth;
static struct fake_comm* deferred[64];
static int ndeferred;

static int calls[8]; /* 0 init, 1 destroy, 2 allreduce, 3 allgather, 4 group start, 5 group end, 6 send/recv,
                       * 7 its own ncclCommGetAsyncError */

/* The counts, for the test (not an NCCL function). */
__attribute__((visibility("default"))) int fake_nccl_calls(int what) { return what >= 0 && what < 8 ? calls[what] : -1; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  id->internal[0] = (char)(17 + (rand() % 200));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  struct fake_comm* c = malloc(sizeof(*c));
  *c = (struct fake_comm){rank, nranks, (unsigned char)id.internal[0], depth == 0};
  if (depth > 0 && ndeferred < 64) deferred[ndeferred++] = c;
  *comm = (ncclComm_t)(void*)c;
  calls[0]++;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  free(comm);
  calls[1]++;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

const char* ncclGetErrorString(ncclResult_t r) { return r == ncclSuccess ? "fake success" : "fake failure"; }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
  const struct fake_comm* c = (const struct fake_comm*)(void*)comm;
  if (!c || !c->ready) return ncclInvalidArgument;
  *err = ncclSuccess;
  calls[7]++;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t st) {
  (void)s, (void)op, (void)st;
  const struct fake_comm* c = (const struct fake_comm*)(void*)comm;
  if (dt != ncclFloat32 || !c->ready) return ncclInvalidArgument;
#if !defined(__SANITIZE_ADDRESS__)
  /* as the real NCCL does: a call to its own exported function, which must bind here (fallback.c
   * loads it with RTLD_DEEPBIND), not to the NCCL layer's function of the same name */
  ncclResult_t ready;
  if (ncclCommGetAsyncError(comm, &ready) != ncclSuccess || ready != ncclSuccess) return ncclInvalidArgument;
#endif
  for (size_t i = 0; i < n; i++) ((float*)r)[i] = (float)(1000 + c->rank + c->id0);
  calls[2]++;
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t dt, ncclComm_t comm, cudaStream_t st) {
  (void)s, (void)r, (void)n, (void)dt, (void)comm, (void)st;
  calls[3]++;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) { return depth++, calls[4]++, ncclSuccess; }

ncclResult_t ncclGroupEnd(void) {
  if (--depth == 0)
    while (ndeferred > 0) deferred[--ndeferred]->ready = 1;
  return calls[5]++, ncclSuccess;
}

ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t st) {
  (void)s, (void)n, (void)dt, (void)peer, (void)comm, (void)st;
  return calls[6]++, ncclSuccess;
}

ncclResult_t ncclRecv(void* r, size_t n, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t st) {
  (void)r, (void)n, (void)dt, (void)peer, (void)comm, (void)st;
  return calls[6]++, ncclSuccess;
}
