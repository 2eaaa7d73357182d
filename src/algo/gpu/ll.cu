/* ll.cu - the LL exchange kernel of the GPU collectives: one launch moves every part of a gx_plan
 * as LL16 packets (8 payload bytes and their flag per 16 bytes) straight into the peers' LL inboxes,
 * and each rank unpacks or reduces what arrives, waiting on the packets' flags only. The latency
 * path: no semaphore round, one NVLink write per packet.
 *
 * Flags and reuse. Every launch takes flag = last + 1 (never 0) from the device counter d.flag,
 * which the last block of the launch to finish advances, so CUDA graph replays get fresh flags
 * too. The launch uses the inboxes of parity flag & 1. Rank A may write parity p again (launch
 * k + 2) only once rank B finished reading it (launch k). A finishes launch k + 1 only after it
 * read something B wrote in launch k + 1, which B wrote only after its launch k completed (same
 * stream): B's data packets when B sends A data in that launch, else a sync packet that B sends
 * and A awaits exactly for the pairs without data (both sides know every part's length). So A,
 * finishing launch k + 1, has seen B start k + 1. */
#include <cuda_runtime.h>

#include <mscclpp/memory_channel.h>
#include <mscclpp/packet.h>

#include "algo/gpu/gpu.h"
#include "elem/reduce.cuh"

/* The inbox (parity, from) of the rank whose scratch base is `base`. */
__device__ __forceinline__ mscclppLL16Packet* ll_inbox(const gpu_dev& d, char* base, uint32_t parity, int from) {
  return (mscclppLL16Packet*)(base + ((uint64_t)parity * (uint64_t)d.nranks + (uint64_t)from) * d.ll_slot);
}

__device__ __forceinline__ uint64_t npk(uint64_t bytes) { return (bytes + 7) / 8; }

/* Bytes of rank q's packets this rank reads in this launch (ll_copy: its part; ll_reduce: the own
 * part's length from every peer); 0: a sync packet stands in for them. */
__device__ __forceinline__ uint64_t ll_reads(const gx_plan& p, int rank, int q) {
  return p.mode == GX_COPY ? p.recv_len[q] : p.mode == GX_REDUCE ? p.recv_len[rank] : 0;
}
__device__ __forceinline__ uint32_t tail(uint64_t bytes, uint64_t i) {
  uint64_t left = bytes - i * 8;
  return left < 8 ? (uint32_t)left : 8u;
}

/* Phase A: every part for a peer goes out as packets (scaled first for premulsum), then the sync
 * packet at the end of the inbox of each peer that gets no data (last: the first data loads need
 * not wait for the flag).
 * The peers' inboxes are found through kernel parameters (d.peer_scratch), not channel loads. */
template <int DT>
__device__ void ll_send(const gpu_dev& d, const gx_plan& p, uint32_t flag, uint32_t tid, uint32_t nt) {
  uint32_t parity = flag & 1;
  elem_scalar sc = p.scale_send ? plan_scalar<DT>(p.scalar, p.scalar_dev) : p.scalar;
  for (int i = 1; i < d.nranks; i++) { /* from the next rank on: the ranks' writes spread over the peers */
    int q = (d.rank + i) % d.nranks;
    mscclppLL16Packet* box = ll_inbox(d, d.peer_scratch[q], parity, d.rank);
    uint64_t len = p.send_len[q];
    const char* src = p.src + p.send_off[q];
    for (uint64_t i = tid; i < npk(len); i += nt) {
      uint64_t v = mscclppLoadBytes(src + i * 8, tail(len, i));
      if (p.scale_send) v = scale8<DT>(v, sc);
      mscclppLL16Write(&box[i], v, flag);
    }
  }
  for (uint32_t q = tid; q < (uint32_t)d.nranks; q += nt)
    if ((int)q != d.rank && p.send_len[q] == 0)
      mscclppLL16Write(&ll_inbox(d, d.peer_scratch[q], parity, d.rank)[d.ll_slot / 16 - 1], 0, flag);
}

/* Phase B, GX_COPY: the own part is copied unless in place (first: its loads need not wait behind
 * the peers' packets), then the parts that arrive go to dst. */
__device__ int ll_copy(const gpu_dev& d, const gx_plan& p, uint32_t flag, uint32_t tid, uint32_t nt) {
  const char* own = p.src + p.send_off[d.rank];
  char* own_dst = p.dst + p.recv_off[d.rank];
  uint64_t own_len = p.recv_len[d.rank];
  for (uint64_t i = tid; own != own_dst && i < npk(own_len); i += nt)
    mscclppStoreBytes(own_dst + i * 8, mscclppLoadBytes(own + i * 8, tail(own_len, i)), tail(own_len, i));
  for (int i = 1; i < d.nranks; i++) { /* in the order the parts are sent: the previous rank's first */
    int q = (d.rank + d.nranks - i) % d.nranks;
    uint64_t len = p.recv_len[q];
    char* dst = p.dst + p.recv_off[q];
    const mscclppLL16Packet* box = ll_inbox(d, d.scratch, flag & 1, q);
    for (uint64_t i = tid; i < npk(len); i += nt) {
      uint64_t v = 0;
      int rc = mscclppLL16Read(&box[i], flag, &v, &d.chans[q].sem.wait);
      if (rc != MSCCLPP_DEVICE_OK) return rc;
      mscclppStoreBytes(dst + i * 8, v, tail(len, i));
    }
  }
  return MSCCLPP_DEVICE_OK;
}

