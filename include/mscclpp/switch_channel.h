/* mscclpp/switch_channel.h - switch channels: reduce from all / broadcast to all members of a group
 * of ranks, one buffer per member at the same offset. Compiles as C11, C++ and CUDA C++.
 *
 * By default this is an emulation over peer memory, correct on any NVLink or PCIe machine: every
 * member holds the group's buffers mapped (peers[]); reduce loads the element from every member
 * and combines them, broadcast stores to every member. Real NVLink SHARP (multimem) instructions
 * exist only behind an explicit opt-in at both times: compile with MSCCLPP_ENABLE_MULTIMEM defined
 * AND put a multicast address of the user's own making into `multicast`. This library never
 * creates multicast objects (no cuMulticast* call anywhere): on shared machines they can take the
 * host's GPUs out of service. The multimem path is untested here.
 *
 * Ordering is the caller's: make the members' writes visible first (e.g. a memory-channel
 * signal/wait round among the group) before a reduce reads them.
 *
 * Device functions (CUDA C++ only): mscclppSwitchChannelReduce and ...ReduceBroadcast (templates
 * over the element type and operator) and ...Broadcast. Host functions (plain C, for host threads
 * of CPU ranks, whose peers[] are host memory): mscclppSwitchChannelReduceHost, ...BroadcastHost
 * and ...ReduceBroadcastHost, with the same offsets, counts and (tid, nthreads) cooperation and
 * the datatype and operator as arguments; they fence nothing either. */
#ifndef MSCCLPP_SWITCH_CHANNEL_H_
#define MSCCLPP_SWITCH_CHANNEL_H_

#include <stdint.h>

#include <mscclpp/collectives.h>
#include <mscclpp/comm.h>
#include <mscclpp/copy.h>
#include <mscclpp/device.h>
#include <mscclpp/memory.h>

#define MSCCLPP_SWITCH_MAX_RANKS 16

typedef struct {
  void* peers[MSCCLPP_SWITCH_MAX_RANKS]; /* members' buffers mapped here, in group order (own included) */
  void* multicast;                       /* opt-in multimem address (see above); NULL: emulation */
  int32_t nranks;                        /* members */
  int32_t rank;                          /* this rank's index in the group */
} mscclppSwitchChannel;

/* Reduce operations. */
typedef enum { mscclppSwitchSum = 0, mscclppSwitchMin = 1, mscclppSwitchMax = 2 } mscclppSwitchOp_t;

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

/* a (op) b for one element; 16-bit floats are combined in fp32 and rounded once. */
template <typename T, int Op>
__device__ __forceinline__ T mscclppSwitchCombine(T a, T b) {
  if (Op == mscclppSwitchSum) return a + b;
  if (Op == mscclppSwitchMin) return b < a ? b : a;
  return a < b ? b : a;
}
template <>
__device__ __forceinline__ __half mscclppSwitchCombine<__half, mscclppSwitchSum>(__half a, __half b) {
  return __float2half(__half2float(a) + __half2float(b));
}
template <>
__device__ __forceinline__ __half mscclppSwitchCombine<__half, mscclppSwitchMin>(__half a, __half b) {
  return __half2float(b) < __half2float(a) ? b : a;
}
template <>
__device__ __forceinline__ __half mscclppSwitchCombine<__half, mscclppSwitchMax>(__half a, __half b) {
  return __half2float(a) < __half2float(b) ? b : a;
}
template <>
__device__ __forceinline__ __nv_bfloat16 mscclppSwitchCombine<__nv_bfloat16, mscclppSwitchSum>(__nv_bfloat16 a,
                                                                                            __nv_bfloat16 b) {
  return __float2bfloat16(__bfloat162float(a) + __bfloat162float(b));
}
template <>
__device__ __forceinline__ __nv_bfloat16 mscclppSwitchCombine<__nv_bfloat16, mscclppSwitchMin>(__nv_bfloat16 a,
                                                                                            __nv_bfloat16 b) {
  return __bfloat162float(b) < __bfloat162float(a) ? b : a;
}
template <>
__device__ __forceinline__ __nv_bfloat16 mscclppSwitchCombine<__nv_bfloat16, mscclppSwitchMax>(__nv_bfloat16 a,
                                                                                            __nv_bfloat16 b) {
  return __bfloat162float(a) < __bfloat162float(b) ? b : a;
}

/* Lane-wise combine of two 16-byte vectors of T. */
template <typename T, int Op>
__device__ __forceinline__ uint4 mscclppSwitchCombineVec(uint4 a, uint4 b) {
  union V {
    uint4 v;
    T e[16 / sizeof(T)];
  } x, y;
  x.v = a;
  y.v = b;
#pragma unroll
  for (int i = 0; i < (int)(16 / sizeof(T)); i++) x.e[i] = mscclppSwitchCombine<T, Op>(x.e[i], y.e[i]);
  return x.v;
}

