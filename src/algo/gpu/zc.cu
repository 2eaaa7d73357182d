/* zc.cu - the zero-copy exchange kernel of the GPU collectives (gx_zc in gpu.h): for calls captured
 * into a CUDA graph, whose every rank's buffers are mapped on every rank (zc.c), the data moves
 * once, straight between the users' buffers over NVLink: puts into peers' outputs (allgather,
 * alltoall), reads of peers' inputs reduced into the own output (reducescatter), or both in one
 * pass (allreduce: each rank reduces its slice from every input and writes the result into every
 * output; broadcast: each rank copies its slice of the root's input into every output, or the push
 * chain; reduce: each rank reduces its slice into the root's output, or the ring).
 *
 * Block b owns bytes [b * chunk, +chunk) of every part, on every rank, and pairs with block b of
 * each peer on its own channel. Two rounds: the opening round (every peer's block b started, so
 * the stream work before the call on that rank is done and its buffers may be read and written),
 * and the closing round (this block's reads of the peer's input and writes into its output are
 * done, so the peer may return). Nothing else orders the blocks: a block reads and writes only its
 * own range, and in place the thread that reads an element of a buffer is the one that writes it.
 * Ranges touched by two ranks are disjoint (rank r writes only the slice or part that is r's). */
#include <cuda_runtime.h>

#include <mscclpp/copy.h>
#include <mscclpp/memory_channel.h>

#include "algo/gpu/gpu.h"
#include "elem/reduce.cuh"
#include "algo/gpu/round.cuh"

__device__ __forceinline__ uint64_t zc_share(uint64_t len, uint64_t lo, uint64_t chunk) {
  return len > lo ? (len - lo < chunk ? len - lo : chunk) : 0;
}

/* GX_COPY: this block's range of every part into its rank's output, peers first, starting with
 * the next rank (so the ranks' first writes spread over the peers). */
__device__ void zc_put(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  for (int i = 1; i <= d.nranks; i++) {
    int q = (d.rank + i) % d.nranks;
    uint64_t n = zc_share(p.send_len[q], lo, z.chunk);
    const char* src = p.src + p.send_off[q] + lo;
    char* dst = z.peer_dst[q] + p.recv_off[d.rank] + lo;
    if (n > 0 && src != dst) mscclppCopy(dst, src, n, threadIdx.x, blockDim.x);
  }
}

/* n bytes at src into each of ndst destinations, src read once where every address is 16-byte
 * aligned (16 bytes per thread and step; the tail and unaligned ranges copied per destination).
 * CG: the aligned loads past L1 (src written by a peer over NVLink during this kernel). */
template <bool CG = false>
__device__ void zc_copy_many(char* const* dsts, int ndst, const char* src, uint64_t n) {
  uintptr_t mis = (uintptr_t)src;
  for (int k = 0; k < ndst; k++) mis |= (uintptr_t)dsts[k];
  uint64_t done = (mis & 15) == 0 ? n / 16 * 16 : 0;
  for (uint64_t u = threadIdx.x; u < done / 16; u += blockDim.x) {
    uint4 v = CG ? __ldcg((const uint4*)src + u) : ((const uint4*)src)[u];
    for (int k = 0; k < ndst; k++) ((uint4*)dsts[k])[u] = v;
  }
  if (done < n)
    for (int k = 0; k < ndst; k++) mscclppCopy(dsts[k] + done, src + done, n - done, threadIdx.x, blockDim.x);
}

/* GX_REDUCE: this block's range of the own slice from every rank's input, into the own output
 * (and every peer's, put_reduced). Broadcast (one_src): the slice of the root's input alone,
 * copied; reduce (one_dst): into the root's output alone. */
