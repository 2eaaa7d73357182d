/* mscclpp/atomics.h - the few atomic operations, fences and clocks that the FIFO, the semaphores
 * and the packets are made of, written once for both sides: PTX on the GPU, GCC/Clang __atomic
 * builtins on the host (the operations C11 <stdatomic.h> is built on; they work on plain integers
 * from C and from C++, which _Atomic does not). Compiles as C11, C++ and CUDA C++.
 *
 * Scopes on the GPU: "Sys" operations are ordered for every observer of the system (other GPUs
 * reading or writing our memory over NVLink/PCIe, host threads, copy engines), "Gpu" operations
 * only for threads of this GPU (counters nobody else touches). On the host both are the same. */
#ifndef MSCCLPP_ATOMICS_H_
#define MSCCLPP_ATOMICS_H_

#include <stdint.h>

#include <mscclpp/device.h>

#if !defined(__CUDA_ARCH__)
#include <sched.h>
#include <time.h>
#endif

#if defined(__CUDA_ARCH__)
#define MSCCLPP_ON_DEVICE 1
#else
#define MSCCLPP_ON_DEVICE 0
#endif

/* Acquire load: whatever the writer did before its matching release store is visible after it. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppLoadAcquire64(const uint64_t* p) {
#if MSCCLPP_ON_DEVICE
  uint64_t v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/* Relaxed load: an untorn, fresh value; no ordering of other accesses. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppLoadRelaxed64(const uint64_t* p) {
#if MSCCLPP_ON_DEVICE
  uint64_t v;
  asm volatile("ld.relaxed.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

MSCCLPP_HOST_DEVICE_INLINE uint32_t mscclppLoadAcquire32(const uint32_t* p) {
#if MSCCLPP_ON_DEVICE
  uint32_t v;
  asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/* Release store: every earlier access of this thread (and, on the GPU, of the threads it
 * synchronized with first, e.g. through __syncthreads) is visible to an observer that
 * acquire-loads the value. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppStoreRelease64(uint64_t* p, uint64_t v) {
#if MSCCLPP_ON_DEVICE
  asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

MSCCLPP_HOST_DEVICE_INLINE void mscclppStoreRelaxed64(uint64_t* p, uint64_t v) {
#if MSCCLPP_ON_DEVICE
  asm volatile("st.relaxed.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

MSCCLPP_HOST_DEVICE_INLINE void mscclppStoreRelease32(uint32_t* p, uint32_t v) {
#if MSCCLPP_ON_DEVICE
  asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/* Atomic add with release order, result not returned (a "reduction" on the GPU: the thread does
 * not wait for the remote memory to answer). The semaphores' signal: concurrent signals of many
 * threads or blocks all count, and each orders its thread's earlier writes before itself. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppAddRelease64(uint64_t* p, uint64_t v) {
#if MSCCLPP_ON_DEVICE
  asm volatile("red.release.sys.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  (void)__atomic_fetch_add(p, v, __ATOMIC_RELEASE);
#endif
}

/* As mscclppAddRelease64 without ordering other accesses (counting only). */
MSCCLPP_HOST_DEVICE_INLINE void mscclppAddRelaxed64(uint64_t* p, uint64_t v) {
#if MSCCLPP_ON_DEVICE
  asm volatile("red.relaxed.sys.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  (void)__atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

/* Fetch-and-add on a counter only this GPU (or this host process) touches; returns the old value.
 * Relaxed: it hands out distinct numbers (FIFO slots, semaphore steps), it orders nothing. */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppFetchAddGpu64(uint64_t* p, uint64_t v) {
#if MSCCLPP_ON_DEVICE
  uint64_t old;
  asm volatile("atom.relaxed.gpu.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

/* Compare-and-swap on a word only this GPU (or host process) touches; returns the old value. */
MSCCLPP_HOST_DEVICE_INLINE uint32_t mscclppCasGpu32(uint32_t* p, uint32_t expected, uint32_t desired) {
#if MSCCLPP_ON_DEVICE
  uint32_t old;
  asm volatile("atom.relaxed.gpu.cas.b32 %0, [%1], %2, %3;" : "=r"(old) : "l"(p), "r"(expected), "r"(desired) : "memory");
  return old;
#else
  __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  return expected;
#endif
}

MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppCasGpu64(uint64_t* p, uint64_t expected, uint64_t desired) {
#if MSCCLPP_ON_DEVICE
  uint64_t old;
  asm volatile("atom.relaxed.gpu.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(expected), "l"(desired) : "memory");
  return old;
#else
  __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  return expected;
#endif
}

/* Full fence at system scope: every access of this thread before it is visible to every observer
 * (other GPUs, the host, the copy engines) before any access after it. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppFenceSys(void) {
#if MSCCLPP_ON_DEVICE
  asm volatile("fence.acq_rel.sys;" ::: "memory");
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* A clock in nanoseconds for wait bounds (device: %globaltimer; host: the monotonic clock when
 * POSIX is visible, else C11's timespec_get). */
MSCCLPP_HOST_DEVICE_INLINE uint64_t mscclppNowNs(void) {
#if MSCCLPP_ON_DEVICE
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  struct timespec ts;
#if defined(CLOCK_MONOTONIC)
  clock_gettime(CLOCK_MONOTONIC, &ts);
#else
  timespec_get(&ts, TIME_UTC);
#endif
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

/* One step of a spin. Host: a pause instruction, and every 1024th step a yield so that the thread
 * being waited for gets a CPU on a busy machine. GPU: the first 128 steps spin flat out (a
 * semaphore or packet that comes within a few microseconds is seen at once); later steps sleep
 * 256 ns each: on H200, blocks spinning flat out slowed the small copies the proxy issues (copy
 * kernels of the driver) about 100 times, so a long wait would starve what it waits for. */
MSCCLPP_HOST_DEVICE_INLINE void mscclppSpinRelax(uint32_t spins) {
#if MSCCLPP_ON_DEVICE
  if (spins > 128) asm volatile("nanosleep.u32 256;" ::: "memory");
#else
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
  if ((spins & 1023u) == 1023u) sched_yield();
#endif
}

#endif /* MSCCLPP_ATOMICS_H_ */
