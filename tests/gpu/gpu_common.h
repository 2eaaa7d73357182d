/* gpu_common.h - what the GPU tests (and mscclpp-primbench) share: a GPU-rank communicator with one
 * device per local rank (77 = skipped when there are fewer GPUs than local ranks, or none), a source
 * and a scratch buffer per rank in shareable device memory, connections to every peer and every
 * peer's scratch imported, byte patterns both sides compute on the GPU, and timing helpers.
 * CUDA C++ (included by .cu files only). */
#ifndef MPP_TESTS_GPU_GPU_COMMON_H_
#define MPP_TESTS_GPU_GPU_COMMON_H_

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mscclpp/mscclpp.h>

#include "helpers.h"

#define GT_MAX_RANKS 16

#define CUDA_OK(call)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) TEST_FAIL("%s: CUDA error %d (%s)", #call, (int)e_, cudaGetErrorString(e_)); \
  } while (0)

/* Every test kernel runs on this non-blocking stream (GT_LEGACY_STREAM=1: the legacy default
 * stream). Kernels that wait for host-issued connection writes must not run on the legacy stream:
 * the cuda-ipc transport orders every host write after the legacy stream's work. The proxy does
 * not use those writes (src/proxy/p2p.c), so port channels work from either. */
static cudaStream_t gt_stream;

/* Waits for the test stream (what the blocking cudaMemcpy/cudaMemset on the legacy stream do not). */
static inline cudaError_t gt_sync(void) { return cudaStreamSynchronize(gt_stream); }
/* cudaMemcpy after the test stream's work. */
static inline cudaError_t gt_memcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  cudaError_t e = cudaStreamSynchronize(gt_stream);
  return e != cudaSuccess ? e : cudaMemcpy(dst, src, n, kind);
}

/* The proxy's copy-engine put (src/proxy/p2p.c, in the static library every GPU test links): n
 * bytes from src to dst on stream `lane`, asked of a copy engine (a plain copy between buffers mapped
 * into this device may run as a kernel on the SMs); plain cudaMemcpyAsync where the driver refuses. */
extern "C" mscclppResult_t p2p_put(void* lane, void* dst, const void* src, uint64_t size);

/* Enqueues n bytes from src to dst on stream s the way the proxy's port-channel puts go (dst and
 * src: this device's memory or a peer's mapped here). */
static inline cudaError_t gt_copy_ce(void* dst, const void* src, size_t n, cudaStream_t s) {
  return p2p_put((void*)s, dst, src, (uint64_t)n) == mscclppSuccess ? cudaSuccess : cudaErrorUnknown;
}

struct gt_ctx {
  mscclppComm_t comm;
  int rank, nranks, dev;
  size_t bytes;
  char* src;      /* device memory, registered */
  char* scratch;  /* device memory, registered; peers put into it */
  mscclppRegMem_t src_reg, scratch_reg;
  mscclppConnection_t conn[GT_MAX_RANKS];
  mscclppRegMem_t peer_scratch[GT_MAX_RANKS]; /* peers' scratch, imported and mapped here */
};

static inline int gt_env_int(const char* name, int def) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : def;
}

/* GT_NET=1: every rank is its own stand-in host (MSCCLPP_HOSTID from MSCCLPP_RANK, set before the
 * library reads its parameters) and gt_setup connects over the net transport (libfabric; needs
 * MSCCLPP_NET_TRANSPORT=on) instead of P2P. */
static inline int gt_net(void) { return gt_env_int("GT_NET", 0) != 0; }

static inline void gt_stand_in_host(void) {
  char id[64];
  snprintf(id, sizeof(id), "gpu-host-%s", getenv("MSCCLPP_RANK") ? getenv("MSCCLPP_RANK") : "0");
  setenv("MSCCLPP_HOSTID", id, 1);
}