template <int DT, int OP>
__device__ void zc_reduce(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  uint64_t n = zc_share(p.recv_len[d.rank], lo, z.chunk);
  if (n == 0) return;
  const char* srcs[GPU_MAX_RANKS];
  char* dsts[GPU_MAX_RANKS];
  int ndst = 0;
  if (p.one_dst) dsts[ndst++] = (d.rank == p.root ? p.dst : z.peer_dst[p.root]) + p.red_off + lo;
  else dsts[ndst++] = p.dst + p.red_off + lo;
  for (int i = 1; i < d.nranks && z.put_reduced; i++) dsts[ndst++] = z.peer_dst[(d.rank + i) % d.nranks] + p.red_off + lo;
  if (p.one_src) {
    zc_copy_many(dsts, ndst, z.peer_src[p.root] + p.send_off[d.rank] + lo, n);
    return;
  }
  for (int r = 0; r < d.nranks; r++) srcs[r] = z.peer_src[r] + p.send_off[d.rank] + lo;
  uint64_t count = n / sizeof(typename Ty<DT>::T);
  if (!z.two_pass || p.one_dst) {
    red_range_to<DT, OP, true>(dsts, ndst, srcs, d.nranks, count, threadIdx.x, blockDim.x);
    return;
  }
  /* Two passes: every read of the range (the peers' inputs) before any put into a peer's output,
   * so the links carry reads, then writes, not both at once. Staggered (two_pass 2), the reads
   * go one peer at a time, accumulated in the own output: every rank reads from a different peer
   * at once (a permutation, as in a ring) instead of from all of them. Barriers order this block's
   * writes of the own output before its reads of them (passes split the range differently when
   * it is not 16-byte aligned everywhere). In place, a peer's input range read in the first pass
   * is the output range written in the second, by this block alone. */
  if (z.two_pass == 2 && OP != ELEM_OP_AVG && d.nranks > 2) {
    const char* acc[2] = {srcs[d.rank], NULL};
    for (int i = 1; i < d.nranks; i++) {
      acc[1] = srcs[(d.rank + i) % d.nranks];
      red_range_to<DT, OP, true>(dsts, 1, acc, 2, count, threadIdx.x, blockDim.x);
      __syncthreads();
      acc[0] = dsts[0];
    }
  } else {
    red_range_to<DT, OP, true>(dsts, 1, srcs, d.nranks, count, threadIdx.x, blockDim.x);
    __syncthreads();
  }
  if (ndst > 1) zc_copy_many(dsts + 1, ndst - 1, dsts[0], n);
}

/* Bytes of a push chain's step at offset `at` of a block's range [lo, lo + chunk): chain_sub, or
 * what is left of the range (the last step stops where the next block's range starts). */
__device__ __forceinline__ uint64_t zc_step(const gx_zc& z, uint64_t lo, uint64_t at) {
  return lo + z.chunk - at < z.chain_sub ? lo + z.chunk - at : z.chain_sub;
}

/* Broadcast as a push chain (z.chain_sub > 0; the root-free plan: slice q is rank q's, the root has
 * none). Each step covers chain_sub bytes of this block's range of every slice: the root puts slice
 * q's bytes into rank q's output (and its own), then signals q on this block's channel; rank q
 * waits for that signal and puts the same bytes from its output into the other non-roots'. Every
 * byte leaves the root once and the links carry writes alone; the root streams while the ranks
 * forward the step before. Every rank counts the same steps (from maxlen and chunk), so the root's
 * signals and a rank's waits pair up. Nonzero in every thread when a wait failed. */
