/* collectives_demo: the main job (`make demo`). Every rank bootstraps from the launcher's
 * environment (GPU ranks when this host has a GPU per local rank, CPU ranks otherwise), runs
 * allreduce, allgather and reducescatter of floats at a few sizes, checks every element exactly
 * (inputs are small integers, so every sum is exact in any order), times each call and rank 0
 * prints a short table. Uses only the public API.
 *
 *   mscclpp-run -n 4 example_collectives_demo [bytes...]      (default 4 KiB, 1 MiB, 16 MiB)
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mscclpp/mscclpp.h>
#if MSCCLPP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define OK(call)                                                                                              \
  do {                                                                                                        \
    mscclppResult_t r_ = (call);                                                                              \
    if (r_ != mscclppSuccess) {                                                                               \
      fprintf(stderr, "collectives_demo: %s failed: %s: %s\n", #call, mscclppGetErrorString(r_), mscclppGetLastError()); \
      exit(1);                                                                                                \
    }                                                                                                         \
  } while (0)

enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, NCOLL };
static const char* const coll_names[NCOLL] = {"allreduce", "allgather", "reducescatter"};

struct demo {
  mscclppComm_t comm;
  int rank, n, gpu;
  void* stream;
  float *send, *recv, *host; /* send/recv: rank buffers (device memory on GPU ranks) */
  size_t cap;                /* floats per buffer */
};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Element i of rank r's input: a small integer, so sums over ranks are exact floats. */
static float input_of(int r, size_t i) { return (float)((r + 1) * (int)(i % 251 + 1)); }

/* GPU ranks when CUDA is built in and this host has at least one GPU per local rank. */
static mscclppRankKind_t pick_kind(void) {
#if MSCCLPP_HAVE_CUDA
  const char* ls = getenv("MSCCLPP_LOCAL_WORLD_SIZE");
  int local = ls ? atoi(ls) : 1, ndev = 0;
  if (cudaGetDeviceCount(&ndev) == cudaSuccess && ndev >= local && ndev > 0) return mscclppRankGpu;
  (void)cudaGetLastError();
#endif
  return mscclppRankCpu;
}

static void copy_in(struct demo* d, void* dst, const void* src, size_t bytes) {
#if MSCCLPP_HAVE_CUDA
  if (d->gpu) {
    if (cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) exit(1);
    return;
  }
#endif
  (void)d;
  memcpy(dst, src, bytes);
}

static void copy_out(struct demo* d, void* dst, const void* src, size_t bytes) {
#if MSCCLPP_HAVE_CUDA
  if (d->gpu) {
    if (cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) exit(1);
    return;
  }
#endif
  (void)d;
  memcpy(dst, src, bytes);
}

static void wait_done(struct demo* d) {
#if MSCCLPP_HAVE_CUDA
  if (d->gpu && cudaStreamSynchronize((cudaStream_t)d->stream) != cudaSuccess) exit(1);
#endif
  (void)d;
}

/* One call of collective c with `count` floats per rank part (allreduce: the whole message). */
static void call(struct demo* d, int c, size_t count) {
  switch (c) {
    case ALLREDUCE: OK(mscclppAllReduce(d->send, d->recv, count, mscclppFloat, mscclppSum, d->comm, d->stream)); break;
    case ALLGATHER: OK(mscclppAllGather(d->send, d->recv, count, mscclppFloat, d->comm, d->stream)); break;
    default: OK(mscclppReduceScatter(d->send, d->recv, count, mscclppFloat, mscclppSum, d->comm, d->stream)); break;
  }
}

/* Fills this rank's input for collective c, runs it once and returns the wrong elements. */
static size_t run_checked(struct demo* d, int c, size_t count) {
  size_t in = c == REDUCESCATTER ? count * (size_t)d->n : count, out = c == ALLGATHER ? count * (size_t)d->n : count;
  size_t base = c == REDUCESCATTER ? (size_t)d->rank * count : 0; /* reducescatter: our block's offset */
  for (size_t i = 0; i < in; i++) d->host[i] = input_of(d->rank, i);
  copy_in(d, d->send, d->host, in * sizeof(float));
  call(d, c, count);
  wait_done(d);
  copy_out(d, d->host, d->recv, out * sizeof(float));
  size_t wrong = 0;
  float ranks_sum = (float)(d->n * (d->n + 1) / 2);
  for (size_t i = 0; i < out; i++) {
    float want = c == ALLGATHER ? input_of((int)(i / count), i % count) : ranks_sum * (float)((base + i) % 251 + 1);
    wrong += d->host[i] != want;
  }
  return wrong;
}

