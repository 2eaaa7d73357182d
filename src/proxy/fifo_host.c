/* fifo_host.c - memory of proxy FIFOs (see fifo_host.h). */
#include "proxy/fifo_host.h"

#include <stdlib.h>
#include <string.h>

#include "channel/ext.h"
#include "sys/cudawrap.h"
#include "sys/gpu.h"
#include "util/err.h"

static mscclppResult_t host_init(struct fifo_host* f, uint64_t start) {
  /* aligned_alloc needs a size that is a multiple of the alignment (2 slots are 32 bytes). */
  size_t bytes = ((size_t)f->size * sizeof(mscclppTrigger) + 63) / 64 * 64;
  f->triggers = aligned_alloc(64, bytes);
  f->head = aligned_alloc(64, 128);
  f->tail = aligned_alloc(64, 128);
  if (f->triggers == NULL || f->head == NULL || f->tail == NULL)
    return MPP_ERR(mscclppSystemError, "proxy FIFO: out of host memory for %u slots", f->size);
  memset(f->triggers, 0, bytes);
  *f->head = start;
  *f->tail = start;
  f->triggers_dev = f->triggers;
  f->tail_dev = f->tail;
  f->tail_cache = f->tail;
  return mscclppSuccess;
}

#if MSCCLPP_HAVE_CUDA
/* Triggers and tail in one host-pinned block mapped into the device (the proxy polls and stores
 * into its own RAM; the GPU writes triggers and reads the tail over PCIe); head and tail cache in
 * device memory, each on its own 128-byte line (the head takes every producer's atomics). */
static mscclppResult_t gpu_init(struct fifo_host* f, uint64_t start) {
  size_t trig = (size_t)f->size * sizeof(mscclppTrigger);
  void* p = NULL;
  CUDA_CHECK(cudaHostAlloc(&p, trig + 128, cudaHostAllocMapped | cudaHostAllocPortable));
  f->triggers = p;
  memset(p, 0, trig + 128);
  f->tail = (uint64_t*)((char*)p + trig);
  *f->tail = start;
  CUDA_CHECK(cudaHostGetDevicePointer(&p, f->triggers, 0));
  f->triggers_dev = p;
  f->tail_dev = (uint64_t*)((char*)p + trig);
  CUDA_CHECK(cudaMalloc(&p, 256));
  f->head = p;
  f->tail_cache = (uint64_t*)((char*)p + 128);
  uint64_t init[2] = {start, start};
  MPP_CHECK(gpu_copy_sync(f->head, &init[0], 8)); /* returns once the words landed */
  return gpu_copy_sync(f->tail_cache, &init[1], 8);
}
#endif

mscclppResult_t fifo_host_init(struct fifo_host* f, int gpu, int dev, uint32_t size, uint64_t start) {
  memset(f, 0, sizeof(*f));
  if (size < 2 || (size & (size - 1)) != 0)
    return MPP_ERR(mscclppInvalidArgument, "proxy FIFO: size %u is not a power of two >= 2", size);
  f->gpu = gpu;
  f->dev = gpu ? dev : -1;
  f->size = size;
  mscclppResult_t res;
  if (!gpu) {
    res = host_init(f, start);
  } else {
#if MSCCLPP_HAVE_CUDA
    int prev = ext_dev_enter(dev);
    res = gpu_init(f, start);
    ext_dev_leave(prev, dev);
#else
    res = MPP_ERR(mscclppInvalidUsage, "proxy FIFO for a GPU rank: the library was built without CUDA");
#endif
  }
  if (res != mscclppSuccess) {
    fifo_host_fini(f);
    return res;
  }
  f->consumer.triggers = f->triggers;
  f->consumer.tailOut = f->tail;
  f->consumer.size = size;
  f->consumer.tail = start;
  return mscclppSuccess;
}

void fifo_host_fini(struct fifo_host* f) {
  if (!f->gpu) {
    free(f->triggers);
    free(f->head);
    free(f->tail);
  } else {
#if MSCCLPP_HAVE_CUDA
    int prev = ext_dev_enter(f->dev);
    if (f->triggers) cudaFreeHost(f->triggers);
    if (f->head) cudaFree(f->head);
    ext_dev_leave(prev, f->dev);
#endif
  }
  memset(f, 0, sizeof(*f));
}

void fifo_host_device(const struct fifo_host* f, mscclppFifoDevice* out) {
  memset(out, 0, sizeof(*out));
  out->triggers = f->triggers_dev;
  out->head = f->head;
  out->tail = f->tail_dev;
  out->tailCache = f->tail_cache;
  out->size = f->size;
}