__device__ int zc_bcast_chain(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  uint64_t end = p.maxlen < lo + z.chunk ? p.maxlen : lo + z.chunk;
  uint64_t steps = end > lo ? (end - lo + z.chain_sub - 1) / z.chain_sub : 0;
  const mscclppMemoryChannel* ch = d.chans + (uint64_t)blockIdx.x * (uint64_t)d.nranks;
  const int t = (int)threadIdx.x;
  for (uint64_t s = 0; s < steps; s++) {
    uint64_t at = lo + s * z.chain_sub;
    if (d.rank == p.root) {
      for (int i = 1; i < d.nranks; i++) {
        int q = (d.rank + i) % d.nranks;
        uint64_t n = zc_share(p.send_len[q], at, zc_step(z, lo, at)), off = p.send_off[q] + at;
        const char* src = z.peer_src[d.rank] + off;
        char* dsts[2] = {z.peer_dst[q] + off, z.peer_dst[d.rank] + off};
        if (n > 0) zc_copy_many(dsts, dsts[1] == src ? 1 : 2, src, n);
      }
      /* The barrier orders every thread's puts of this step before the signals, which release them
       * to rank q: after its wait, q reads them. */
      __syncthreads();
      if (t < d.nranks && t != d.rank) mscclppMemoryChannelSignal(&ch[t]);
      continue;
    }
    int rc = t == p.root ? mscclppMemoryChannelWait(&ch[t]) : MSCCLPP_DEVICE_OK;
    if (__syncthreads_or(rc != MSCCLPP_DEVICE_OK)) return 1; /* the device-error record names the root */
    uint64_t n = zc_share(p.send_len[d.rank], at, zc_step(z, lo, at)), off = p.send_off[d.rank] + at;
    char* dsts[GPU_MAX_RANKS];
    int ndst = 0;
    for (int i = 1; i < d.nranks; i++) {
      int q = (d.rank + i) % d.nranks;
      if (q != p.root) dsts[ndst++] = z.peer_dst[q] + off;
    }
    if (n > 0 && ndst > 0) zc_copy_many<true>(dsts, ndst, z.peer_dst[d.rank] + off, n);
  }
  return 0;
}

/* Reduce as a ring (p.ring: the root-alone plan, maxlen the message's bytes; z.ring_sub > 0). Ranks
 * root + 1, root + 2, ..., root form a chain, and step s covers ring_sub bytes of this block's range
 * [lo, lo + chunk): the first rank puts its input's bytes into slot s mod ring_slots of its
 * successor's ring (this block's share of the successor's bulk region), each later rank waits for
 * them, adds its input and puts the sum into its successor's slot, and the root adds its input into
 * its output. Every link carries each byte once, as writes. On this block's channels a rank signals
 * its successor after each put (data) and its predecessor after reading each slot (a credit); it
 * puts into a slot of its successor's again only after that slot's credit, and takes every credit
 * before it returns, so each channel's signals and waits pair up and the closing round that follows
 * counts alike on every rank. Every rank counts the same steps (from maxlen, chunk and ring_sub).
 * Nonzero in every thread when a wait failed (the device-error record names the peer). */
template <int DT, int OP>
__device__ int zc_reduce_ring(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  uint64_t end = p.maxlen < lo + z.chunk ? p.maxlen : lo + z.chunk;
  uint64_t steps = end > lo ? (end - lo + z.ring_sub - 1) / z.ring_sub : 0;
  const int n = d.nranks, t = (int)threadIdx.x, pred = (d.rank + n - 1) % n, succ = (d.rank + 1) % n;
  const bool first = pred == p.root, last = d.rank == p.root;
  const mscclppMemoryChannel* ch = d.chans + (uint64_t)blockIdx.x * (uint64_t)n;
  uint64_t ring = d.ll_bytes + (uint64_t)blockIdx.x * z.ring_slots * z.ring_sub;
  char* mine = d.scratch + ring;
  char* next = d.peer_scratch[succ] + ring;
  int rc = MSCCLPP_DEVICE_OK;
  for (uint64_t s = 0; s < steps; s++) {
    uint64_t at = lo + s * z.ring_sub, nb = end - at < z.ring_sub ? end - at : z.ring_sub;
    uint64_t slot = s % z.ring_slots * z.ring_sub;
    if (t == 0 && !first) rc = mscclppMemoryChannelWait(&ch[pred]); /* the partial of step s is in my slot */
    if (t == 32 && !last && s >= z.ring_slots) rc = mscclppMemoryChannelWait(&ch[succ]); /* its slot is read */
    if (__syncthreads_or(rc != MSCCLPP_DEVICE_OK)) return 1;
    const char* in = z.peer_src[d.rank] + at;
    if (first) {
      mscclppCopy(next + slot, in, nb, t, blockDim.x);
    } else {
      const char* srcs[2] = {mine + slot, in};
      char* dst = last ? p.dst + p.red_off + at : next + slot;
      red_range<DT, OP, true>(dst, srcs, 2, nb / sizeof(typename Ty<DT>::T), t, blockDim.x);
    }
    /* Every thread's put of step s and read of the slot come before the signals: the data signal
     * releases the put to the successor, the credit tells the predecessor the slot may be reused. */
    __syncthreads();
    if (t == 0 && !last) mscclppMemoryChannelSignal(&ch[succ]);
    if (t == 32 && !first) mscclppMemoryChannelSignal(&ch[pred]);
  }
  uint64_t owed = steps < z.ring_slots ? steps : z.ring_slots;
  for (uint64_t i = 0; t == 32 && !last && i < owed && rc == MSCCLPP_DEVICE_OK; i++) rc = mscclppMemoryChannelWait(&ch[succ]);
  return __syncthreads_or(rc != MSCCLPP_DEVICE_OK);
}

