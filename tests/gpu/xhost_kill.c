/* xhost_kill.c - a rank dies among GPU ranks on 2 stand-in hosts (MSCCLPP_HOSTID: ranks 0..n/2-1 and
 * the rest; src/algo/gpu/xhost.h): after a few correct allreduces (hierarchical: NVLink inside a
 * host, rails between), rank n/2 (host 1's first) exits. Every survivor's calls then fail, each
 * within XK_FAIL_S seconds, naming it (never a hang, never a silent success with data that never
 * came: the calls check the communicator's and its children's liveness and device-wait record). Survivors exit without the
 * orderly teardown, as an application would after such an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mscclpp/mscclpp.h>

#include "helpers.h"

#if !MSCCLPP_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else
#include <cuda_runtime.h>

#include "gpu/gpu_rank.h"

#define XK_COUNT (1u << 18) /* floats: 1 MiB, past the LL sizes */
#define XK_BOUND_S 30.0     /* how long the survivors keep calling */
#define XK_FAIL_S 15.0      /* MSCCLPP_DEVICE_WAIT_TIMEOUT (test: 5 s), the liveness checks, and slack */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One allreduce and a wait for it: the call's own result, else the next call's (a failed host step
 * or kernel is reported by the call after it). */
static mscclppResult_t step(mscclppComm_t comm, float* d, cudaStream_t stream) {
  mscclppResult_t r = mscclppAllReduce(d, d, XK_COUNT, mscclppFloat, mscclppSum, comm, stream);
  if (r != mscclppSuccess) return r;
  return cudaStreamSynchronize(stream) == cudaSuccess ? mscclppSuccess : mscclppUnhandledCudaError;
}

int main(void) {
  int r0 = gpu_rank_env_int("MSCCLPP_RANK", 0), n0 = gpu_rank_env_int("MSCCLPP_WORLD_SIZE", 1);
  char id[32];
  snprintf(id, sizeof(id), "xk-host-%d", r0 * 2 / (n0 > 1 ? n0 : 1));
  setenv("MSCCLPP_HOSTID", id, 1);
  mscclppComm_t comm;
  int rank, n;
  cudaStream_t stream;
  gpu_rank_init(&comm, &rank, &n, &stream);
  if (n < 4 || n % 2) TEST_SKIP("needs an even number of ranks, at least 4 (2 hosts of 2+)");
  float* d;
  CUDA_OK(cudaMalloc((void**)&d, XK_COUNT * sizeof(float)));
  CUDA_OK(cudaMemset(d, 0, XK_COUNT * sizeof(float)));
  for (int i = 0; i < 3; i++) CHECK_OK(step(comm, d, stream)); /* children and pipes made */
  CHECK_OK(mscclppBootstrapBarrier(comm));
  int dead = n / 2;
  if (rank == dead) _exit(0);
  double t0 = now_s();
  mscclppResult_t res = mscclppSuccess;
  int calls = 0;
  while (res == mscclppSuccess && now_s() - t0 < XK_BOUND_S) res = step(comm, d, stream), calls++;
  double took = now_s() - t0;
  char msg[1024];
  snprintf(msg, sizeof(msg), "%s", mscclppGetLastError());
  printf("rank %d: failed after %.2f s and %d calls: %s\n", rank, took, calls, msg);
  CHECK_MSG(res != mscclppSuccess, "rank %d: still succeeding %.0f s after rank %d exited", rank, took, dead);
  CHECK_MSG(took < XK_FAIL_S, "rank %d: the failure came %.1f s after rank %d exited", rank, took, dead);
  char name[32];
  snprintf(name, sizeof(name), "rank %d", dead);
  CHECK_MSG(strstr(msg, name) != NULL, "rank %d: the error does not name rank %d: %s", rank, dead, msg);
  fflush(stdout);
  _exit(0);
}
#endif
