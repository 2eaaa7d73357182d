/* gpu_rank.h - the start of the C GPU tests (coll_gpu.c, exec_gpu.c): one GPU per local rank.
 * Exits 77 (skipped) without a usable GPU or with fewer GPUs than local ranks; otherwise selects
 * this rank's GPU, makes a non-blocking stream and a GPU-rank communicator from the launcher's
 * environment. Host C; include after <cuda_runtime.h> and helpers.h. */
#ifndef MPP_TESTS_GPU_RANK_H_
#define MPP_TESTS_GPU_RANK_H_

#include <stdlib.h>

/* This process's rank once gpu_rank_init made the communicator (-1 before), for messages. */
static int gpu_rank_me = -1;

/* A CUDA runtime call that must succeed. */
#define CUDA_OK(call)                                                                                       \
  do {                                                                                                      \
    cudaError_t e_ = (call);                                                                                \
    if (e_ != cudaSuccess) TEST_FAIL("rank %d: %s failed: %s", gpu_rank_me, #call, cudaGetErrorString(e_)); \
  } while (0)

static inline int gpu_rank_env_int(const char* name, int def) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : def;
}

static inline void gpu_rank_init(mscclppComm_t* comm, int* rank, int* n, cudaStream_t* stream) {
  int local = gpu_rank_env_int("MSCCLPP_LOCAL_RANK", 0), ndev = 0;
  int local_size = gpu_rank_env_int("MSCCLPP_LOCAL_WORLD_SIZE", 1);
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) TEST_SKIP("no usable GPU");
  /* MSCCLPP_TEST_SHARE_GPUS=1: ranks may share GPUs (correctness only, on machines with fewer
   * GPUs than ranks; without MPS the GPU time-slices their kernels, so waits are slow). */
  if (ndev < local_size && !gpu_rank_env_int("MSCCLPP_TEST_SHARE_GPUS", 0))
    TEST_SKIP("%d GPU(s) for %d local ranks", ndev, local_size);
  cudaError_t e = cudaSetDevice(local % ndev);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) TEST_FAIL("local rank %d: selecting GPU %d: %s", local, local % ndev, cudaGetErrorString(e));
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = mscclppRankGpu;
  cfg.cudaDevice = local % ndev;
  cfg.bootstrapTimeoutMs = 60000;
  CHECK_OK(mscclppCommInitFromEnv(comm, &cfg));
  CHECK_OK(mscclppCommRank(*comm, rank));
  CHECK_OK(mscclppCommSize(*comm, n));
  gpu_rank_me = *rank;
}

#endif /* MPP_TESTS_GPU_RANK_H_ */