/* Staged calls (z.staged): the stage is the bulk region of the scratch, laid out like the buffer
 * the peers would otherwise touch (input offsets for reductions, output offsets for copies). */
__device__ __forceinline__ char* zs_stage(const gpu_dev& d) { return d.scratch + d.ll_bytes; }

/* Before the opening round: this block's range of every part a peer reads (GX_REDUCE: part q of
 * the input, read by rank q) into the own stage at the same offset. */
__device__ void zs_stage_in(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  for (int q = 0; q < d.nranks; q++) {
    uint64_t n = zc_share(p.send_len[q], lo, z.chunk);
    if (q != d.rank && n > 0) mscclppCopy(zs_stage(d) + p.send_off[q] + lo, p.src + p.send_off[q] + lo, n, threadIdx.x, blockDim.x);
  }
}

/* After the second round: this block's range of every part a peer wrote into the own stage (rank
 * q's reduced slice at its offset, or what q put at recv_off[q]) into the output. */
__device__ void zs_stage_out(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  for (int q = 0; q < d.nranks; q++) {
    uint64_t off = p.mode == GX_COPY ? p.recv_off[q] : p.send_off[q];
    uint64_t n = zc_share(p.mode == GX_COPY ? p.recv_len[q] : p.send_len[q], lo, z.chunk);
    if (q != d.rank && n > 0) mscclppCopy(p.dst + off + lo, zs_stage(d) + off + lo, n, threadIdx.x, blockDim.x);
  }
}

/* Staged: stage in, opening round (the peers' stages hold their parts and their earlier kernels
 * are done with the stages), the zero-copy body over the stages, a round (every write into the own
 * stage landed), stage out, closing round (no peer's next kernel writes the own stage before it
 * was read). Reductions without put_reduced write no stage: their second round closes. */
template <int DT, int OP>
__device__ void zs_body(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  bool out = p.mode == GX_COPY || z.put_reduced || p.one_dst;
  if (p.mode == GX_REDUCE && (!p.one_src || d.rank == p.root)) zs_stage_in(d, p, z, lo);
  __syncthreads();
  if (gx_round(d, true)) return; /* the rank's device-error record says who timed out */
  if (p.mode == GX_COPY) zc_put(d, p, z, lo);
  else if (p.mode == GX_REDUCE) zc_reduce<DT, OP>(d, p, z, lo);
  __syncthreads();
  if (gx_round(d, true) || !out) return;
  if (!p.one_dst || d.rank == p.root) zs_stage_out(d, p, z, lo); /* reduce: only the root has an output */
  __syncthreads();
  (void)gx_round(d, true); /* the closing round */
}

/* Eager zero copy (z.ezc, ezc.c): rank `who`'s descriptor slot in the meta region of the scratch at
 * base (this rank's or a peer's). */
__device__ __forceinline__ char* ezc_slot(const gpu_dev& d, char* base, int who) {
  return base + gpu_meta_off(&d) + (uint64_t)who * EZC_DESC_BYTES;
}