/* Picks this rank's GPU (local rank modulo the device count) or exits 77; makes the communicator. */
static inline void gt_init(struct gt_ctx* c) {
  memset(c, 0, sizeof(*c));
  if (gt_net()) gt_stand_in_host();
  int local = gt_env_int("MSCCLPP_LOCAL_RANK", 0), local_size = gt_env_int("MSCCLPP_LOCAL_WORLD_SIZE", 1);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) TEST_SKIP("no usable GPU");
  if (ndev < local_size && !gt_env_int("MSCCLPP_TEST_SHARE_GPUS", 0)) /* see gpu_rank.h */
    TEST_SKIP("%d GPU(s) for %d local ranks", ndev, local_size);
  c->dev = local % ndev;
  CUDA_OK(cudaSetDevice(c->dev));
  CUDA_OK(cudaStreamCreateWithFlags(&gt_stream, cudaStreamNonBlocking));
  if (getenv("GT_LEGACY_STREAM")) gt_stream = cudaStreamLegacy; /* to check kernels on the legacy stream */
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = mscclppRankGpu;
  cfg.cudaDevice = c->dev;
  cfg.bootstrapTimeoutMs = 60000;
  CHECK_OK(mscclppCommInitFromEnv(&c->comm, &cfg));
  CHECK_OK(mscclppCommRank(c->comm, &c->rank));
  CHECK_OK(mscclppCommSize(c->comm, &c->nranks));
  CHECK_MSG(c->nranks <= GT_MAX_RANKS, "at most %d ranks", GT_MAX_RANKS);
}

/* Swaps a registration's blob with peer (lower rank first) and imports the peer's. */
static inline mscclppRegMem_t gt_swap(struct gt_ctx* c, int peer, mscclppRegMem_t mine) {
  unsigned char out[MSCCLPP_REGMEM_BLOB_BYTES], in[MSCCLPP_REGMEM_BLOB_BYTES];
  size_t len = sizeof(out);
  memset(out, 0, sizeof(out));
  CHECK_OK(mscclppRegMemSerialize(mine, out, &len));
  if (c->rank < peer) {
    CHECK_OK(mscclppBootstrapSend(c->comm, peer, 100, out, sizeof(out)));
    CHECK_OK(mscclppBootstrapRecv(c->comm, peer, 100, in, sizeof(in)));
  } else {
    CHECK_OK(mscclppBootstrapRecv(c->comm, peer, 100, in, sizeof(in)));
    CHECK_OK(mscclppBootstrapSend(c->comm, peer, 100, out, sizeof(out)));
  }
  mscclppRegMem_t theirs = NULL;
  CHECK_OK(mscclppRegMemDeserialize(c->comm, in, len, &theirs));
  return theirs;
}

/* Buffers of `bytes` each, connections to every peer (ascending, so every pair meets in the same
 * order) and the peers' scratch imported. */
static inline void gt_setup(struct gt_ctx* c, size_t bytes) {
  c->bytes = bytes;
  CHECK_OK(mscclppMemAlloc((void**)&c->src, bytes, mscclppMemCuda));
  CHECK_OK(mscclppMemAlloc((void**)&c->scratch, bytes, mscclppMemCuda));
  CHECK_OK(mscclppRegisterMemory(c->comm, c->src, bytes, &c->src_reg));
  CHECK_OK(mscclppRegisterMemory(c->comm, c->scratch, bytes, &c->scratch_reg));
  for (int p = 0; p < c->nranks; p++) {
    if (p == c->rank) continue;
    mscclppTransport_t want = gt_net() ? mscclppTransportNet : mscclppTransportP2P, t;
    mscclppResult_t r = mscclppConnectionCreate(c->comm, p, 0, gt_net() ? want : mscclppTransportAuto, &c->conn[p]);
    /* a provider the test names (shm, for FI_HMEM) that cannot carry the transport here: skipped,
     * on both sides alike */
    if (r == mscclppInvalidUsage && gt_net() && getenv("MSCCLPP_NET_PROVIDER") != NULL)
      TEST_SKIP("rank %d: %s", c->rank, mscclppGetLastError());
    CHECK_OK(r);
    CHECK_OK(mscclppConnectionTransport(c->conn[p], &t));
    CHECK_MSG(t == want, "rank %d: the connection to rank %d is transport %d, not %d", c->rank, p, (int)t, (int)want);
    c->peer_scratch[p] = gt_swap(c, p, c->scratch_reg);
  }
}

