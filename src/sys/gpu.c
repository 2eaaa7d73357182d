/* gpu.c - device queries through the CUDA runtime (see gpu.h). */
#include "sys/gpu.h"

#include <stdio.h>

#include "sys/cudawrap.h"
#include "util/err.h"

#if MSCCLPP_HAVE_CUDA

int gpu_count(void) {
  if (!cu_available()) return 0;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

mscclppResult_t gpu_current_device(int* dev) {
  if (!cu_available()) return MPP_ERR(mscclppInvalidUsage, "no CUDA device is usable in this process");
  CUDA_CHECK(cudaGetDevice(dev));
  return mscclppSuccess;
}

mscclppResult_t gpu_set_device(int dev) {
  if (dev < 0 || dev >= gpu_count())
    return MPP_ERR(mscclppInvalidArgument, "CUDA device %d does not exist (%d visible)", dev, gpu_count());
  CUDA_CHECK(cudaSetDevice(dev));
  return mscclppSuccess;
}

mscclppResult_t gpu_bus_id(int dev, char* buf, size_t len) {
  CUDA_CHECK(cudaDeviceGetPCIBusId(buf, (int)len, dev));
  return mscclppSuccess;
}

mscclppResult_t gpu_name(int dev, char* buf, size_t len) {
  struct cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  snprintf(buf, len, "%s", prop.name);
  return mscclppSuccess;
}

#else

int gpu_count(void) { return 0; }

mscclppResult_t gpu_current_device(int* dev) {
  *dev = -1;
  return MPP_ERR(mscclppInvalidUsage, "this library was built without CUDA");
}

mscclppResult_t gpu_set_device(int dev) {
  return MPP_ERR(mscclppInvalidUsage, "cannot use CUDA device %d: this library was built without CUDA", dev);
}

mscclppResult_t gpu_bus_id(int dev, char* buf, size_t len) {
  (void)dev;
  if (len) buf[0] = '\0';
  return MPP_ERR(mscclppInvalidUsage, "this library was built without CUDA");
}

mscclppResult_t gpu_name(int dev, char* buf, size_t len) {
  return gpu_bus_id(dev, buf, len);
}

#endif