/* Before the opening round: this rank's descriptor into every peer's slot `rank`, 16 bytes per
 * thread, all stores in flight at once. Every block writes the same bytes, so the round of
 * whichever block a peer's block pairs with has made them visible to it (the signal releases this
 * block's stores, ordered before it by the caller's __syncthreads). sd[rank] is the staging copy. */
__device__ void ezc_post(const gpu_dev& d, const gx_zc& z, ezc_desc* sd) {
  if (threadIdx.x == 0) sd[d.rank] = z.me;
  __syncthreads();
  const int words = EZC_DESC_BYTES / 16;
  int q = (int)threadIdx.x / words, w = (int)threadIdx.x % words;
  if (q < d.nranks && q != d.rank)
    ((uint4*)ezc_slot(d, d.peer_scratch[q], d.rank))[w] = ((const uint4*)&sd[d.rank])[w];
}

/* After the opening round: every peer's descriptor from the own meta region into sd (16 bytes per
 * thread, past L1: the peers wrote them over NVLink this launch), and whether the whole call goes
 * zero copy: every rank can, and every rank has imported every other rank's announcements this
 * call names. Every block of every rank reads the same descriptors, so all decide alike. When so,
 * sz gets every rank's buffers as mapped here (from the own table), its chunk and put_reduced. */
__device__ bool ezc_decide(const gpu_dev& d, const gx_zc& z, gx_zc& sz, ezc_desc* sd) {
  const int words = EZC_DESC_BYTES / 16;
  int t = (int)threadIdx.x, q = t / words, w = t % words;
  if (q < d.nranks && q != d.rank)
    ((uint4*)&sd[q])[w] = __ldcg((const uint4*)ezc_slot(d, d.scratch, q) + w);
  if (t == 0) {
    sz.chunk = z.chunk, sz.put_reduced = z.put_reduced, sz.two_pass = z.two_pass, sz.chain_sub = z.chain_sub;
    sz.ring_sub = z.ring_sub, sz.ring_slots = z.ring_slots;
  }
  __syncthreads();
  bool ok = true;
  if (t < d.nranks) {
    const ezc_desc& m = sd[t];
    uint64_t need = m.in_aseq > m.out_aseq ? m.in_aseq : m.out_aseq;
    ok = m.usable != 0;
    for (int i = 0; i < d.nranks && ok; i++) ok = i == t || sd[i].seen[t] >= need;
    if (t == d.rank) {
      sz.peer_src[t] = z.peer_src[t], sz.peer_dst[t] = z.peer_dst[t];
    } else if (ok) { /* rows 1..seen[t] of t's part of the table were written before this kernel */
      const ezc_entry* row = z.table + (uint64_t)t * EZC_SLOTS;
      /* aseq 0: a buffer the call does not have there (a broadcast's input or a reduce's output
       * off the root), never read */
      const char* in = m.in_aseq ? (const char*)__ldg((const unsigned long long*)&row[m.in_aseq - 1].base) : NULL;
      char* out = m.out_aseq ? (char*)__ldg((const unsigned long long*)&row[m.out_aseq - 1].base) : NULL;
      sz.peer_src[t] = in ? in + m.in_off : NULL, sz.peer_dst[t] = out ? out + m.out_off : NULL;
    }
  }
  return __syncthreads_and(ok) != 0;
}

/* Eager zero copy: descriptors, the opening round, then either the zero-copy body over the users'
 * buffers and the closing round, or (some rank's buffers not yet known to some peer) the whole
 * staged body, every block of every rank alike. A probe (z.went: a call larger than the stage)
 * runs no staged body: it records the outcome for the skippable launches after it. */
