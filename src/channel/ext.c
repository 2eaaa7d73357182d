/* ext.c - the per-communicator channel state (see ext.h), kept in the communicator's
 * COMM_EXT_CHANNELS slot, and the device-error record. */
#include "channel/ext.h"

#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "sys/cudawrap.h"
#include "sys/gpu.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

int ext_dev_enter(int dev) {
#if MSCCLPP_HAVE_CUDA
  int prev = -1;
  if (dev < 0) return -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  if (prev != dev) (void)cudaSetDevice(dev);
  return prev;
#else
  (void)dev;
  return -1;
#endif
}

void ext_dev_leave(int prev, int dev) {
#if MSCCLPP_HAVE_CUDA
  if (prev >= 0 && prev != dev) (void)cudaSetDevice(prev);
#else
  (void)prev;
  (void)dev;
#endif
}

/* Allocates the device-error record and the claim word: host-mapped pinned memory and device
 * memory for GPU ranks (the GPU's atomics on the claim stay in its own memory), host memory for
 * CPU ranks. */
static mscclppResult_t record_alloc(struct chan_ext* x) {
  if (!x->gpu) {
    x->rec_host = calloc(1, sizeof(*x->rec_host));
    x->claim = calloc(1, 64);
    if (x->rec_host == NULL || x->claim == NULL) return MPP_ERR(mscclppSystemError, "channels: out of host memory");
    x->rec_wait = x->rec_host;
    return mscclppSuccess;
  }
#if MSCCLPP_HAVE_CUDA
  int prev = ext_dev_enter(x->dev);
  mscclppResult_t res = mscclppSuccess;
  void* host = NULL;
  void* dev = NULL;
  cudaError_t ce = cudaHostAlloc(&host, sizeof(mscclppDeviceError), cudaHostAllocMapped | cudaHostAllocPortable);
  if (ce == cudaSuccess) {
    x->rec_host = host;
    memset(host, 0, sizeof(mscclppDeviceError));
    ce = cudaHostGetDevicePointer(&dev, host, 0);
  }
  if (ce == cudaSuccess) {
    x->rec_wait = dev;
    ce = cudaMalloc(&dev, 64);
  }
  if (ce == cudaSuccess) x->claim = dev;
  if (ce != cudaSuccess) res = cuda_error(ce, "channels: allocating the device-error record", __FILE__, __LINE__);
  else res = gpu_zero_sync(dev, 64);
  ext_dev_leave(prev, x->dev);
  return res;
#else
  return MPP_ERR(mscclppInvalidUsage, "channels: a GPU rank in a build without CUDA");
#endif
}

static void record_free(struct chan_ext* x) {
  if (!x->gpu) {
    free(x->rec_host);
    free(x->claim);
    return;
  }
#if MSCCLPP_HAVE_CUDA
  int prev = ext_dev_enter(x->dev);
  if (x->rec_host) cudaFreeHost(x->rec_host);
  if (x->claim) cudaFree(x->claim);
  ext_dev_leave(prev, x->dev);
#endif
}

/* The slot's finalizer: releases the token pool, the imports and the record. */
void chan_ext_depend(struct chan_ext* x, struct chan_dependent* d) {
  pthread_mutex_lock(&x->lock);
  d->next = x->dependents;
  x->dependents = d;
  pthread_mutex_unlock(&x->lock);
}

void chan_ext_undepend(struct chan_ext* x, struct chan_dependent* d) {
  pthread_mutex_lock(&x->lock);
  for (struct chan_dependent** at = &x->dependents; *at != NULL; at = &(*at)->next)
    if (*at == d) {
      *at = d->next;
      break;
    }
  pthread_mutex_unlock(&x->lock);
}

static void ext_fini(struct mscclppComm* comm, void* state, int abort) {
  (void)comm;
  (void)abort;
  struct chan_ext* x = state;
  pthread_mutex_lock(&x->lock);
  struct chan_dependent* d = x->dependents;
  x->dependents = NULL;
  pthread_mutex_unlock(&x->lock);
  for (struct chan_dependent* next; d != NULL; d = next) { /* stopped before what they use goes */
    next = d->next;
    d->stop(d->arg);
  }
  tokens_fini(x);
  record_free(x);
  pthread_mutex_destroy(&x->lock);
  free(x);
}

static mscclppResult_t ext_make(struct mscclppComm* comm, void** state) {
  struct chan_ext* x = calloc(1, sizeof(*x));
  if (x == NULL) return MPP_ERR(mscclppSystemError, "channels: out of host memory");
  x->comm = comm;
  x->gpu = comm->kind == mscclppRankGpu;
  x->dev = x->gpu ? comm->cuda_dev : -1;
  pthread_mutex_init(&x->lock, NULL);
  mscclppResult_t res = record_alloc(x);
  if (res != mscclppSuccess) {
    record_free(x);
    pthread_mutex_destroy(&x->lock);
    free(x);
    return res;
  }
  *state = x;
  return mscclppSuccess;
}

struct chan_ext* chan_ext_find(struct mscclppComm* comm) { return comm_ext_peek(comm, COMM_EXT_CHANNELS); }

mscclppResult_t chan_ext_get(struct mscclppComm* comm, struct chan_ext** out) {
  void* state = NULL;
  MPP_CHECK(comm_ext_get(comm, COMM_EXT_CHANNELS, ext_make, ext_fini, &state));
  *out = state;
  return mscclppSuccess;
}

void ext_wait_info(const struct chan_ext* x, int peer, int channel, mscclppWaitInfo* w) {
  int64_t ms = param_int(PARAM_DEVICE_WAIT_TIMEOUT);
  memset(w, 0, sizeof(*w));
  w->record = x->rec_wait;
  w->claim = x->claim;
  w->timeoutNs = ms <= 0 ? 1000000ull : (uint64_t)ms * 1000000ull;
  w->rank = x->comm->rank;
  w->peer = peer;
  w->channel = channel;
}

mscclppResult_t mscclppCommReleaseChannels(mscclppComm_t comm) {
  err_clear();
  COMM_CHECK(comm);
  comm_ext_release(comm, COMM_EXT_PROXY, 0); /* the seed API's state uses the channels */
  comm_ext_release(comm, COMM_EXT_CHANNELS, 0);
  return mscclppSuccess;
}
