/* The seed API on GPU ranks with cudaMalloc buffers (legacy CUDA IPC): mscclppConnect to every
 * peer, mscclppConnectionSetup, mscclppProxyLaunch, kernels using the device connections through
 * the member-style wrappers (put, signal, putWithSignal, putWithSignalAndFlush, flush, wait),
 * mscclppRegisteredBufferWrite on a stream, mscclppProxyStop. 77 without enough GPUs. */
#include "gpu_common.h"

#define SLOT (1u << 20)

/* Block i serves connection i: writes this rank's slot of the peer's buffer, then waits for the
 * peer's write into ours. */
__global__ void k_exchange(const mscclppDevConn* conns, int rank, int mode, int* rc) {
  if (threadIdx.x != 0) return;
  const mscclppDevConn& c = conns[blockIdx.x];
  uint64_t slot = (uint64_t)rank * SLOT;
  int r;
  if (mode == 0) {
    r = c.put(slot, SLOT / 2);
    if (r == MSCCLPP_DEVICE_OK) r = c.put(slot + SLOT / 2, slot + SLOT / 2, SLOT / 2);
    if (r == MSCCLPP_DEVICE_OK) r = c.signal();
    if (r == MSCCLPP_DEVICE_OK) r = c.flush();
  } else if (mode == 1) {
    r = c.putWithSignal(slot, SLOT);
    if (r == MSCCLPP_DEVICE_OK) r = c.flush();
  } else {
    r = c.putWithSignalAndFlush(slot, slot, SLOT);
  }
  if (r == MSCCLPP_DEVICE_OK) r = c.wait();
  rc[blockIdx.x] = r;
}

int main(void) {
  struct gt_ctx c;
  gt_init(&c);
  char* buf = NULL;
  size_t bytes = (size_t)c.nranks * SLOT;
  CUDA_OK(cudaMalloc((void**)&buf, bytes));
  for (int p = 0; p < c.nranks; p++)
    if (p != c.rank) CHECK_OK(mscclppConnect(c.comm, p, 5, buf, bytes, mscclppTransportP2P, NULL));
  CHECK_OK(mscclppConnectionSetup(c.comm));
  mscclppDevConn_t* conns = NULL;
  int n = 0;
  CHECK_OK(mscclppGetAllDeviceConnections(c.comm, &conns, &n));
  CHECK(n == c.nranks - 1);
  for (int i = 0; i < n; i++) CHECK(conns[i].remoteBuff != NULL && conns[i].localBuff == buf);
  mscclppDevConn* d_conns = gt_to_device(conns, n);
  int* d_rc = NULL;
  CUDA_OK(cudaMalloc((void**)&d_rc, sizeof(int) * GT_MAX_RANKS));
  CHECK_OK(mscclppProxyLaunch(c.comm));
  for (int mode = 0; mode < 3; mode++) {
    int tag = 40 + mode;
    CUDA_OK(cudaMemsetAsync(buf, 0, bytes, gt_stream));
    gt_fill<<<64, 256, 0, gt_stream>>>(buf + (uint64_t)c.rank * SLOT, SLOT, tag, c.rank);
    CUDA_OK(gt_sync());
    CHECK_OK(mscclppBootstrapBarrier(c.comm));
    k_exchange<<<n, 32, 0, gt_stream>>>(d_conns, c.rank, mode, d_rc);
    CUDA_OK(gt_sync());
    gt_check_rc(&c, d_rc, n, "device connection exchange");
    for (int p = 0; p < c.nranks; p++) {
      if (p == c.rank) continue;
      unsigned long long bad = gt_count_bad(buf + (uint64_t)p * SLOT, SLOT, 0, tag, p);
      CHECK_MSG(bad == 0, "mode %d: rank %d's slot has %llu wrong bytes", mode, p, bad);
    }
    CHECK_OK(mscclppBootstrapBarrier(c.comm));
  }
  CHECK_OK(mscclppProxyStop(c.comm));

  /* mscclppRegisteredBufferWrite: every rank writes its 4 KiB into every peer's buffer. */
  char *rb = NULL, *src = NULL;
  CUDA_OK(cudaMalloc((void**)&rb, 4096 * (size_t)c.nranks));
  CUDA_OK(cudaMalloc((void**)&src, 4096));
  CUDA_OK(cudaMemsetAsync(rb, 0, 4096 * (size_t)c.nranks, gt_stream));
  gt_fill<<<4, 256, 0, gt_stream>>>(src, 4096, 7, c.rank);
  mscclppRegisteredMemory reg;
  CHECK_OK(mscclppRegisterBuffer(c.comm, rb, 4096 * (size_t)c.nranks, &reg));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(gt_sync());
  CHECK_OK(mscclppRegisteredBufferWrite(c.comm, &reg, src, 4096, 0, (uint64_t)c.rank * 4096, (int64_t)(intptr_t)s));
  CUDA_OK(cudaStreamSynchronize(s));
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  for (int p = 0; p < c.nranks; p++)
    if (p != c.rank) CHECK_MSG(gt_count_bad(rb + (size_t)p * 4096, 4096, 0, 7, p) == 0, "buffer write from rank %d", p);
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  CHECK_OK(mscclppRegisteredMemoryRelease(&reg));
  CUDA_OK(cudaStreamDestroy(s));
  CHECK_OK(mscclppCommReleaseChannels(c.comm));
  CHECK_OK(mscclppBootstrapBarrier(c.comm));
  CUDA_OK(cudaFree(rb));
  CUDA_OK(cudaFree(src));
  CUDA_OK(cudaFree(buf));
  CUDA_OK(cudaFree(d_conns));
  CUDA_OK(cudaFree(d_rc));
  CHECK_OK(mscclppCommDestroy(c.comm));
  if (c.rank == 0) printf("gpu_devconn: %d ranks ok\n", c.nranks);
  return 0;
}
