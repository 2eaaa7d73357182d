/* p2p.c - the proxy's copy-engine lane for ports between GPU ranks of one host whose memory is mapped
 * here: puts are cudaMemcpyAsync on a stream of the proxy's own, signals are cuStreamWriteValue64 of
 * the peer's token on that stream (in stream order, after a memory barrier: the peer sees the token
 * only after the data copied before it), flushes poll the stream.
 *
 * Why not the connection's own write/update: the cuda-ipc connection orders each host-issued write
 * after the legacy default stream's work (cudaipc.c, after_default) and stages its token update
 * from pageable memory. Both are right for host callers, but a device-initiated write must not wait
 * for kernels - the kernel that pushed it may be waiting for it: on H200 a stream of 1000 small puts
 * blocked the proxy inside the connection's write for as long as the pushing kernel ran. The lane
 * depends on nothing but its own stream. Other transports (shm, tcp) go through the connection. */
#include <string.h>

#include "proxy/proxy.h"
#include "sys/cudawrap.h"
#include "util/err.h"
#include "util/log.h"
#include "util/timeutil.h"

#if MSCCLPP_HAVE_CUDA
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

static PFN_cuStreamWriteValue64_v11070 write_value64;
static pthread_once_t write_value64_once = PTHREAD_ONCE_INIT;

static void load_write_value64(void) {
  enum cudaDriverEntryPointQueryResult status;
  void* fn = NULL;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", &fn, 11070, cudaEnableDefault, &status) == cudaSuccess &&
      status == cudaDriverEntryPointSuccess)
    write_value64 = (PFN_cuStreamWriteValue64_v11070)fn;
  else
    (void)cudaGetLastError();
}

int p2p_available(void) {
  if (!cu_available()) return 0;
  pthread_once(&write_value64_once, load_write_value64);
  return write_value64 != NULL;
}

mscclppResult_t p2p_lane_create(int dev, void** lane) {
  int prev = ext_dev_enter(dev);
  cudaStream_t s;
  cudaError_t ce = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  ext_dev_leave(prev, dev);
  if (ce != cudaSuccess) return cuda_error(ce, "proxy: creating a copy-engine lane", __FILE__, __LINE__);
  *lane = s;
  return mscclppSuccess;
}

void p2p_lane_destroy(int dev, void* lane) {
  if (lane == NULL) return;
  int prev = ext_dev_enter(dev);
  cudaStreamSynchronize((cudaStream_t)lane);
  cudaStreamDestroy((cudaStream_t)lane);
  ext_dev_leave(prev, dev);
}

/* 1 while the driver accepts batched copies with the overlap hint; cleared at the first refusal. */
static int batch_copies_work = 1;

/* Enqueue one copy that should run on a copy engine. A plain cudaMemcpyAsync between two buffers
 * mapped into this device may run as a kernel on the SMs; with the GPU's blocks spinning on the
 * very semaphores the copy will release, such a kernel waits for free SMs (on H200, 200-byte copies
 * took 0.6 ms each with 132 spinning blocks). cudaMemcpyFlagPreferOverlapWithCompute asks for a
 * copy engine. Older drivers refuse the batch call: then the plain copy is used. */
static cudaError_t copy_on_engine(void* dst, const void* src, size_t size, cudaStream_t stream) {
  if (__atomic_load_n(&batch_copies_work, __ATOMIC_RELAXED)) {
    struct cudaMemcpyAttributes attr;
    memset(&attr, 0, sizeof(attr));
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    void* dsts[1] = {dst};
    const void* srcs[1] = {src};
    size_t sizes[1] = {size}, first[1] = {0};
    cudaError_t ce = cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, first, 1, stream);
    if (ce == cudaSuccess) return ce;
    (void)cudaGetLastError();
    __atomic_store_n(&batch_copies_work, 0, __ATOMIC_RELAXED);
    LOG_WARN_(LOG_SUB_PROXY, "proxy: cudaMemcpyBatchAsync refused (%s); plain copies from now on", cudaGetErrorString(ce));
  }
  return cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, stream);
}

mscclppResult_t p2p_put(void* lane, void* dst, const void* src, uint64_t size) {
  if (size == 0) return mscclppSuccess;
  cudaError_t ce = copy_on_engine(dst, src, (size_t)size, (cudaStream_t)lane);
  if (ce != cudaSuccess) return cuda_error(ce, "proxy: cudaMemcpyAsync of a put", __FILE__, __LINE__);
  return mscclppSuccess;
}

mscclppResult_t p2p_signal(void* lane, uint64_t* token, uint64_t value) {
  /* Default flags: a memory barrier precedes the write, so the earlier copies of the lane are
   * visible to whoever sees the value. */
  CUresult r = write_value64((CUstream)lane, (CUdeviceptr)(uintptr_t)token, value, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS) return cu_error(r, "proxy: cuStreamWriteValue64 of a signal", __FILE__, __LINE__);
  return mscclppSuccess;
}

mscclppResult_t p2p_flush(void* lane, int64_t timeout_ms) {
  uint64_t start = time_now_ns(), deadline = time_deadline_ms(timeout_ms);
  for (unsigned spins = 0;; spins++) {
    cudaError_t ce = cudaStreamQuery((cudaStream_t)lane);
    if (ce == cudaSuccess) return mscclppSuccess;
    if (ce != cudaErrorNotReady) return cuda_error(ce, "proxy: cudaStreamQuery of a flush", __FILE__, __LINE__);
    uint64_t now = time_now_ns();
    if (now >= deadline)
      return MPP_ERR(mscclppTimeout, "proxy: copies not done within %lld ms", (long long)timeout_ms);
    /* Spin for the first 50 us (short copies), then give the CPU away between queries. */
    if (now - start > 50000) sched_yield();
  }
}

#else

int p2p_available(void) { return 0; }
mscclppResult_t p2p_lane_create(int dev, void** lane) {
  (void)dev;
  *lane = NULL;
  return MPP_ERR(mscclppInvalidUsage, "proxy: copy-engine lanes need CUDA");
}
void p2p_lane_destroy(int dev, void* lane) {
  (void)dev;
  (void)lane;
}
mscclppResult_t p2p_put(void* lane, void* dst, const void* src, uint64_t size) {
  (void)lane, (void)dst, (void)src, (void)size;
  return MPP_ERR(mscclppInvalidUsage, "proxy: copy-engine lanes need CUDA");
}
mscclppResult_t p2p_signal(void* lane, uint64_t* token, uint64_t value) {
  (void)lane, (void)token, (void)value;
  return MPP_ERR(mscclppInvalidUsage, "proxy: copy-engine lanes need CUDA");
}
mscclppResult_t p2p_flush(void* lane, int64_t timeout_ms) {
  (void)lane, (void)timeout_ms;
  return MPP_ERR(mscclppInvalidUsage, "proxy: copy-engine lanes need CUDA");
}

#endif
