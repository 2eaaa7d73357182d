/* comm.c - communicators: unique ids, the init calls (blocking, nonblocking, inside a group, all
 * ranks of one process), finalize / destroy / abort, and the queries. */
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* NCCL's config magic (ncclConfig_t.magic from NCCL_CONFIG_INITIALIZER). */
#define SHIM_CONFIG_MAGIC 0xcafebeefu

/* The caller's config as this library's layout: min(its size, ours) bytes are copied, the fields
 * it lacks keep their undefined value; a wrong magic is InvalidArgument. */
static ncclResult_t config_read(const ncclConfig_t* in, ncclConfig_t* out) {
  ncclConfig_t def = NCCL_CONFIG_INITIALIZER;
  *out = def;
  if (!in) return ncclSuccess;
  if (in->magic != SHIM_CONFIG_MAGIC)
    return shim_fail(NULL, ncclInvalidArgument, "ncclConfig_t: magic 0x%x is not NCCL_CONFIG_INITIALIZER's 0x%x (the "
                     "config was not initialised with it)", in->magic, SHIM_CONFIG_MAGIC);
  if (in->size < offsetof(ncclConfig_t, blocking))
    return shim_fail(NULL, ncclInvalidArgument, "ncclConfig_t: size %zu is smaller than the config's header", in->size);
  memcpy(out, in, in->size < sizeof(*out) ? in->size : sizeof(*out));
  out->size = sizeof(*out);
  return ncclSuccess;
}

ncclResult_t shim_comm_new(int nranks, ncclUniqueId id, int rank, const ncclConfig_t* config, ncclComm_t* out) {
  ncclConfig_t cfg;
  *out = NULL;
  if (nranks < 1) return shim_fail(NULL, ncclInvalidArgument, "nranks %d: a communicator has at least one rank", nranks);
  if (rank < 0 || rank >= nranks)
    return shim_fail(NULL, ncclInvalidArgument, "rank %d is not in [0, %d) (nranks %d)", rank, nranks, nranks);
  ncclResult_t res = config_read(config, &cfg);
  if (res != ncclSuccess) return res;
  if (cfg.blocking != NCCL_CONFIG_UNDEF_INT && cfg.blocking != 0 && cfg.blocking != 1)
    return shim_fail(NULL, ncclInvalidArgument, "ncclConfig_t.blocking %d: 0 or 1", cfg.blocking);
  ncclComm_t c = calloc(1, sizeof(*c));
  if (!c) return shim_fail(NULL, ncclSystemError, "out of memory for a communicator");
  mscclppConfig_t mc = MSCCLPP_CONFIG_INITIALIZER;
  c->cfg = mc;
  c->rank = rank, c->nranks = nranks, c->device = -1, c->id = id;
  c->blocking = cfg.blocking != 0; /* undefined: blocking, as NCCL */
  pthread_mutex_init(&c->lock, NULL);
  atomic_store(&c->state, SHIM_PENDING);
  if (!shim_live_add(c)) {
    shim_comm_free(c);
    return shim_fail(NULL, ncclSystemError, "out of memory for a communicator");
  }
  *out = c;
  return ncclSuccess;
}

void shim_comm_free(ncclComm_t comm) {
  shim_live_remove(comm);
  shim_worker_stop(comm->worker);
  shim_regs_free(comm);
  pthread_mutex_destroy(&comm->lock);
  free(comm);
}

ncclResult_t shim_init_now(ncclComm_t comm) {
  mscclppUniqueId id;
  memcpy(id.internal, comm->id.internal, sizeof(id.internal));
  mscclppComm_t c = NULL;
  mscclppResult_t r = mscclppCommInitRankConfig(&c, comm->nranks, id, comm->rank, &comm->cfg);
  ncclResult_t res = shim_fail_lib(comm, r, "ncclCommInitRank");
  if (res == ncclSuccess) {
    comm->c = c;
    (void)mscclppCommCudaDevice(c, &comm->device);
  }
  comm->async = res;
  atomic_store(&comm->state, res == ncclSuccess ? SHIM_READY : SHIM_FAILED);
  return res;
}

static void* init_thread(void* arg) {
  (void)shim_init_now(arg);
  return NULL;
}

/* Joins a nonblocking init's thread once (callers hold no lock; the thread ends on its own). */
static void join_init(ncclComm_t comm) {
  pthread_mutex_lock(&comm->lock);
  int join = comm->has_init_thread;
  comm->has_init_thread = 0;
  pthread_mutex_unlock(&comm->lock);
  if (join) pthread_join(comm->init_thread, NULL);
}