/* Phase B, GX_REDUCE: packet i of every rank's part, in rank order, reduces into dst. The same
 * thread reads the own part's packet i in phase A and B and then writes dst packet i, so in-place
 * calls are safe. */
template <int DT, int OP>
__device__ int ll_reduce(const gpu_dev& d, const gx_plan& p, uint32_t flag, uint32_t tid, uint32_t nt) {
  uint64_t len = p.recv_len[d.rank];
  const char* own = p.src + p.send_off[d.rank];
  char* dst = p.dst + p.red_off;
  uint64_t pl[GPU_MAX_RANKS];
  elem_scalar sc = p.scale_send ? plan_scalar<DT>(p.scalar, p.scalar_dev) : p.scalar;
  for (uint64_t i = tid; i < npk(len); i += nt) {
    pl[d.rank] = mscclppLoadBytes(own + i * 8, tail(len, i)); /* before the polls: overlaps them */
    if (p.scale_send) pl[d.rank] = scale8<DT>(pl[d.rank], sc);
    for (int r = 0; r < d.nranks; r++) {
      if (r == d.rank) continue;
      int rc = mscclppLL16Read(&ll_inbox(d, d.scratch, flag & 1, r)[i], flag, &pl[r], &d.chans[r].sem.wait);
      if (rc != MSCCLPP_DEVICE_OK) return rc;
    }
    mscclppStoreBytes(dst + i * 8, red8<DT, OP>(pl, d.nranks), tail(len, i));
  }
  return MSCCLPP_DEVICE_OK;
}

/* Phase C: the sync packet of this launch from every peer that sent no data, then the last block
 * advances the flag. Only the next launch on this stream reads the flag and the count, after this
 * one completed: neither needs a fence, and a launch of one block needs no count. */
__device__ void ll_finish(const gpu_dev& d, const gx_plan& p, uint32_t flag, int failed) {
  if (blockIdx.x == 0 && threadIdx.x < (unsigned)d.nranks && (int)threadIdx.x != d.rank && !failed &&
      ll_reads(p, d.rank, (int)threadIdx.x) == 0) {
    int q = (int)threadIdx.x;
    uint64_t v;
    (void)mscclppLL16Read(&ll_inbox(d, d.scratch, flag & 1, q)[d.ll_slot / 16 - 1], flag, &v, &d.chans[q].sem.wait);
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (gridDim.x > 1) {
    if (atomicAdd(d.done, 1u) != gridDim.x - 1) return;
    *d.done = 0;
  }
  *(volatile uint32_t*)d.flag = flag;
}

template <int DT, int OP>
__global__ void __launch_bounds__(GPU_LL_THREADS) ll_kernel(gpu_dev d, gx_plan p) {
  uint32_t flag = *(volatile uint32_t*)d.flag + 1;
  if (flag == 0) flag = 1;
  uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x, nt = gridDim.x * blockDim.x;
  ll_send<DT>(d, p, flag, tid, nt);
  int rc = MSCCLPP_DEVICE_OK;
  if (p.mode == GX_COPY) rc = ll_copy(d, p, flag, tid, nt);
  else if (p.mode == GX_REDUCE) rc = ll_reduce<DT, OP>(d, p, flag, tid, nt);
  ll_finish(d, p, flag, __syncthreads_or(rc != MSCCLPP_DEVICE_OK));
}

typedef void (*ll_fn)(gpu_dev, gx_plan);
template <int DT, int OP>
struct LlGet {
  typedef ll_fn fn;
  static fn get() { return ll_kernel<DT, OP>; }
};

extern "C" mscclppResult_t gpu_launch_ll(const struct gpu_dev* d, const struct gx_plan* p, void* stream) {
  ll_fn k = GxPick<LlGet>::pick(p->dtype, p->op);
  uint64_t pk = (p->maxlen + 7) / 8;
  int blocks = (int)((pk + GPU_LL_THREADS - 1) / GPU_LL_THREADS);
  if (blocks < 1) blocks = 1;
  if (blocks > d->ll_blocks) blocks = d->ll_blocks;
  k<<<blocks, GPU_LL_THREADS, 0, (cudaStream_t)stream>>>(*d, *p);
  return gpu_cuda_check(cudaGetLastError(), "LL kernel launch");
}

extern "C" mscclppResult_t gpu_preload_ll(void) {
  return gpu_cuda_check(GxPick<LlGet>::preload(), "loading the ll kernels");
}
