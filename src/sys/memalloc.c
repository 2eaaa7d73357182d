/* memalloc.c - mscclppMemAlloc/mscclppMemFree and what backs a pointer. Host memory is a memfd
 * mapped MAP_SHARED (so that registration can hand the fd to processes of this host); CUDA memory
 * is a cuMem allocation exportable as a POSIX fd. Every allocation is kept in a process-wide table
 * (base -> kind, size, fd, handle) that registration consults. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sys/memalloc.h"

#include "sys/cudawrap.h"
#include "sys/gpu.h"
#include "util/err.h"
#include "util/log.h"

struct alloc_rec {
  void* base;
  uint64_t size; /* mapped bytes (rounded to pages / granularity) */
  enum mem_kind kind;
  int fd;             /* HOST_SHM */
  uint64_t cu_handle; /* CUDA_VMM */
  int device;
};

static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc_rec* allocs;
static size_t alloc_count, alloc_cap;

static mscclppResult_t table_add(const struct alloc_rec* rec) {
  pthread_mutex_lock(&alloc_lock);
  if (alloc_count == alloc_cap) {
    size_t cap = alloc_cap ? alloc_cap * 2 : 16;
    struct alloc_rec* grown = realloc(allocs, cap * sizeof(*grown));
    if (grown == NULL) {
      pthread_mutex_unlock(&alloc_lock);
      return MPP_ERR(mscclppSystemError, "mscclppMemAlloc: out of host memory for the allocation table");
    }
    allocs = grown;
    alloc_cap = cap;
  }
  allocs[alloc_count++] = *rec;
  pthread_mutex_unlock(&alloc_lock);
  return mscclppSuccess;
}

/* Removes the record whose base is ptr into *out; 0 when there is none. */
static int table_take(void* ptr, struct alloc_rec* out) {
  int found = 0;
  pthread_mutex_lock(&alloc_lock);
  for (size_t i = 0; i < alloc_count; i++) {
    if (allocs[i].base != ptr) continue;
    *out = allocs[i];
    allocs[i] = allocs[--alloc_count];
    found = 1;
    break;
  }
  pthread_mutex_unlock(&alloc_lock);
  return found;
}