ncclResult_t shim_ready(ncclComm_t comm, const char* call) {
  if (!comm || !shim_live(comm))
    return shim_fail(NULL, ncclInvalidArgument, "%s: %p is not a communicator (never made, or destroyed)", call,
                     (void*)comm);
  if (atomic_load(&comm->state) == SHIM_INITING) join_init(comm);
  switch ((enum shim_state)atomic_load(&comm->state)) {
    case SHIM_READY: return ncclSuccess;
    case SHIM_PENDING:
      return shim_fail(comm, ncclInvalidUsage, "%s: the communicator's init waits for the ncclGroupEnd of its group", call);
    case SHIM_FAILED:
      return shim_fail(comm, ncclInvalidUsage, "%s: the communicator's init failed (%s)", call, comm->last);
    case SHIM_FINALIZED: return shim_fail(comm, ncclInvalidUsage, "%s: the communicator was finalized", call);
    case SHIM_INITING: break;
  }
  return shim_fail(comm, ncclInternalError, "%s: communicator in an unknown state", call);
}

/* Initialises comm now, in a group, or on a thread of its own (nonblocking). */
static ncclResult_t start_init(ncclComm_t comm) {
  if (shim_group_depth() > 0) return shim_group_defer_init(comm);
  if (comm->blocking) return shim_init_now(comm);
  atomic_store(&comm->state, SHIM_INITING);
  if (pthread_create(&comm->init_thread, NULL, init_thread, comm) != 0) {
    atomic_store(&comm->state, SHIM_PENDING);
    return shim_init_now(comm);
  }
  comm->has_init_thread = 1;
  return ncclInProgress;
}

/* The common path of the init calls: a new communicator, started; *out is NULL on failure (a
 * failed blocking init frees it; nonblocking failures are reported by ncclCommGetAsyncError). */
