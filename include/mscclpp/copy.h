/* mscclpp/copy.h - the cooperative copy the channels move data with: thread tid of nthreads
 * copies its share of any size at any alignment. On the GPU the bulk goes as 16-byte vectors
 * (8/4/1-byte ones when source and destination disagree modulo 16), four loads in flight per
 * thread before their stores; on the host each thread memcpy's one contiguous slice.
 * Compiles as C11, C++ and CUDA C++. */
#ifndef MSCCLPP_COPY_H_
#define MSCCLPP_COPY_H_

#include <stdint.h>
#include <string.h>

#include <mscclpp/device.h>

#if defined(__CUDACC__)
/* n elements of T, unrolled by four (templated over the vector width only). */
template <typename T>
__device__ __forceinline__ void mscclppCopyElems(T* d, const T* s, uint64_t n, uint32_t tid, uint32_t nt) {
  uint64_t i = tid;
  for (; i + 3ull * nt < n; i += 4ull * nt) {
    T a = s[i], b = s[i + nt], c = s[i + 2ull * nt], e = s[i + 3ull * nt];
    d[i] = a;
    d[i + nt] = b;
    d[i + 2ull * nt] = c;
    d[i + 3ull * nt] = e;
  }
  for (; i < n; i += nt) d[i] = s[i];
}

__device__ __forceinline__ void mscclppCopyDevice(void* dst, const void* src, uint64_t bytes, uint32_t tid, uint32_t nt) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
  uintptr_t mis = (uintptr_t)d ^ (uintptr_t)s;
  uint32_t unit = (mis & 15) == 0 ? 16u : (mis & 7) == 0 ? 8u : (mis & 3) == 0 ? 4u : 1u;
  uint64_t head = (uint64_t)(unit - ((uintptr_t)d & (unit - 1))) & (unit - 1); /* bytes until d is aligned */
  if (head > bytes) head = bytes;
  for (uint64_t i = tid; i < head; i += nt) d[i] = s[i];
  d += head;
  s += head;
  bytes -= head;
  uint64_t n = bytes >> (unit == 16 ? 4 : unit == 8 ? 3 : unit == 4 ? 2 : 0); /* not a 64-bit division by a variable */
  switch (unit) {
    case 16: mscclppCopyElems((uint4*)d, (const uint4*)s, n, tid, nt); break;
    case 8: mscclppCopyElems((uint2*)d, (const uint2*)s, n, tid, nt); break;
    case 4: mscclppCopyElems((uint32_t*)d, (const uint32_t*)s, n, tid, nt); break;
    default: mscclppCopyElems((uint8_t*)d, (const uint8_t*)s, n, tid, nt); break;
  }
  for (uint64_t i = n * unit + tid; i < bytes; i += nt) d[i] = s[i];
}
#endif

/* Copies bytes from src to dst; every one of nthreads threads calls it with its tid (all with the
 * same arguments otherwise). The ranges must not overlap. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppCopy(void* dst, const void* src, uint64_t bytes, uint32_t tid, uint32_t nthreads) {
#if defined(__CUDA_ARCH__)
  mscclppCopyDevice(dst, src, bytes, tid, nthreads);
#else
  uint64_t share = (bytes + nthreads - 1) / nthreads, begin = share * tid;
  if (begin >= bytes) return;
  uint64_t n = bytes - begin < share ? bytes - begin : share;
  memcpy((char*)dst + begin, (const char*)src + begin, (size_t)n);
#endif
}

#endif /* MSCCLPP_COPY_H_ */