/* Average microseconds per call over iters calls (after a barrier; the slowest rank's view is
 * what the others wait for, so each rank's own average is a fair figure). */
static double time_calls(struct demo* d, int c, size_t count, int iters) {
  OK(mscclppBootstrapBarrier(d->comm));
  double t0 = now_us();
  for (int i = 0; i < iters; i++) call(d, c, count);
  wait_done(d);
  return (now_us() - t0) / iters;
}

static void setup(struct demo* d, size_t max_bytes) {
  mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
  cfg.rankKind = pick_kind();
  OK(mscclppCommInitFromEnv(&d->comm, &cfg));
  OK(mscclppCommRank(d->comm, &d->rank));
  OK(mscclppCommSize(d->comm, &d->n));
  d->gpu = cfg.rankKind == mscclppRankGpu;
  d->cap = max_bytes / sizeof(float) * (size_t)d->n;
  OK(mscclppMemAlloc((void**)&d->send, d->cap * sizeof(float), d->gpu ? mscclppMemCuda : mscclppMemHost));
  OK(mscclppMemAlloc((void**)&d->recv, d->cap * sizeof(float), d->gpu ? mscclppMemCuda : mscclppMemHost));
  d->host = malloc(d->cap * sizeof(float));
  if (d->host == NULL) exit(1);
#if MSCCLPP_HAVE_CUDA
  if (d->gpu && cudaStreamCreateWithFlags((cudaStream_t*)&d->stream, cudaStreamNonBlocking) != cudaSuccess) exit(1);
#endif
}

int main(int argc, char** argv) {
  size_t sizes[16] = {4096, 1 << 20, 16 << 20};
  int nsizes = 3;
  if (argc > 1) nsizes = 0;
  for (int i = 1; i < argc && nsizes < 16; i++) sizes[nsizes++] = strtoull(argv[i], NULL, 0) / 4 * 4;
  size_t max_bytes = 4;
  for (int i = 0; i < nsizes; i++) max_bytes = sizes[i] > max_bytes ? sizes[i] : max_bytes;
  struct demo d;
  memset(&d, 0, sizeof(d));
  setup(&d, max_bytes);
  if (d.rank == 0)
    printf("collectives_demo: %d %s ranks, float sum\n%-14s %10s %10s %10s  %s\n", d.n, d.gpu ? "GPU" : "CPU",
           "collective", "bytes", "us/call", "busbw GB/s", "check");
  int failed = 0;
  for (int c = 0; c < NCOLL; c++)
    for (int s = 0; s < nsizes; s++) {
      size_t bytes = sizes[s] < 4 * (size_t)d.n ? 4 * (size_t)d.n : sizes[s]; /* message as nccl-tests counts it */
      size_t count = c == ALLREDUCE ? bytes / 4 : bytes / 4 / (size_t)d.n;
      size_t wrong = run_checked(&d, c, count);
      double us = time_calls(&d, c, count, d.gpu ? 20 : 5);
      double factor = c == ALLREDUCE ? 2.0 * (d.n - 1) / d.n : (double)(d.n - 1) / d.n;
      failed |= wrong != 0;
      if (d.rank == 0)
        printf("%-14s %10zu %10.1f %10.2f  %s\n", coll_names[c], count * 4 * (c == ALLREDUCE ? 1 : (size_t)d.n), us,
               (double)count * 4 * (c == ALLREDUCE ? 1 : d.n) / us / 1e3 * factor, wrong ? "WRONG" : "ok");
      if (wrong) fprintf(stderr, "collectives_demo: rank %d: %s of %zu bytes: %zu wrong elements\n", d.rank,
                         coll_names[c], bytes, wrong);
    }
  OK(mscclppBootstrapBarrier(d.comm));
  if (d.rank == 0) printf("collectives_demo: %s\n", failed ? "WRONG RESULTS" : "all results verified");
  mscclppMemFree(d.send);
  mscclppMemFree(d.recv);
  free(d.host);
  OK(mscclppCommDestroy(d.comm));
  return failed;
}
