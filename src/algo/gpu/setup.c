/* setup.c - the GPU ranks' per-communicator state (gpu.h): scratch in device memory, a cuda-ipc
 * connection and nblocks memory channels to every peer, the device array of channels and the LL
 * flag counter. Made by the first GPU collective of the communicator (every rank's first one, so
 * the pairwise exchanges meet), which may be captured into a CUDA graph (nothing of the setup goes
 * on the call's stream), cached in the collectives state and released with it. Once made, a call
 * does no allocation, lock or system call. */
#include "algo/gpu/gpu.h"

#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "core/comm.h"
#include "core/connection.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "sys/gpu.h"

#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>

#define GPU_CONN_TAG 0x677061 /* "gpa": the connections of the GPU collectives */
#define GPU_HELLO_MAGIC 0x47504c4cu

/* What two ranks swap before their channels: the geometry (which must agree) and the scratch. */
struct gpu_hello {
  uint32_t magic, ok;
  uint64_t ll_slot, bulk_slot, nblocks;
  uint64_t blob_len;
  unsigned char blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

mscclppResult_t gpu_cuda_check(int err, const char* what) {
  if (err == cudaSuccess) return mscclppSuccess;
  return MPP_ERR(mscclppInternalError, "GPU collectives: %s failed: %s", what, cudaGetErrorString((cudaError_t)err));
}

mscclppResult_t gpu_copy_local(void* dst, const void* src, size_t bytes, void* stream) {
  return gpu_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream),
                        "the one-rank copy (cudaMemcpyAsync)");
}

/* The geometry from the parameters, rounded so every inbox and block share stays 16-aligned. */
static mscclppResult_t geometry(struct gpu_net* g, int rank, int nranks) {
  int64_t nb = param_int(PARAM_ALGO_GPU_BLOCKS), ll = param_int(PARAM_ALGO_GPU_LL_SLOT);
  int64_t bulk = param_int(PARAM_ALGO_GPU_BULK_SLOT), llb = param_int(PARAM_ALGO_GPU_LL_BLOCKS);
  if (nb < 1 || nb > 256)
    return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_ALGO_GPU_BLOCKS=%lld: need 1..256", (long long)nb);
  if (llb < 1 || llb > 1024)
    return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_ALGO_GPU_LL_BLOCKS=%lld: need 1..1024", (long long)llb);
  if (ll < 256 || bulk < 16 * nb)
    return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_ALGO_GPU_LL_SLOT=%lld / BULK_SLOT=%lld: need >= 256 / >= 16 x blocks",
                   (long long)ll, (long long)bulk);
  g->d.rank = rank;
  g->d.nranks = nranks;
  g->d.nblocks = (int)nb;
  g->d.ll_blocks = (int)llb;
  int64_t min_steps = param_int(PARAM_ALGO_GPU_BULK_MIN_STEPS);
  g->d.bulk_min_steps = min_steps < 1 ? 1 : (int)min_steps;
  /* The parameters are per-peer sizes at 2 ranks; with more ranks each peer gets its share, so
   * the scratch stays about the same size while the parts per peer shrink alike. */
  uint64_t peers = nranks > 1 ? (uint64_t)nranks - 1 : 1;
  g->d.ll_slot = (uint64_t)ll / peers & ~(uint64_t)15;
  if (g->d.ll_slot < 256) g->d.ll_slot = 256;
  g->d.ll_bytes = 2ull * (uint64_t)nranks * g->d.ll_slot;
  uint64_t bs = (uint64_t)bulk / peers / (16ull * (uint64_t)nb) * 16ull * (uint64_t)nb;
  g->d.bulk_slot = bs > 0 ? bs : 16ull * (uint64_t)nb;
  return mscclppSuccess;
}

/* Scratch (zeroed before any peer can see it), registered, and the device words. */
static mscclppResult_t alloc_local(struct gpu_net* g, struct mscclppComm* comm) {
  size_t bytes = (size_t)(gpu_meta_off(&g->d) + (uint64_t)g->d.nranks * EZC_DESC_BYTES);
  MPP_CHECK(mscclppMemAlloc((void**)&g->d.scratch, bytes, mscclppMemCuda)); /* zeroed */
  MPP_CHECK(mscclppRegisterMemory(comm, g->d.scratch, bytes, &g->scratch_reg));
  void* words = NULL;
  MPP_CHECK(gpu_cuda_check(cudaMalloc(&words, 64), "allocating the flag counter"));
  MPP_CHECK(gpu_zero_sync(words, 64));
  g->d.flag = (uint32_t*)words;
  g->d.done = (uint32_t*)words + 1;
  g->ez.hits = (uint32_t*)words + 2;
  g->ez.went = (uint32_t*)words + 3;
  size_t table = (size_t)g->d.nranks * EZC_SLOTS * sizeof(struct ezc_entry);
  MPP_CHECK(gpu_cuda_check(cudaMalloc((void**)&g->ez.table, table), "allocating the eager zero-copy table"));
  MPP_CHECK(gpu_zero_sync(g->ez.table, table));
  g->hchans = calloc((size_t)g->d.nblocks * (size_t)g->d.nranks, sizeof(mscclppMemoryChannel));
  if (g->hchans == NULL) return MPP_ERR(mscclppSystemError, "GPU collectives: out of host memory");
  return mscclppSuccess;
}