/* True when every member's buffer + offset is 16-byte aligned (the vector path applies). */
__device__ __forceinline__ int mscclppSwitchAligned(const mscclppSwitchChannel* ch, uint64_t offset) {
  uintptr_t any = (uintptr_t)offset;
  for (int r = 0; r < ch->nranks; r++) any |= (uintptr_t)ch->peers[r];
  return (any & 15) == 0;
}

/* The combined value of element i of every member (count elements of T start at byte offset). */
template <typename T, int Op>
__device__ __forceinline__ T mscclppSwitchLoadReduce1(const mscclppSwitchChannel* ch, uint64_t offset, uint64_t i) {
  T acc = ((const T*)((const char*)ch->peers[0] + offset))[i];
  for (int r = 1; r < ch->nranks; r++) acc = mscclppSwitchCombine<T, Op>(acc, ((const T*)((const char*)ch->peers[r] + offset))[i]);
  return acc;
}

template <typename T, int Op>
__device__ __forceinline__ uint4 mscclppSwitchLoadReduceVec(const mscclppSwitchChannel* ch, uint64_t offset, uint64_t v) {
  uint4 acc = ((const uint4*)((const char*)ch->peers[0] + offset))[v];
  for (int r = 1; r < ch->nranks; r++)
    acc = mscclppSwitchCombineVec<T, Op>(acc, ((const uint4*)((const char*)ch->peers[r] + offset))[v]);
  return acc;
}

