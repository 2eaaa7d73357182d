/* comm.c - creating and tearing down communicators; the bootstrap entry points of the C API. */
#include "core/comm.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "bootstrap/bootstrap.h"
#include "core/comm_internal.h"
#include "core/handle_reg.h"
#include "sys/gpu.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/timeutil.h"

static atomic_int conn_timeout_s; /* mscclppSetBootstrapConnTimeout; 0 = use the parameter */

mscclppResult_t mscclppSetBootstrapConnTimeout(int timeout) {
  err_clear();
  MPP_CHECK_ARG(timeout > 0, "mscclppSetBootstrapConnTimeout: timeout %d s is not positive", timeout);
  atomic_store(&conn_timeout_s, timeout);
  return mscclppSuccess;
}

/* Copies the caller's config (which may be older and smaller than ours) over the defaults. */
static mscclppResult_t config_read(const mscclppConfig_t* user, mscclppConfig_t* out) {
  mscclppConfig_t defaults = MSCCLPP_CONFIG_INITIALIZER;
  *out = defaults;
  if (!user) return mscclppSuccess;
  if (user->magic != MSCCLPP_CONFIG_MAGIC)
    return MPP_ERR(mscclppInvalidArgument, "config: magic 0x%x is wrong (initialize with MSCCLPP_CONFIG_INITIALIZER)",
                   user->magic);
  if (user->size < offsetof(mscclppConfig_t, rankKind))
    return MPP_ERR(mscclppInvalidArgument, "config: size %zu is too small", user->size);
  memcpy(out, user, user->size < sizeof(*out) ? user->size : sizeof(*out));
  out->size = sizeof(*out);
  return mscclppSuccess;
}

/* Decides CPU or GPU for this rank and, for GPU ranks, the device. */
static mscclppResult_t choose_kind(const mscclppConfig_t* cfg, int default_dev, int* kind, int* dev) {
  int k = cfg->rankKind;
  if (k == mscclppRankAuto) {
    const char* p = param_str(PARAM_RANK_KIND);
    if (strcasecmp(p, "cpu") == 0)
      k = mscclppRankCpu;
    else if (strcasecmp(p, "gpu") == 0)
      k = mscclppRankGpu;
    else if (strcasecmp(p, "auto") == 0)
      k = gpu_count() > 0 ? mscclppRankGpu : mscclppRankCpu;
    else
      return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_RANK_KIND=\"%s\": expected auto, cpu or gpu", p);
  }
  if (k != mscclppRankCpu && k != mscclppRankGpu) return MPP_ERR(mscclppInvalidArgument, "config: rankKind %d is unknown", k);
  *kind = k;
  *dev = -1;
  if (k == mscclppRankCpu) return mscclppSuccess;
  int want = cfg->cudaDevice >= 0 ? cfg->cudaDevice : default_dev;
  if (want >= 0) MPP_CHECK(gpu_set_device(want));
  return gpu_current_device(dev);
}

static int timeout_ms_for(const mscclppConfig_t* cfg) {
  if (cfg->bootstrapTimeoutMs > 0) return cfg->bootstrapTimeoutMs;
  int s = atomic_load(&conn_timeout_s);
  int64_t secs = s > 0 ? s : param_int(PARAM_BOOTSTRAP_TIMEOUT);
  if (secs <= 0) secs = 1;
  return secs > 2000000 ? 2000000000 : (int)(secs * 1000);
}

/* Joins the bootstrap, exchanges peer information and starts the transports. */
static mscclppResult_t comm_setup(struct mscclppComm* c, const mscclppUniqueId* id) {
  MPP_CHECK(bootstrap_init(id, c->rank, c->nranks, c->timeout_ms, &c->boot));
  c->peers = calloc((size_t)c->nranks, sizeof(*c->peers));
  if (!c->peers) return MPP_ERR(mscclppSystemError, "out of memory for %d peer entries", c->nranks);
  MPP_CHECK(comm_fill_peer_info(c, &c->peers[c->rank]));
  MPP_CHECK(bootstrap_allgather(c->boot, c->peers, sizeof(*c->peers)));
  MPP_CHECK(comm_adopt_peer_info(c));
  return comm_objects_init(c);
}