/* Swaps hellos with peer q and imports its scratch. */
static mscclppResult_t exchange(struct gpu_net* g, struct mscclppComm* comm, int q) {
  struct gpu_hello mine, theirs;
  memset(&mine, 0, sizeof(mine));
  mine.magic = GPU_HELLO_MAGIC, mine.ok = 1;
  mine.ll_slot = g->d.ll_slot, mine.bulk_slot = g->d.bulk_slot, mine.nblocks = (uint64_t)g->d.nblocks;
  size_t len = sizeof(mine.blob);
  MPP_CHECK(mscclppRegMemSerialize(g->scratch_reg, mine.blob, &len));
  mine.blob_len = len;
  MPP_CHECK(bootstrap_swap(comm->boot, q, boot_tag(BOOT_TAG_ALGO, 1), &mine, &theirs, sizeof(mine)));
  if (theirs.magic != GPU_HELLO_MAGIC || theirs.blob_len > sizeof(theirs.blob))
    return MPP_ERR(mscclppRemoteError, "GPU collectives: malformed scratch exchange from rank %d", q);
  if (theirs.ll_slot != mine.ll_slot || theirs.bulk_slot != mine.bulk_slot || theirs.nblocks != mine.nblocks)
    return MPP_ERR(mscclppInvalidUsage,
                   "GPU collectives: rank %d uses LL slot %llu, bulk slot %llu, %llu blocks; this rank %llu, %llu, %llu "
                   "(every rank must set the same MSCCLPP_ALGO_GPU_* values)",
                   q, (unsigned long long)theirs.ll_slot, (unsigned long long)theirs.bulk_slot,
                   (unsigned long long)theirs.nblocks, (unsigned long long)mine.ll_slot,
                   (unsigned long long)mine.bulk_slot, (unsigned long long)mine.nblocks);
  return mscclppRegMemDeserialize(comm, theirs.blob, theirs.blob_len, &g->peer_scratch[q]);
}

/* Connection, scratch exchange and nblocks channels with peer q (both sides in the same order). */
static mscclppResult_t connect_peer(struct gpu_net* g, struct mscclppComm* comm, int q) {
  MPP_CHECK(mscclppConnectionCreate(comm, q, GPU_CONN_TAG, mscclppTransportP2P, &g->conn[q]));
  MPP_CHECK(exchange(g, comm, q));
  for (int b = 0; b < g->d.nblocks; b++)
    MPP_CHECK(mscclppMemoryChannelCreate(comm, g->conn[q], g->peer_scratch[q], g->scratch_reg, g->d.scratch, b,
                                         &g->hchans[(size_t)b * (size_t)g->d.nranks + (size_t)q]));
  return mscclppSuccess;
}

static mscclppResult_t upload(struct gpu_net* g) {
  for (int q = 0; q < g->d.nranks; q++)
    g->d.peer_scratch[q] = q == g->d.rank ? g->d.scratch : (char*)g->hchans[q].remote;
  size_t bytes = (size_t)g->d.nblocks * (size_t)g->d.nranks * sizeof(mscclppMemoryChannel);
  MPP_CHECK(gpu_cuda_check(cudaMalloc((void**)&g->d.chans, bytes), "allocating the channels"));
  return gpu_copy_sync(g->d.chans, g->hchans, bytes);
}

/* Warns when the bulk copy kernel or a zero-copy kernel cannot hold all nblocks blocks on the
 * current GPU at once: the blocks beyond then wait for the wave before them to end (results stay
 * right). A zero-copy kernel that lost its register cap once ran 2-4x slower so, unnoticed until
 * measured. (The reducing bulk kernels keep one block per SM by choice: bulk.cu.) */
static mscclppResult_t check_residency(const struct gpu_net* g) {
  int dev = 0, sms = 0, per_sm[2] = {0, 0};
  const char* kernel[2] = {"bulk copy", "zero-copy"};
  MPP_CHECK(gpu_cuda_check(cudaGetDevice(&dev), "the current device"));
  MPP_CHECK(gpu_cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "the SM count"));
  MPP_CHECK(gpu_resident_bulk(&per_sm[0]));
  MPP_CHECK(gpu_resident_zc(&per_sm[1]));
  for (int k = 0; k < 2; k++)
    if ((int64_t)per_sm[k] * sms < g->d.nblocks)
      LOG_WARN_(LOG_SUB_ALGO,
                "GPU collectives: the %s kernel keeps %d blocks of %d threads per SM, %d on this GPU's %d SMs: "
                "MSCCLPP_ALGO_GPU_BLOCKS=%d runs in waves (slower)",
                kernel[k], per_sm[k], GPU_BULK_THREADS, per_sm[k] * sms, sms, g->d.nblocks);
  return mscclppSuccess;
}