#if defined(MSCCLPP_ENABLE_MULTIMEM)
template <typename T>
struct mscclppIsF32 {
  enum { value = 0 };
};
template <>
struct mscclppIsF32<float> {
  enum { value = 1 };
};
/* Opt-in multimem path (fp32 sum only); never compiled by default, never run in tests. */
__device__ __forceinline__ uint4 mscclppMultimemLoadReduceF32(const void* mc) {
  uint4 r;
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(mc)
               : "memory");
  return r;
}
__device__ __forceinline__ void mscclppMultimemStore(void* mc, uint4 v) {
  asm volatile("multimem.st.relaxed.sys.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(mc), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
#endif

/* dst[i] = op over members of their element i, for count elements of T at byte offset of each
 * member's buffer. dst is any local pointer. Cooperative over (tid, nthreads). */
template <typename T, int Op>
__device__ __forceinline__ void mscclppSwitchChannelReduce(const mscclppSwitchChannel* ch, T* dst, uint64_t offset,
                                                           uint64_t count, uint32_t tid, uint32_t nthreads) {
  uint64_t done = 0;
  if (mscclppSwitchAligned(ch, offset) && ((uintptr_t)dst & 15) == 0) {
    uint64_t nvec = count * sizeof(T) / 16;
    for (uint64_t v = tid; v < nvec; v += nthreads) {
#if defined(MSCCLPP_ENABLE_MULTIMEM)
      if (ch->multicast != 0 && Op == mscclppSwitchSum && mscclppIsF32<T>::value) {
        ((uint4*)dst)[v] = mscclppMultimemLoadReduceF32((const char*)ch->multicast + offset + v * 16);
        continue;
      }
#endif
      ((uint4*)dst)[v] = mscclppSwitchLoadReduceVec<T, Op>(ch, offset, v);
    }
    done = nvec * 16 / sizeof(T);
  }
  for (uint64_t i = done + tid; i < count; i += nthreads) dst[i] = mscclppSwitchLoadReduce1<T, Op>(ch, offset, i);
}

/* Every member's buffer[offset, +bytes) = src[0, bytes). Cooperative. */
__device__ __forceinline__ void mscclppSwitchChannelBroadcast(const mscclppSwitchChannel* ch, const void* src,
                                                              uint64_t offset, uint64_t bytes, uint32_t tid,
                                                              uint32_t nthreads) {
#if defined(MSCCLPP_ENABLE_MULTIMEM)
  if (ch->multicast != 0 && (((uintptr_t)src | offset | bytes) & 15) == 0) {
    for (uint64_t v = tid; v < bytes / 16; v += nthreads)
      mscclppMultimemStore((char*)ch->multicast + offset + v * 16, ((const uint4*)src)[v]);
    return;
  }
#endif
  for (int r = 0; r < ch->nranks; r++) mscclppCopyDevice((char*)ch->peers[r] + offset, src, bytes, tid, nthreads);
}

/* In place over the group: element i of every member becomes the combination of all members'
 * element i (a multimem ld_reduce followed by st). Members must not run it on overlapping ranges
 * at the same time unless they all compute the same results (then the duplicate stores agree). */
template <typename T, int Op>
__device__ __forceinline__ void mscclppSwitchChannelReduceBroadcast(const mscclppSwitchChannel* ch, uint64_t offset,
                                                                    uint64_t count, uint32_t tid, uint32_t nthreads) {
  uint64_t done = 0;
  if (mscclppSwitchAligned(ch, offset)) {
    uint64_t nvec = count * sizeof(T) / 16;
    for (uint64_t v = tid; v < nvec; v += nthreads) {
      uint4 acc = mscclppSwitchLoadReduceVec<T, Op>(ch, offset, v);
      for (int r = 0; r < ch->nranks; r++) ((uint4*)((char*)ch->peers[r] + offset))[v] = acc;
    }
    done = nvec * 16 / sizeof(T);
  }
  for (uint64_t i = done + tid; i < count; i += nthreads) {
    T acc = mscclppSwitchLoadReduce1<T, Op>(ch, offset, i);
    for (int r = 0; r < ch->nranks; r++) ((T*)((char*)ch->peers[r] + offset))[i] = acc;
  }
}
#endif /* __CUDACC__ */

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over the group: every rank listed in ranks[0..nranks) calls it with the same list
 * (2 <= nranks <= MSCCLPP_SWITCH_MAX_RANKS, this rank among them) and its own registered buffer
 * `local`; the other members' buffers are imported and mapped here (GPU ranks of one host through
 * p2p, CPU ranks of one host through shm). The imports live until mscclppCommReleaseChannels. */
mscclppResult_t mscclppSwitchChannelCreate(mscclppComm_t comm, const int* ranks, int nranks, mscclppRegMem_t local,
                                           mscclppSwitchChannel* chan);

/* Host counterparts of the device functions above, for a channel whose peers[] are host memory
 * mapped here (CPU ranks; a GPU rank's peers[] are device addresses: use the device functions).
 * Each is cooperative like its device twin: every one of nthreads host threads calls it with its
 * own tid (0 <= tid < nthreads) and otherwise equal arguments, and together they cover the range
 * (each tid one contiguous slice); nthreads 1 does it all in one call. offset is in bytes (the same in every member's buffer),
 * count in elements of dtype; the buffers' sizes are the caller's to respect. multicast is ignored.
 *
 * Memory ordering is the caller's, as on the device: these are plain loads and stores, no fence.
 * Before a reduce, the members' writes must be visible here (a memory-channel signal/wait round,
 * a bootstrap barrier); after a broadcast, the members read only after such a round.
 *
 * Datatypes: every mscclppDataType_t. Arithmetic is the library's host reduction (that of the
 * CPU-rank collectives): integers wrap, 16-bit and fp8 floats are combined in fp32 and rounded once
 * at the end, min and max ignore a NaN unless every input is NaN. This equals the device functions
 * whenever the sums are exact in the type and no input is NaN (the device rounds 16-bit sums after
 * every member).
 *
 * Bad arguments return mscclppInvalidArgument with a message (mscclppGetLastError): NULL channel or
 * buffer, a channel without 1..MSCCLPP_SWITCH_MAX_RANKS mapped members, an unknown dtype or op, a
 * byte range that overflows, tid >= nthreads, or a dst or src that partly overlaps a member's
 * range. */

/* dst[i] = op over the members of element i of their buffer at byte offset, for i < count. dst is
 * any host pointer; it may be exactly one member's range (that member's values are then replaced
 * while the others may still read them: order that yourself), not partly overlap one. */
mscclppResult_t mscclppSwitchChannelReduceHost(const mscclppSwitchChannel* ch, void* dst, uint64_t offset,
                                               uint64_t count, mscclppDataType_t dtype, mscclppSwitchOp_t op,
                                               uint32_t tid, uint32_t nthreads);

/* Every member's buffer[offset, offset + bytes) = src[0, bytes). src is any host pointer; it may be
 * exactly one member's range (that member is skipped), not partly overlap one. */
mscclppResult_t mscclppSwitchChannelBroadcastHost(const mscclppSwitchChannel* ch, const void* src, uint64_t offset,
                                                  uint64_t bytes, uint32_t tid, uint32_t nthreads);

/* In place over the group: element i (i < count, at byte offset) of every member becomes op over
 * all members' element i. Concurrent calls (other members', or other threads' not of the same
 * cooperative call, which split one range) must use disjoint ranges: an element read after another
 * call stored its result would be combined again (harmless only for min and max). Split the range
 * among the members to share the work. */
mscclppResult_t mscclppSwitchChannelReduceBroadcastHost(const mscclppSwitchChannel* ch, uint64_t offset,
                                                        uint64_t count, mscclppDataType_t dtype, mscclppSwitchOp_t op,
                                                        uint32_t tid, uint32_t nthreads);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_SWITCH_CHANNEL_H_ */