/* Finds the allocation containing ptr; 0 when ptr is not in one of ours. */
static int table_find(const void* ptr, struct alloc_rec* out) {
  int found = 0;
  uintptr_t p = (uintptr_t)ptr;
  pthread_mutex_lock(&alloc_lock);
  for (size_t i = 0; i < alloc_count; i++) {
    uintptr_t b = (uintptr_t)allocs[i].base;
    if (p >= b && p - b < allocs[i].size) {
      *out = allocs[i];
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&alloc_lock);
  return found;
}

static mscclppResult_t host_alloc(uint64_t size, struct alloc_rec* rec) {
  long page = sysconf(_SC_PAGESIZE);
  uint64_t rounded = (size + (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page;
  int fd = memfd_create("mscclpp-host", MFD_CLOEXEC);
  if (fd < 0) return MPP_ERRNO(mscclppSystemError, errno, "mscclppMemAlloc: memfd_create for %llu bytes", (unsigned long long)size);
  if (ftruncate(fd, (off_t)rounded) != 0) {
    int e = errno;
    close(fd);
    return MPP_ERRNO(mscclppSystemError, e, "mscclppMemAlloc: ftruncate of the memfd to %llu bytes", (unsigned long long)rounded);
  }
  /* A fresh memfd reads as zeros, so the memory is zeroed without touching it. */
  void* p = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return MPP_ERRNO(mscclppSystemError, e, "mscclppMemAlloc: mmap of %llu bytes of host memory", (unsigned long long)rounded);
  }
  *rec = (struct alloc_rec){.base = p, .size = rounded, .kind = MEM_KIND_HOST_SHM, .fd = fd, .device = -1};
  return mscclppSuccess;
}

#if MSCCLPP_HAVE_CUDA
/* Creates, maps and zeroes a cuMem allocation of the current device, exportable as a POSIX fd. */
static mscclppResult_t cuda_alloc(uint64_t size, struct alloc_rec* rec) {
  if (!cu_available()) return MPP_ERR(mscclppInvalidUsage, "mscclppMemAlloc(mscclppMemCuda): no usable CUDA device or driver");
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaSetDevice(dev)); /* makes the device's primary context current for the driver calls */
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CU_CHECK(cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  if (gran == 0) gran = 2u << 20;
  uint64_t rounded = (size + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h;
  CU_CHECK(cu.cuMemCreate(&h, rounded, &prop, 0));
  CUdeviceptr va = 0;
  CUresult r = cu.cuMemAddressReserve(&va, rounded, gran, 0, 0);
  if (r != CUDA_SUCCESS) goto err_release;
  r = cu.cuMemMap(va, rounded, 0, h, 0);
  if (r != CUDA_SUCCESS) goto err_free_va;
  CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  r = cu.cuMemSetAccess(va, rounded, &access, 1);
  if (r != CUDA_SUCCESS) goto err_unmap;
  mscclppResult_t zr = gpu_zero_sync((void*)va, rounded);
  if (zr != mscclppSuccess) {
    cu.cuMemUnmap(va, rounded);
    cu.cuMemAddressFree(va, rounded);
    cu.cuMemRelease(h);
    return zr;
  }
  *rec = (struct alloc_rec){.base = (void*)va, .size = rounded, .kind = MEM_KIND_CUDA_VMM, .fd = -1,
                            .cu_handle = (uint64_t)h, .device = dev};
  return mscclppSuccess;
err_unmap:
  cu.cuMemUnmap(va, rounded);
err_free_va:
  cu.cuMemAddressFree(va, rounded);
err_release:
  cu.cuMemRelease(h);
  return cu_error(r, "mscclppMemAlloc(mscclppMemCuda): mapping the cuMem allocation", __FILE__, __LINE__);
}

static void cuda_free(const struct alloc_rec* rec) {
  CUdeviceptr va = (CUdeviceptr)rec->base;
  cu.cuMemUnmap(va, rec->size);
  cu.cuMemAddressFree(va, rec->size);
  cu.cuMemRelease((CUmemGenericAllocationHandle)rec->cu_handle);
}
#endif

mscclppResult_t mem_alloc(void** ptr, size_t size, mscclppMemKind_t kind) {
  MPP_CHECK_ARG(ptr != NULL, "mscclppMemAlloc: ptr is NULL");
  MPP_CHECK_ARG(size > 0, "mscclppMemAlloc: size is 0");
  MPP_CHECK_ARG(size <= (1ull << 48), "mscclppMemAlloc: size %zu is too large", size);
  struct alloc_rec rec;
  if (kind == mscclppMemHost) {
    MPP_CHECK(host_alloc(size, &rec));
  } else if (kind == mscclppMemCuda) {
#if MSCCLPP_HAVE_CUDA
    MPP_CHECK(cuda_alloc(size, &rec));
#else
    return MPP_ERR(mscclppInvalidUsage, "mscclppMemAlloc(mscclppMemCuda): the library was built without CUDA");
#endif
  } else {
    return MPP_ERR(mscclppInvalidArgument, "mscclppMemAlloc: unknown memory kind %d", (int)kind);
  }
  mscclppResult_t res = table_add(&rec);
  if (res != mscclppSuccess) {
    struct alloc_rec tmp = rec;
    if (rec.kind == MEM_KIND_HOST_SHM) {
      munmap(tmp.base, tmp.size);
      close(tmp.fd);
    }
#if MSCCLPP_HAVE_CUDA
    else
      cuda_free(&tmp);
#endif
    return res;
  }
  LOG_DEBUG_(LOG_SUB_MEM, "mscclppMemAlloc: %s memory %p, %zu bytes (%llu mapped)",
             kind == mscclppMemHost ? "host" : "cuda", rec.base, size, (unsigned long long)rec.size);
  *ptr = rec.base;
  return mscclppSuccess;
}

mscclppResult_t mem_free(void* ptr) {
  MPP_CHECK_ARG(ptr != NULL, "mscclppMemFree: ptr is NULL");
  struct alloc_rec rec;
  if (!table_take(ptr, &rec))
    return MPP_ERR(mscclppInvalidArgument, "mscclppMemFree: %p was not returned by mscclppMemAlloc (or was freed)", ptr);
  if (rec.kind == MEM_KIND_HOST_SHM) {
    munmap(rec.base, rec.size);
    close(rec.fd);
  }
#if MSCCLPP_HAVE_CUDA
  else {
    cuda_free(&rec);
  }
#endif
  return mscclppSuccess;
}

mscclppResult_t mscclppMemAlloc(void** ptr, size_t size, mscclppMemKind_t kind) {
  err_clear();
  return mem_alloc(ptr, size, kind);
}

mscclppResult_t mscclppMemFree(void* ptr) {
  err_clear();
  return mem_free(ptr);
}

#if MSCCLPP_HAVE_CUDA
/* Device memory not from mscclppMemAlloc: cuMem (VMM) when a handle can be retained, else legacy
 * cudaMalloc memory. 0 when ptr is not device memory. */
static int classify_device(const void* ptr, struct mem_info* out) {
  if (!cu_available()) return 0;
  CUmemorytype type = 0;
  if (cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)ptr) != CUDA_SUCCESS ||
      type != CU_MEMORYTYPE_DEVICE) {
    (void)cudaGetLastError();
    return 0;
  }
  int ordinal = -1;
  cu.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)ptr);
  CUdeviceptr base = 0;
  size_t len = 0;
  if (cu.cuMemGetAddressRange(&base, &len, (CUdeviceptr)ptr) != CUDA_SUCCESS) return 0;
  CUmemGenericAllocationHandle h;
  enum mem_kind kind = MEM_KIND_CUDA_IPC;
  if (cu.cuMemRetainAllocationHandle(&h, (void*)ptr) == CUDA_SUCCESS) {
    kind = MEM_KIND_CUDA_VMM;
    cu.cuMemRelease(h);
  }
  *out = (struct mem_info){.kind = kind, .base = (void*)base, .alloc_size = len, .fd = -1, .device = ordinal};
  return 1;
}
#endif