static inline void gt_teardown(struct gt_ctx* c) {
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppBootstrapBarrier(c->comm));
  CHECK_OK(mscclppCommReleaseChannels(c->comm));
  for (int p = 0; p < c->nranks; p++) {
    if (c->peer_scratch[p]) CHECK_OK(mscclppRegMemRelease(c->peer_scratch[p]));
  }
  CHECK_OK(mscclppBootstrapBarrier(c->comm)); /* nobody maps our memory any more */
  for (int p = 0; p < c->nranks; p++)
    if (c->conn[p]) CHECK_OK(mscclppConnectionDestroy(c->conn[p]));
  CHECK_OK(mscclppRegMemRelease(c->src_reg));
  CHECK_OK(mscclppRegMemRelease(c->scratch_reg));
  CHECK_OK(mscclppMemFree(c->src));
  CHECK_OK(mscclppMemFree(c->scratch));
  CHECK_OK(mscclppCommDestroy(c->comm));
}

/* Copies n handles to fresh device memory. */
template <typename T>
static inline T* gt_to_device(const T* h, int n) {
  T* d = NULL;
  CUDA_OK(cudaMalloc((void**)&d, sizeof(T) * (size_t)(n > 0 ? n : 1)));
  CUDA_OK(gt_memcpy(d, h, sizeof(T) * (size_t)n, cudaMemcpyHostToDevice));
  return d;
}

/* The byte rank `from` writes at index i under `tag`: both sides compute it on the GPU. */
__host__ __device__ static inline unsigned char gt_byte(int tag, int from, uint64_t i) {
  uint64_t x = (uint64_t)tag * 1000003u + (uint64_t)from * 7919u + i * 2654435761u;
  return (unsigned char)(x ^ (x >> 13) ^ (x >> 29));
}

__global__ static void gt_fill(char* p, uint64_t n, int tag, int from) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = (char)gt_byte(tag, from, i);
}

/* Counts bytes of p[0, n) that differ from the pattern of (tag, from) at index base + i. */
__global__ static void gt_verify(const char* p, uint64_t n, uint64_t base, int tag, int from, unsigned long long* bad) {
  unsigned long long mine = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    mine += (unsigned char)p[i] != gt_byte(tag, from, base + i);
  if (mine) atomicAdd(bad, mine);
}

/* Host wrapper: number of wrong bytes. */
static inline unsigned long long gt_count_bad(const char* p, uint64_t n, uint64_t base, int tag, int from) {
  unsigned long long* d = NULL;
  unsigned long long h = 0;
  CUDA_OK(cudaMalloc((void**)&d, sizeof(*d)));
  CUDA_OK(cudaMemsetAsync(d, 0, sizeof(*d), gt_stream));
  gt_verify<<<264, 256, 0, gt_stream>>>(p, n, base, tag, from, d);
  CUDA_OK(gt_memcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaFree(d));
  return h;
}

/* Fails with the rank's device-error record when a kernel reported a failed wait. */
static inline void gt_check_rc(struct gt_ctx* c, const int* d_rc, int n, const char* what) {
  int h[256];
  CHECK(n <= 256);
  CUDA_OK(gt_memcpy(h, d_rc, sizeof(int) * (size_t)n, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; i++) {
    if (h[i] == MSCCLPP_DEVICE_OK) continue;
    mscclppDeviceError e;
    char text[256] = "";
    CHECK_OK(mscclppCommGetDeviceError(c->comm, &e));
    CHECK_OK(mscclppDeviceErrorString(&e, text, sizeof(text)));
    TEST_FAIL("rank %d, %s: device status %d at %d: %s", c->rank, what, h[i], i, text);
  }
}

static inline int gt_cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
static inline double gt_median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), gt_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Device clock in ns. */
__device__ static inline uint64_t gt_ns(void) { return mscclppNowNs(); }

#endif /* MPP_TESTS_GPU_GPU_COMMON_H_ */