template <int DT, int OP>
__device__ void ezc_body(const gpu_dev& d, const gx_plan& p, const gx_zc& z, uint64_t lo) {
  __shared__ gx_zc sz;
  __shared__ __align__(16) ezc_desc sd[GPU_MAX_RANKS];
  ezc_post(d, z, sd);
  __syncthreads();
  if (gx_round(d, true)) return; /* the rank's device-error record says who timed out */
  bool zc = ezc_decide(d, z, sz, sd);
  /* Read by the skippable launches after this one on the stream (a kernel boundary orders it). */
  if (z.went != NULL && blockIdx.x == 0 && threadIdx.x == 0) *z.went = zc ? 1u : 0u;
  if (!zc) {
    /* A probe's miss: the launches after it do the call. Their rounds with every peer come after
     * every peer's probe, so no descriptor is overwritten before its reader is done. */
    if (z.went == NULL) zs_body<DT, OP>(d, p, z, lo);
    return;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(z.hits, 1u);
  if (p.one_src && sz.chain_sub > 0) {
    if (zc_bcast_chain(d, p, sz, lo)) return;
  } else if (p.ring) {
    if (zc_reduce_ring<DT, OP>(d, p, sz, lo)) return;
  } else if (p.mode == GX_COPY) zc_put(d, p, sz, lo);
  else if (p.mode == GX_REDUCE) zc_reduce<DT, OP>(d, p, sz, lo);
  __syncthreads();
  (void)gx_round(d, true); /* the closing round */
}

/* Two blocks per SM (the registers capped to fit): MSCCLPP_ALGO_GPU_BLOCKS' 256 blocks are all resident
 * on a 132-SM GPU, so no block's rounds wait for a wave of blocks before it to finish. */
template <int DT, int OP>
__global__ void __launch_bounds__(GPU_BULK_THREADS, 2) zc_kernel(gpu_dev d, gx_plan p, gx_zc z) {
  if (p.skip != NULL && *p.skip != 0) return; /* the probe before it did the call (every rank alike) */
  uint64_t lo = (uint64_t)blockIdx.x * z.chunk;
  if (z.ezc) {
    ezc_body<DT, OP>(d, p, z, lo);
    return;
  }
  if (z.staged) {
    zs_body<DT, OP>(d, p, z, lo);
    return;
  }
  if (gx_round(d, true, z.open_relaxed != 0)) return; /* the device-error record names the peer */
  if (p.one_src && z.chain_sub > 0) {
    if (zc_bcast_chain(d, p, z, lo)) return; /* the device-error record names the root */
  } else if (p.ring) {
    if (zc_reduce_ring<DT, OP>(d, p, z, lo)) return;
  } else if (p.mode == GX_COPY) zc_put(d, p, z, lo);
  else if (p.mode == GX_REDUCE) zc_reduce<DT, OP>(d, p, z, lo);
  __syncthreads();
  (void)gx_round(d, true); /* the closing round */
}

typedef void (*zc_fn)(gpu_dev, gx_plan, gx_zc);
template <int DT, int OP>
struct ZcGet {
  typedef zc_fn fn;
  static fn get() { return zc_kernel<DT, OP>; }
};

extern "C" mscclppResult_t gpu_launch_zc(const struct gpu_dev* d, const struct gx_plan* p, const struct gx_zc* z,
                                         void* stream) {
  zc_fn k = GxPick<ZcGet>::pick(p->dtype, p->op);
  uint64_t blocks = z->chunk ? (p->maxlen + z->chunk - 1) / z->chunk : 1;
  if (blocks < 1) blocks = 1;
  k<<<(unsigned)blocks, GPU_BULK_THREADS, 0, (cudaStream_t)stream>>>(*d, *p, *z);
  return gpu_cuda_check(cudaGetLastError(), "zero-copy kernel launch");
}

extern "C" mscclppResult_t gpu_preload_zc(void) {
  return gpu_cuda_check(GxPick<ZcGet>::preload(), "loading the zero-copy kernels");
}

extern "C" mscclppResult_t gpu_resident_zc(int* per_sm) {
  return gpu_cuda_check(GxPick<ZcGet>::min_resident(GPU_BULK_THREADS, per_sm), "the zero-copy kernels' occupancy");
}