mscclppResult_t mem_classify(const void* ptr, uint64_t size, struct mem_info* out) {
  struct alloc_rec rec;
  int found = table_find(ptr, &rec);
  if (found) {
    *out = (struct mem_info){.kind = rec.kind, .base = rec.base, .alloc_size = rec.size, .fd = rec.fd,
                             .device = rec.device};
  }
#if MSCCLPP_HAVE_CUDA
  if (!found) found = classify_device(ptr, out);
#endif
  if (!found) {
    *out = (struct mem_info){.kind = MEM_KIND_HOST, .base = (void*)ptr, .alloc_size = size, .fd = -1, .device = -1};
    return mscclppSuccess;
  }
  uint64_t off = (uint64_t)((uintptr_t)ptr - (uintptr_t)out->base);
  if (off > out->alloc_size || size > out->alloc_size - off)
    return MPP_ERR(mscclppInvalidArgument,
                   "buffer %p + %llu bytes runs past the end of its allocation (%p, %llu bytes)", ptr,
                   (unsigned long long)size, out->base, (unsigned long long)out->alloc_size);
  return mscclppSuccess;
}

mscclppResult_t mem_copy(void* dst, int dst_dev, const void* src, int src_dev, uint64_t size) {
  if (size == 0) return mscclppSuccess;
  if (dst_dev < 0 && src_dev < 0) {
    memcpy(dst, src, size);
    return mscclppSuccess;
  }
#if MSCCLPP_HAVE_CUDA
  CUDA_CHECK(cudaMemcpy(dst, src, size, cudaMemcpyDefault));
  /* cudaMemcpy may return before a copy into device memory has landed (from pageable memory, or
   * device to device); waiting for the stream makes the copy visible to any reader once we
   * return, e.g. after a semaphore token stored next. */
  if (dst_dev >= 0) CUDA_CHECK(cudaStreamSynchronize(0));
  return mscclppSuccess;
#else
  return MPP_ERR(mscclppInvalidUsage, "copy involving GPU memory: the library was built without CUDA");
#endif
}