static ncclResult_t init_rank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, const ncclConfig_t* config,
                              int device) {
  if (!out) return shim_fail(NULL, ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  ncclComm_t comm;
  ncclResult_t res = shim_comm_new(nranks, id, rank, config, &comm);
  *out = NULL;
  if (res != ncclSuccess) return res;
  comm->cfg.cudaDevice = device;
  res = start_init(comm);
  if (res != ncclSuccess && res != ncclInProgress) {
    shim_comm_free(comm);
    return res;
  }
  *out = comm;
  return res;
}

NCCL_API(ncclResult_t, GetUniqueId, ncclUniqueId* uniqueId) {
  if (!uniqueId) return shim_fail(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  mscclppUniqueId id;
  mscclppResult_t r = mscclppGetUniqueId(&id);
  if (r != mscclppSuccess) return shim_fail_lib(NULL, r, "ncclGetUniqueId");
  memcpy(uniqueId->internal, id.internal, sizeof(uniqueId->internal));
  return ncclSuccess;
}

/* The device NCCL gives a new rank: the caller's current one, taken now, since the init may run
 * on another thread (a group's end, a nonblocking init). */
static int caller_device(void) {
  int dev = -1;
  (void)mscclppGetCudaDevice(&dev);
  return dev;
}

NCCL_API(ncclResult_t, CommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return init_rank(comm, nranks, commId, rank, NULL, caller_device());
}

NCCL_API(ncclResult_t, CommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t* config) {
  return init_rank(comm, nranks, commId, rank, config, caller_device());
}

/* Every rank passes the same nId ids; one root is enough for the bootstrap here, so the first
 * serves. */
NCCL_API(ncclResult_t, CommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || !commIds)
    return shim_fail(NULL, ncclInvalidArgument, "ncclCommInitRankScalable: %d ids at %p; at least one", nId,
                     (void*)commIds);
  return init_rank(newcomm, nranks, commIds[0], myrank, config, caller_device());
}

/* Initialises the communicator an element of an array points to. */
static void* init_elem(void* elem) {
  (void)shim_init_now(*(ncclComm_t*)elem);
  return NULL;
}

ncclResult_t shim_init_together(ncclComm_t* comms, size_t n) {
  pthread_t* th = n > 1 ? calloc(n, sizeof(*th)) : NULL;
  size_t started = 0;
  for (; th && started < n; started++)
    if (pthread_create(&th[started], NULL, init_elem, &comms[started]) != 0) break;
  for (size_t i = started; i < n; i++) init_elem(&comms[i]); /* no thread: here (may wait out its bound) */
  for (size_t i = 0; i < started; i++) pthread_join(th[i], NULL);
  free(th);
  ncclResult_t res = ncclSuccess;
  for (size_t i = 0; i < n && res == ncclSuccess; i++) res = comms[i]->async;
  return res;
}

/* ndev ranks in this process, rank i on device devlist[i] (or i): each initialises on a thread of
 * its own, since every rank's init waits for all the others. */
NCCL_API(ncclResult_t, CommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  if (!comms || ndev < 1) return shim_fail(NULL, ncclInvalidArgument, "ncclCommInitAll: %d devices at %p", ndev, (void*)comms);
  ncclUniqueId id;
  ncclResult_t res = ncclGetUniqueId(&id);
  if (res != ncclSuccess) return res;
  int made = 0;
  for (int i = 0; i < ndev && res == ncclSuccess; i++, made++) {
    res = shim_comm_new(ndev, id, i, NULL, &comms[i]);
    if (res == ncclSuccess) comms[i]->cfg.cudaDevice = devlist ? devlist[i] : i;
  }
  if (res == ncclSuccess) res = shim_init_together(comms, (size_t)ndev);
  for (int i = 0; res != ncclSuccess && i < made; i++) { /* all or none */
    if (!comms[i]) continue;
    if (comms[i]->c) (void)mscclppCommAbort(comms[i]->c);
    shim_comm_free(comms[i]);
    comms[i] = NULL;
  }
  return res;
}

/* Work already enqueued completes on its streams; the communicator then takes no more calls. */
NCCL_API(ncclResult_t, CommFinalize, ncclComm_t comm) {
  ncclResult_t res = shim_ready(comm, "ncclCommFinalize");
  if (res != ncclSuccess) return res;
  atomic_store(&comm->state, SHIM_FINALIZED);
  return ncclSuccess;
}

/* Frees comm (its init is waited for first when it still runs). */
static ncclResult_t teardown(ncclComm_t comm, int abort, const char* call) {
  if (!comm) return ncclSuccess; /* NCCL accepts NULL here */
  if (!shim_live(comm))
    return shim_fail(NULL, ncclInvalidArgument, "%s: %p is not a communicator (never made, or destroyed)", call,
                     (void*)comm);
  join_init(comm);
  mscclppResult_t r = mscclppSuccess;
  shim_fallback_free(comm, abort);
  if (comm->c) r = abort ? mscclppCommAbort(comm->c) : mscclppCommDestroy(comm->c);
  ncclResult_t res = shim_fail_lib(NULL, r, call);
  shim_comm_free(comm);
  return res;
}

NCCL_API(ncclResult_t, CommDestroy, ncclComm_t comm) { return teardown(comm, 0, "ncclCommDestroy"); }

NCCL_API(ncclResult_t, CommAbort, ncclComm_t comm) { return teardown(comm, 1, "ncclCommAbort"); }

NCCL_API(ncclResult_t, CommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  if (!asyncError) return shim_fail(comm, ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  /* The real NCCL's own call on its twin first: it comes at every forwarded call, and the twin
   * check is lock-free once it has seen the twin (and returns at once without a real NCCL). */
  ncclResult_t real_res;
  if (shim_fallback_async_error(comm, asyncError, &real_res)) return real_res;
  if (!comm || !shim_live(comm))
    return shim_fail(NULL, ncclInvalidArgument, "ncclCommGetAsyncError: %p is not a communicator", (void*)comm);
  int st = atomic_load(&comm->state);
  if (st == SHIM_INITING || st == SHIM_PENDING) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  join_init(comm);
  *asyncError = comm->async;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, CommCount, const ncclComm_t comm, int* count) {
  ncclResult_t res = shim_ready(comm, "ncclCommCount");
  if (res == ncclSuccess && !count) res = shim_fail(comm, ncclInvalidArgument, "ncclCommCount: count is NULL");
  if (res == ncclSuccess) *count = comm->nranks;
  return res;
}

NCCL_API(ncclResult_t, CommUserRank, const ncclComm_t comm, int* rank) {
  ncclResult_t res = shim_ready(comm, "ncclCommUserRank");
  if (res == ncclSuccess && !rank) res = shim_fail(comm, ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  if (res == ncclSuccess) *rank = comm->rank;
  return res;
}

/* The rank's CUDA device; -1 for a CPU rank. */
NCCL_API(ncclResult_t, CommCuDevice, const ncclComm_t comm, int* device) {
  ncclResult_t res = shim_ready(comm, "ncclCommCuDevice");
  if (res == ncclSuccess && !device) res = shim_fail(comm, ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  if (res == ncclSuccess) *device = comm->device;
  return res;
}