static mscclppResult_t make(struct algo_comm* ac, struct gpu_net* g) {
  struct mscclppComm* comm = ac->comm;
  MPP_CHECK(geometry(g, ac->rank, ac->nranks));
  MPP_CHECK(alloc_local(g, comm));
  for (int q = 0; q < ac->nranks; q++)
    if (q != ac->rank) MPP_CHECK(connect_peer(g, comm, q));
  MPP_CHECK(upload(g));
  MPP_CHECK(gpu_preload_ll());
  MPP_CHECK(gpu_preload_bulk());
  MPP_CHECK(gpu_preload_zc());
  MPP_CHECK(check_residency(g));
  LOG_INFO_(LOG_SUB_ALGO, "GPU collectives: %d ranks, LL inbox %llu B, bulk inbox %llu B, %d blocks", ac->nranks,
            (unsigned long long)g->d.ll_slot, (unsigned long long)g->d.bulk_slot, g->d.nblocks);
  return mscclppSuccess;
}

mscclppResult_t gpu_net_get(struct algo_comm* ac, void* stream, struct gpu_net** out) {
  struct gpu_net* g = ac->gnet;
  if (g != NULL && !g->broken) {
    *out = g;
    return mscclppSuccess;
  }
  if (g != NULL) return MPP_ERR(mscclppInvalidUsage, "GPU collectives: setting up this communicator failed earlier");
  if (ac->nhosts > 1)
    return MPP_ERR(mscclppInvalidUsage,
                   "GPU collectives: the %d ranks are on %d hosts; this algorithm needs one host (the gpu_*_hier and "
                   "gpu_*_host algorithms serve several)", ac->nranks, ac->nhosts);
  if (ac->nranks > GPU_MAX_RANKS)
    return MPP_ERR(mscclppInvalidUsage, "GPU collectives: %d ranks; at most %d (one host) for now", ac->nranks, GPU_MAX_RANKS);
  (void)stream; /* setup enqueues nothing on it: the first call may be captured */
  g = calloc(1, sizeof(*g));
  if (g == NULL) return MPP_ERR(mscclppSystemError, "GPU collectives: out of host memory");
  g->dev = ac->comm->cuda_dev;
  ubuf_init(&g->ub, ac->comm, ac->rank, g->dev, "GPU collectives");
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  if (g->dev >= 0 && prev != g->dev) cudaSetDevice(g->dev);
  /* The first call may be being captured into a CUDA graph: relaxed mode lets this thread make
   * the driver calls a capture refuses in other modes (allocation, IPC mapping); none of them
   * touches a stream that could be capturing (fills and copies go through the setup stream). */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  mscclppResult_t res = make(ac, g);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (g->dev >= 0 && prev >= 0 && prev != g->dev) cudaSetDevice(prev);
  ac->gnet = g;
  if (res != mscclppSuccess) {
    g->broken = 1;
    return res;
  }
  *out = g;
  return mscclppSuccess;
}

void gpu_net_free(struct gpu_net* g) {
  if (g == NULL) return;
  if (g->dev >= 0) cudaSetDevice(g->dev);
  cudaDeviceSynchronize();
  gpu_ezc_report(g);
  ubuf_fini(&g->ub);
  if (g->d.chans) cudaFree(g->d.chans);
  if (g->d.flag) cudaFree(g->d.flag);
  if (g->ez.table) cudaFree(g->ez.table);
  for (int q = 0; q < GPU_MAX_RANKS; q++)
    if (g->peer_scratch[q]) mscclppRegMemRelease(g->peer_scratch[q]);
  if (g->scratch_reg) mscclppRegMemRelease(g->scratch_reg);
  if (g->d.scratch) mscclppMemFree(g->d.scratch);
  free(g->hchans);
  free(g);
}

#else /* CPU-only build: there are no GPU ranks */

mscclppResult_t gpu_net_get(struct algo_comm* ac, void* stream, struct gpu_net** out) {
  (void)ac, (void)stream, (void)out;
  return MPP_ERR(mscclppInvalidUsage, "GPU collectives: this library was built without CUDA");
}

void gpu_net_free(struct gpu_net* g) { (void)g; }

mscclppResult_t gpu_copy_local(void* dst, const void* src, size_t bytes, void* stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  return MPP_ERR(mscclppInvalidUsage, "GPU collectives: this library was built without CUDA");
}

mscclppResult_t gpu_launch_ll(const struct gpu_dev* d, const struct gx_plan* p, void* stream) {
  (void)d, (void)p, (void)stream;
  return MPP_ERR(mscclppInvalidUsage, "GPU collectives: this library was built without CUDA");
}

mscclppResult_t gpu_launch_bulk(const struct gpu_dev* d, const struct gx_plan* p, void* stream) {
  (void)d, (void)p, (void)stream;
  return MPP_ERR(mscclppInvalidUsage, "GPU collectives: this library was built without CUDA");
}

#endif
