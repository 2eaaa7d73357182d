/* memalloc.h - memory the library allocates (mscclppMemAlloc: memfd host memory other processes can
 * map, cuMem GPU memory exportable as a file descriptor), what backs any pointer (which decides the
 * transports that can reach a buffer), and copies between host and GPU memory. */
#ifndef MPP_SYS_MEMALLOC_H_
#define MPP_SYS_MEMALLOC_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/memory.h>

/* How a buffer is backed; decides which transports can reach it. */
enum mem_kind {
  MEM_KIND_HOST = 0,     /* plain host memory (malloc, stack, ...): reachable over tcp only */
  MEM_KIND_HOST_SHM = 1, /* mscclppMemAlloc(host): a memfd other processes of this host can map */
  MEM_KIND_CUDA_IPC = 2, /* cudaMalloc memory: a legacy CUDA IPC handle of the allocation base */
  MEM_KIND_CUDA_VMM = 3, /* cuMem memory exportable as a POSIX file descriptor */
  MEM_KIND_COUNT
};

/* The allocation that contains a buffer. */
struct mem_info {
  enum mem_kind kind;
  void* base;          /* start of the allocation (the buffer itself for MEM_KIND_HOST) */
  uint64_t alloc_size; /* bytes from base */
  int fd;              /* HOST_SHM: the memfd (owned by memalloc; dup it to keep it) */
  int device;          /* CUDA kinds: the device the memory lives on; else -1 */
};

/* mscclppMemAlloc and mscclppMemFree without touching the caller's last error. */
mscclppResult_t mem_alloc(void** ptr, size_t size, mscclppMemKind_t kind);
mscclppResult_t mem_free(void* ptr);

/* Finds what backs [ptr, ptr+size): an mscclppMemAlloc allocation, else (with CUDA) device memory
 * by its pointer attributes, else plain host memory. InvalidArgument when the range runs past the
 * end of the allocation that contains ptr. */
mscclppResult_t mem_classify(const void* ptr, uint64_t size, struct mem_info* out);

/* True when ptr is GPU memory (copies to or from it need cudaMemcpy). */
static inline int mem_kind_is_device(enum mem_kind k) { return k == MEM_KIND_CUDA_IPC || k == MEM_KIND_CUDA_VMM; }

/* Copies size bytes between any two of host memory and GPU memory (dev >= 0) of this process;
 * synchronous: the bytes have landed when it returns. */
mscclppResult_t mem_copy(void* dst, int dst_dev, const void* src, int src_dev, uint64_t size);

#endif /* MPP_SYS_MEMALLOC_H_ */
