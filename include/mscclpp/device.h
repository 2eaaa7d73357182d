/* mscclpp/device.h - portability macros for code that runs on the GPU and, where it is plain C,
 * on the host too (the FIFO, the packet formats, the CPU stand-ins of GPU threads in tests).
 * Compiles as C11, C++ and CUDA C++. */
#ifndef MSCCLPP_DEVICE_H_
#define MSCCLPP_DEVICE_H_

#include <stdint.h>

#if defined(__CUDACC__)
#define MSCCLPP_HOST_DEVICE_INLINE __forceinline__ __host__ __device__
#define MSCCLPP_DEVICE_INLINE __forceinline__ __device__
#define MSCCLPP_ALIGN(n) __align__(n)
#else
#define MSCCLPP_HOST_DEVICE_INLINE static inline
#define MSCCLPP_DEVICE_INLINE static inline
#define MSCCLPP_ALIGN(n) __attribute__((aligned(n)))
#endif

/* Where a device-side wait that hit its bound reports itself: the waiting rank, the peer it
 * waited for, the channel (index given at creation) and what it waited for. The first timeout
 * wins; the host reads it through the communicator (mscclppCommGetDeviceError in
 * <mscclpp/wait.h>). Lives in host-mapped memory so the host can read it while or after the kernel
 * runs. The race for "first" is decided by an atomic claim word in the waiting side's own memory
 * (device memory for GPU ranks: GPU atomics on host memory are not atomic over PCIe); the winner
 * fills the fields, then stores flag = 1 with release order, so a host that reads flag == 1 with
 * acquire order sees every field. */
typedef struct {
  uint32_t flag;    /* 0: no error; 1: a record below is valid */
  int32_t rank;
  int32_t peer;
  int32_t channel;
  uint32_t what;    /* mscclppDeviceWaitKind_t */
  uint32_t pad;
  uint64_t expected; /* the token value awaited */
  uint64_t observed; /* the last value seen */
} mscclppDeviceError;

typedef enum {
  mscclppWaitSemaphore = 1, /* semaphore wait (memory or port channel) */
  mscclppWaitPacket = 2,    /* LL packet flag */
  mscclppWaitFifoFull = 3,  /* FIFO push found no free slot */
  mscclppWaitFifoSync = 4   /* flush: the proxy did not reach the trigger */
} mscclppDeviceWaitKind_t;

/* What the device-side operations that can wait return. */
#define MSCCLPP_DEVICE_OK 0      /* done */
#define MSCCLPP_DEVICE_TIMEOUT 1 /* this wait hit its bound and (if it was first) filled the record */
#define MSCCLPP_DEVICE_ABORTED 2 /* another wait of this rank timed out first; this one gave up */

#endif /* MSCCLPP_DEVICE_H_ */
