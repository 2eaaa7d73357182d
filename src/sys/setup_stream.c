/* setup_stream.c - fills and copies that the library's setup needs done before it goes on, run on
 * a non-blocking stream of its own per device (gpu.h). The legacy default stream (cudaMemset,
 * cudaMemcpy, cudaDeviceSynchronize) waits for every blocking stream of the device: while the
 * application captures one of them into a CUDA graph, such a call breaks the capture. A
 * non-blocking stream of the library's own waits for no other, so setup done by a call that is
 * being captured (the first collective of a communicator, say) leaves the capture alone. */
#include "sys/gpu.h"

#include "sys/cudawrap.h"
#include "util/err.h"

#if MSCCLPP_HAVE_CUDA
#include <pthread.h>

#define SETUP_MAX_DEVICES 64

static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t setup_streams[SETUP_MAX_DEVICES]; /* made on first use, kept until exit */

/* The current device's setup stream, made on first use. */
static mscclppResult_t setup_stream(cudaStream_t* out) {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= SETUP_MAX_DEVICES)
    return MPP_ERR(mscclppInternalError, "setup stream: device %d beyond the %d this library keeps streams for", dev,
                   SETUP_MAX_DEVICES);
  pthread_mutex_lock(&setup_lock);
  cudaError_t e = cudaSuccess;
  if (setup_streams[dev] == NULL) e = cudaStreamCreateWithFlags(&setup_streams[dev], cudaStreamNonBlocking);
  *out = setup_streams[dev];
  pthread_mutex_unlock(&setup_lock);
  if (e != cudaSuccess) return cuda_error(e, "creating the setup stream", __FILE__, __LINE__);
  return mscclppSuccess;
}

mscclppResult_t gpu_zero_sync(void* ptr, size_t bytes) {
  cudaStream_t s;
  MPP_CHECK(setup_stream(&s));
  CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return mscclppSuccess;
}

mscclppResult_t gpu_copy_sync(void* dst, const void* src, size_t bytes) {
  cudaStream_t s;
  MPP_CHECK(setup_stream(&s));
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return mscclppSuccess;
}

#else

mscclppResult_t gpu_zero_sync(void* ptr, size_t bytes) {
  (void)ptr, (void)bytes;
  return MPP_ERR(mscclppInvalidUsage, "a GPU fill in a build without CUDA");
}

mscclppResult_t gpu_copy_sync(void* dst, const void* src, size_t bytes) {
  (void)dst, (void)src, (void)bytes;
  return MPP_ERR(mscclppInvalidUsage, "a GPU copy in a build without CUDA");
}

#endif