/* Frees what c holds, not c itself. */
static void comm_free_resources(struct mscclppComm* c, int abort) {
  comm_ext_fini_all(c, abort);
  /* After the layers' own teardown (which releases their internal objects through the public calls)
   * and before the objects the user left open are freed: their handles now read as destroyed with
   * the communicator (docs/errors.md). */
  handle_comm_gone(c);
  if (c->objs) comm_objects_fini(c, abort);
  if (c->boot) {
    if (abort) bootstrap_abort(c->boot);
    bootstrap_destroy(c->boot);
  }
  free(c->peers);
  pthread_mutex_destroy(&c->ext_lock);
}

/* The one init path behind every public init function. */
static mscclppResult_t comm_init(mscclppComm_t* out, int nranks, const mscclppUniqueId* id, int rank,
                                 const mscclppConfig_t* user_cfg, int default_dev) {
  MPP_CHECK_ARG(out != NULL, "communicator init: comm is NULL");
  *out = NULL;
  MPP_CHECK_ARG(nranks >= 1, "communicator init: nranks %d must be at least 1", nranks);
  MPP_CHECK_ARG(rank >= 0 && rank < nranks, "communicator init: rank %d is outside 0..%d", rank, nranks - 1);
  mscclppConfig_t cfg;
  mscclppResult_t cres = config_read(user_cfg, &cfg);
  if (cres != mscclppSuccess) {
    bootstrap_root_stop(id);
    return cres;
  }
  struct mscclppComm* c = calloc(1, sizeof(*c));
  if (!c) return MPP_ERR(mscclppSystemError, "out of memory for a communicator");
  pthread_mutex_init(&c->ext_lock, NULL);
  c->rank = rank;
  c->nranks = nranks;
  c->timeout_ms = timeout_ms_for(&cfg);
  log_set_rank(rank);
  mscclppResult_t res;
  MPP_CHECK_GOTO(choose_kind(&cfg, default_dev, &c->kind, &c->cuda_dev), res, fail);
  MPP_CHECK_GOTO(comm_setup(c, id), res, fail);
  LOG_INFO_(LOG_SUB_INIT, "rank %d/%d ready: %s rank%s%d, local %d/%d, comm id %016llx", rank, nranks,
            c->kind == mscclppRankGpu ? "GPU" : "CPU", c->kind == mscclppRankGpu ? " on device " : " ",
            c->kind == mscclppRankGpu ? c->cuda_dev : rank, c->local_rank, c->local_size,
            (unsigned long long)c->comm_id);
  MPP_CHECK_GOTO(comm_handle_add(c), res, fail);
  *out = c;
  return mscclppSuccess;
fail:
  comm_free_resources(c, 1);
  free(c); /* never registered: no handle to it exists */
  bootstrap_root_stop(id); /* rank 0's root, if it still waits: free its port for a retry */
  return res;
}

mscclppResult_t mscclppGetUniqueId(mscclppUniqueId* uniqueId) {
  err_clear();
  MPP_CHECK_ARG(uniqueId != NULL, "mscclppGetUniqueId: uniqueId is NULL");
  return bootstrap_unique_id(uniqueId);
}

mscclppResult_t mscclppCommInitRank(mscclppComm_t* comm, int nranks, const char* ipPortPair, int rank) {
  err_clear();
  MPP_CHECK_ARG(ipPortPair != NULL, "mscclppCommInitRank: ipPortPair is NULL");
  /* Checked before rank 0 starts its root, which would otherwise hold the port after the failure. */
  MPP_CHECK_ARG(comm != NULL, "mscclppCommInitRank: comm is NULL");
  MPP_CHECK_ARG(nranks >= 1, "mscclppCommInitRank: nranks %d must be at least 1", nranks);
  MPP_CHECK_ARG(rank >= 0 && rank < nranks, "mscclppCommInitRank: rank %d is outside 0..%d", rank, nranks - 1);
  mscclppUniqueId id;
  MPP_CHECK(bootstrap_id_from_address(ipPortPair, rank, &id));
  return comm_init(comm, nranks, &id, rank, NULL, -1);
}

