/* state.c - the GPU executor's per-communicator state (state.h): made on the first call of a GPU
 * rank (no communication), torn down with the communicator; the failure report of earlier calls,
 * and the small helpers the other modules share. */
#include "exec/gpu/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "channel/ext.h"
#include "core/comm.h"
#include "core/connection.h"
#include "util/err.h"
#include "util/param.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>

#include "sys/cudawrap.h"
#include "sys/gpu.h"

/* Both return once the data is in place (the setup stream, sys/gpu.h: the kernel that reads it may
 * run on any stream, and the call may be being captured). */
mscclppResult_t xg_upload(void* dst, const void* src, size_t bytes) {
  return bytes == 0 ? mscclppSuccess : gpu_copy_sync(dst, src, bytes);
}

mscclppResult_t xg_dev_alloc(void** out, size_t bytes, const char* what) {
  *out = NULL;
  cudaError_t e = cudaMalloc(out, bytes ? bytes : 8);
  if (e != cudaSuccess) {
    *out = NULL;
    return MPP_ERR(mscclppSystemError, "GPU executor: %zu bytes of device memory for %s: %s", bytes, what,
                   cudaGetErrorString(e));
  }
  mscclppResult_t res = gpu_zero_sync(*out, bytes ? bytes : 8);
  if (res != mscclppSuccess) {
    cudaFree(*out);
    *out = NULL;
  }
  return res;
}

static void state_fini(struct mscclppComm* comm, void* state, int abort) {
  (void)comm, (void)abort;
  struct xg_state* st = state;
  int prev = ext_dev_enter(st->dev);
  cudaDeviceSynchronize(); /* no kernel of ours may still use what is freed below */
  xg_images_fini(st);
  xg_ctx_fini(st);
  xg_chans_fini(st); /* the proxy first: its ports use the registrations below */
  ubuf_fini(&st->ub);
  xg_scratch_fini(st);
  if (st->words) cudaFree(st->words);
  if (st->err_host) cudaFreeHost(st->err_host);
  ext_dev_leave(prev, st->dev);
  free(st->conn), free(st->nmem), free(st->nport), free(st->mem_slot), free(st->port_slot);
  pthread_mutex_destroy(&st->mu);
  free(st);
}

static mscclppResult_t alloc_tables(struct xg_state* st) {
  size_t n = (size_t)st->nranks;
  st->conn = calloc(n, sizeof(*st->conn));
  st->nmem = calloc(n, sizeof(int));
  st->nport = calloc(n, sizeof(int));
  st->mem_slot = malloc(n * XG_MAX_ORD * sizeof(int32_t));
  st->port_slot = malloc(n * XG_MAX_ORD * sizeof(int32_t));
  if (!st->conn || !st->nmem || !st->nport || !st->mem_slot || !st->port_slot)
    return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
  for (size_t i = 0; i < n * XG_MAX_ORD; i++) st->mem_slot[i] = st->port_slot[i] = -1;
  return mscclppSuccess;
}

/* The device words and the host-mapped error record. */
static mscclppResult_t alloc_words(struct xg_state* st) {
  MPP_CHECK(xg_dev_alloc((void**)&st->words, sizeof(struct xg_words), "the executor's counters"));
  void* dev = NULL;
  cudaError_t e = cudaHostAlloc((void**)&st->err_host, sizeof(struct xg_err), cudaHostAllocMapped | cudaHostAllocPortable);
  if (e == cudaSuccess) {
    memset(st->err_host, 0, sizeof(*st->err_host));
    e = cudaHostGetDevicePointer(&dev, st->err_host, 0);
  }
  if (e != cudaSuccess) return cuda_error(e, "GPU executor: the host-mapped error record", __FILE__, __LINE__);
  st->err_dev = dev;
  return mscclppSuccess;
}