mscclppResult_t mscclppCommInitRankFromId(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank) {
  err_clear();
  return comm_init(comm, nranks, &id, rank, NULL, -1);
}

mscclppResult_t mscclppCommInitRankConfig(mscclppComm_t* comm, int nranks, mscclppUniqueId id, int rank,
                                          const mscclppConfig_t* config) {
  err_clear();
  return comm_init(comm, nranks, &id, rank, config, -1);
}

mscclppResult_t mscclppCommInitFromEnv(mscclppComm_t* comm, const mscclppConfig_t* config) {
  err_clear();
  struct launch_env env;
  MPP_CHECK(launch_env_read(&env));
  MPP_CHECK_ARG(comm != NULL, "mscclppCommInitFromEnv: comm is NULL");
  mscclppUniqueId id;
  if (env.via_store)
    MPP_CHECK(launch_store_id(&env, &id));
  else
    MPP_CHECK(bootstrap_id_from_address(env.root, env.rank, &id));
  int ngpus = gpu_count();
  int dev = (env.local_rank >= 0 && ngpus > 0) ? env.local_rank % ngpus : -1;
  return comm_init(comm, env.nranks, &id, env.rank, config, dev);
}

/* Destroy refuses a communicator that a call (of another thread) is inside; a destroyed handle
 * stays recognisable (handles.c), and queued group calls on it fail at mscclppGroupEnd. */
mscclppResult_t mscclppCommDestroy(mscclppComm_t comm) {
  err_clear();
  MPP_CHECK_ARG(comm != NULL, "%s: communicator is NULL", __func__);
  handle_comm_close(comm); /* other threads' new calls on its objects are refused from here */
  const char* kind = NULL;
  const void* obj = NULL;
  mscclppResult_t res = mscclppSuccess;
  if (handle_comm_holds(comm, &kind, &obj) > 0)
    res = MPP_ERR(mscclppInvalidUsage, "%s: the communicator's %s %p is in use by another thread (a call on it has not "
                  "returned); destroy the communicator once it has, or use mscclppCommAbort (docs/errors.md)",
                  __func__, kind, obj);
  if (res == mscclppSuccess) res = comm_handle_retire(comm, __func__);
  if (res != mscclppSuccess) {
    handle_comm_reopen(comm);
    return res;
  }
  comm_free_resources(comm, 0);
  comm_handle_bury(comm);
  return mscclppSuccess;
}

/* Waits (bounded by the communicator's timeout) until no public call is inside comm or one of its
 * objects. */
static void comm_drain(struct mscclppComm* comm) {
  uint64_t deadline = time_deadline_ms(comm->timeout_ms);
  while ((atomic_load(&comm->busy) > 0 || handle_comm_holds(comm, NULL, NULL) > 0) && time_now_ns() < deadline) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

mscclppResult_t mscclppCommAbort(mscclppComm_t comm) {
  err_clear();
  MPP_CHECK_ARG(comm != NULL, "%s: communicator is NULL", __func__);
  /* New calls fail from here on; calls blocked in the bootstrap wake up now (sockets shut down),
   * host waits notice the flag at their next liveness check (at most 20 ms). */
  MPP_CHECK(comm_handle_abort_begin(comm, __func__));
  handle_comm_close(comm); /* and on its objects */
  if (comm->boot) bootstrap_abort(comm->boot);
  comm_drain(comm);
  int object_calls = handle_comm_holds(comm, NULL, NULL);
  if (!comm_handle_abort_end(comm, object_calls)) {
    int busy = atomic_load(&comm->busy) + object_calls;
    return MPP_ERR(mscclppInternalError,
                   "mscclppCommAbort: %d call(s) still inside the communicator after %d ms; its resources are "
                   "left allocated (freeing them under a running call is unsafe)", busy, comm->timeout_ms);
  }
  comm_free_resources(comm, 1);
  comm_handle_bury(comm);
  return mscclppSuccess;
}