static mscclppResult_t state_make(struct mscclppComm* comm, void** out) {
  struct xg_state* st = calloc(1, sizeof(*st));
  if (!st) return MPP_ERR(mscclppSystemError, "GPU executor: out of host memory");
  pthread_mutex_init(&st->mu, NULL);
  st->comm = comm, st->rank = comm->rank, st->nranks = comm->nranks, st->dev = comm->cuda_dev;
  ubuf_init(&st->ub, comm, st->rank, st->dev, "GPU executor");
  int prev = ext_dev_enter(st->dev);
  mscclppResult_t res = alloc_tables(st);
  st->x = chan_ext_find(comm); /* made by xg_get: comm_ext_get holds the slot lock here */
  if (res == mscclppSuccess && !st->x) res = MPP_ERR(mscclppInternalError, "GPU executor: no channel state");
  if (res == mscclppSuccess) res = alloc_words(st);
  ext_dev_leave(prev, st->dev);
  if (res != mscclppSuccess) {
    state_fini(comm, st, 0);
    return res;
  }
  ext_wait_info(st->x, -1, -1, &st->wait);
  st->thread_bytes = param_int(PARAM_EXEC_GPU_THREAD_BYTES);
  st->op_tables = param_int(PARAM_EXEC_GPU_OP_TABLES) != 0;
  *out = st;
  return mscclppSuccess;
}

mscclppResult_t xg_get(struct mscclppComm* comm, struct xg_state** out) {
  struct chan_ext* x = NULL;
  void* s = NULL;
  MPP_CHECK(chan_ext_get(comm, &x)); /* the device-error record and tokens every wait uses */
  MPP_CHECK(comm_ext_get(comm, COMM_EXT_EXEC, state_make, state_fini, &s));
  struct xg_state* st = s;
  if (st->x != x)
    return MPP_ERR(mscclppInvalidUsage, "GPU executor (rank %d): the communicator's channels were released "
                   "(mscclppCommReleaseChannels) after the executor made its own; plans cannot run on it any more",
                   comm->rank);
  *out = st;
  return mscclppSuccess;
}

#else /* no CUDA: there are no GPU ranks */

mscclppResult_t xg_get(struct mscclppComm* comm, struct xg_state** out) {
  (void)comm, (void)out;
  return MPP_ERR(mscclppInvalidUsage, "GPU executor: this library was built without CUDA");
}

#endif

mscclppResult_t xg_swap(struct xg_state* st, int peer, int sub, const void* mine, void* theirs, size_t size) {
  return bootstrap_swap(st->comm->boot, peer, boot_tag(BOOT_TAG_EXEC, sub), mine, theirs, size);
}

mscclppResult_t xg_break(struct xg_state* st, mscclppResult_t res) {
  if (res == mscclppSuccess || st->broken) return res;
  st->broken = (int)res;
  snprintf(st->broken_msg, sizeof(st->broken_msg), "%s", err_last());
  return res;
}

mscclppResult_t xg_check(struct xg_state* st) {
  if (st->broken) return MPP_ERR((mscclppResult_t)st->broken, "GPU executor: an earlier setup failed: %s", st->broken_msg);
  /* Acquire: pairs with the failing block's release store of flag; the fields are complete. */
  if (st->err_host && __atomic_load_n(&st->err_host->flag, __ATOMIC_ACQUIRE) == 1) {
    struct xg_err e = *(volatile struct xg_err*)st->err_host;
    const char* file = "plan";
    for (int i = 0; i < st->nimages; i++)
      if (st->images[i] && st->images[i]->plan_id == e.plan_id) file = st->images[i]->file;
    if (e.what == XG_FAIL_BAD_OP)
      return MPP_ERR(mscclppInternalError,
                     "%s: rank %d block %d op %d has op code %u (%s), which the GPU executor's kernel has no case for; "
                     "the communicator's executor cannot run plans any more",
                     file, st->rank, e.block, e.op, (unsigned)e.code, plan_op_name(e.code));
    char dev[320];
    (void)chan_ext_device_record(st->x, dev, sizeof(dev)); /* "rank 1 waited for rank 0 on channel 3: ..." */
    return MPP_ERR(e.what == XG_FAIL_TIMEOUT ? mscclppTimeout : mscclppRemoteError,
                   "%s: rank %d block %d op %d (%s) of call %llu %s%s%s; the communicator's executor cannot run plans "
                   "any more", file, st->rank, e.block, e.op, plan_op_name(e.code), (unsigned long long)e.launch,
                   e.what == XG_FAIL_TIMEOUT ? "hit the device wait bound (MSCCLPP_DEVICE_WAIT_TIMEOUT)"
                                             : "stopped: another wait of this rank failed first",
                   dev[0] ? ": " : "", dev);
  }
  if (st->proxy) MPP_CHECK(mscclppProxyServiceCheck(st->proxy));
  return mscclppSuccess;
}
