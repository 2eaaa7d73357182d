/* kernel.cu - the executor kernel: one launch per call, one block per threadblock of this rank's
 * part of the plan, every op of the block in order (a pipeline repeats its nested ops over its
 * windows), a switch on the op code to small device functions (k_*.cuh).
 *
 * Per call (device state, so CUDA graph replays advance too): the call's number is the device
 * word `launches` + 1; its packet flag is that number (never 0) and, with double scratch, its
 * scratch half is its parity. The last block to finish resets the plan's semaphores and barrier
 * counts and advances `launches` (calls of plans that need neither number nor reset skip that
 * count: xk_finish).
 *
 * Each block starts by copying its program segment, its op table, the parameters and the call's
 * buffer table into shared memory (one round of loads): decoding an op then touches no global
 * memory, where each dependent read costs the op hundreds of cycles, and with the op table the op's
 * window and addresses are loads instead of chains of divisions (docs/plans.md, Plan images). */
#include <cuda_runtime.h>

#include "exec/gpu/k_pkt.cuh"
#include "exec/gpu/launch.h"

/* An op code the switches below have no case for (a corrupted op): the block stops, and the host
 * reports the op and its code (xg_check). */
__device__ __noinline__ void xk_bad_op(const xk& k) { xk_fail(k, XG_FAIL_BAD_OP, -1); }

/* One op of a lean plan (xg_op_lean: copies, memory puts and gets, packet ops). Every op code is
 * listed; those a lean plan never holds stop the block, as an unknown code does. */
__device__ __forceinline__ void xk_op_lean(const xk& k, const plan_op& op, uint64_t s, uint64_t n, char* const* p) {
  switch ((enum plan_op_code)op.code) {
    case PLAN_OP_NOP:
    case PLAN_OP_PIPELINE: return;
    case PLAN_OP_PUT:
    case PLAN_OP_GET:
    case PLAN_OP_COPY: xk_move(k, op, s, n, p); return;
    case PLAN_OP_CPKT:
    case PLAN_OP_PPKT: xk_pkt_copy(k, op, s, n, p); return;
    case PLAN_OP_UPKT: xk_pkt_unpack(k, op, s, n, p); return;
    case PLAN_OP_RPPKT: xk_pkt_forward(k, op, s, n, p); return;
    case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT: xk_pkt_reduce(k, op, s, n, p); return;
    case PLAN_OP_BARRIER:
    case PLAN_OP_SEM_ACQUIRE:
    case PLAN_OP_SEM_RELEASE:
    case PLAN_OP_SIGNAL:
    case PLAN_OP_RLXSIGNAL:
    case PLAN_OP_WAIT:
    case PLAN_OP_RLXWAIT:
    case PLAN_OP_FLUSH:
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
    case PLAN_OP_RE:
    case PLAN_OP_RES:
    case PLAN_OP_RRE:
    case PLAN_OP_RRES:
    case PLAN_OP_GLRE:
    case PLAN_OP_GLRES:
    case PLAN_OP_GSTORE:
    case PLAN_OP_GSTOREPKT: break; /* never in a lean plan (xg_op_lean) */
  }
  xk_bad_op(k);
}

/* One op over its window [s, s + n); LEAN: the plan is lean (the kernel then has none of the other
 * ops' code in its op loop: fewer registers spilled there, a shorter path). Every op code has its
 * case; a code none takes stops the block (xk_bad_op). */
template <bool LEAN>
__device__ __forceinline__ void xk_op(const xk& k, const plan_op& op, uint64_t s, uint64_t n, char* const* p) {
  if (LEAN) {
    xk_op_lean(k, op, s, n, p);
    return;
  }
  int port = op.chan_type == PLAN_CH_PORT;
  switch ((enum plan_op_code)op.code) {
    case PLAN_OP_NOP: /* the __syncthreads after every op is the block-wide barrier */
    case PLAN_OP_PIPELINE: return;
    case PLAN_OP_BARRIER: xk_barrier(k, op); return;
    case PLAN_OP_SEM_ACQUIRE:
    case PLAN_OP_SEM_RELEASE: xk_sem(k, op); return;
    case PLAN_OP_SIGNAL: xk_signal(k, op, 0); return;
    case PLAN_OP_RLXSIGNAL: xk_signal(k, op, 1); return;
    case PLAN_OP_WAIT: xk_wait(k, op, 0); return;
    case PLAN_OP_RLXWAIT: xk_wait(k, op, 1); return;
    case PLAN_OP_FLUSH: xk_flush(k, op); return;
    case PLAN_OP_PUT:
      if (port) xk_port_move(k, op, s, n);
      else xk_move(k, op, s, n, p);
      return;
    case PLAN_OP_GET:
    case PLAN_OP_COPY: xk_move(k, op, s, n, p); return;
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
      if (port) xk_port_move(k, op, s, n);
      else xk_mem_pws(k, op, s, n);
      return;
    case PLAN_OP_RE:
    case PLAN_OP_RES:
    case PLAN_OP_RRE:
    case PLAN_OP_RRES: xk_reduce(k, op, s, n); return;
    case PLAN_OP_CPKT:
    case PLAN_OP_PPKT: xk_pkt_copy(k, op, s, n, p); return;
    case PLAN_OP_UPKT: xk_pkt_unpack(k, op, s, n, p); return;
    case PLAN_OP_RPPKT:
      if (port) xk_pkt_port_forward(k, op, s, n);
      else xk_pkt_forward(k, op, s, n, p);
      return;
    case PLAN_OP_REPKT:
    case PLAN_OP_RESPKT:
    case PLAN_OP_RECPKT:
    case PLAN_OP_RECSPKT: xk_pkt_reduce(k, op, s, n, p); return;
    case PLAN_OP_GLRE:
    case PLAN_OP_GLRES: xk_switch(k, op, s, n, XK_SW_REDUCE); return;
    case PLAN_OP_GSTORE: xk_switch(k, op, s, n, XK_SW_STORE); return;
    case PLAN_OP_GSTOREPKT: xk_switch(k, op, s, n, XK_SW_STORE_PKT); return;
  }
  xk_bad_op(k);
}

/* Runs op (index `index` in the block) at pipeline iteration it of unit u (0: no pipeline), then
 * the block barrier. Returns nonzero once any thread of the block failed (the same in all).
 * Every thread stores the same op index and code into the shared view (read only by xk_fail). */
template <bool LEAN>
__device__ int xk_run(xk& k, const plan_op& op, uint32_t index, uint64_t it, uint64_t u) {
  k.op_index = index;
  k.code = op.code;
  uint64_t s = 0, n = 0;
  char* const* p = NULL; /* the op's pointers when the table has them as they are (else xk_ptrs) */
  const xg_win* win = k.win;
  if (win && !u) {
    s = win[index].s, n = win[index].n;
    p = k.tptr + op.first_ref;
  } else {
    uint64_t len = win ? win[index].n : xg_op_len(&k.P->layout, k.refs + op.first_ref, op.nsrc + op.ndst);
    xg_window(len, it, u, op.tbg_id, op.tbg_size, k.P->align, &s, &n);
  }
  xk_op<LEAN>(k, op, s, n, p);
  __syncthreads();
  return *k.rc;
}

/* Every op of the block, in order. */
template <bool LEAN>
__device__ void xk_block(xk& k) {
  const plan_op* ops = k.ops;
  for (uint32_t i = 0; i < k.nops; i++) {
    const plan_op& op = ops[i];
    if (op.code != PLAN_OP_PIPELINE) {
      if (xk_run<LEAN>(k, op, i, 0, 0)) return;
      continue;
    }
    uint64_t iters = k.win ? k.win[i].n : xg_pipe_iters(&k.P->layout, &op);
    for (uint64_t it = 0; it < iters; it++)
      for (uint32_t j = 1; j <= op.nested; j++)
        if (xk_run<LEAN>(k, ops[i + j], i + j, it, op.unit_size)) return;
    i += op.nested;
  }
}

/* The call's end: the last block to arrive resets the per-call state and advances `launches` (a
 * launch of one block needs no count: that block is the last).
 * A call that is not counted (no packets, no double scratch, nothing to reset) uses its number
 * only to name itself in error reports: block 0 advances it without waiting for an answer, and no
 * block waits for the others (a late block may then report the next number). */
__device__ void xk_finish(const xg_params& P, uint64_t launch) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  if (!P.counted) {
    if (blockIdx.x == 0) asm volatile("red.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(&P.words->launches) : "memory");
    return;
  }
  /* With semaphores or barriers to reset - release: the block's updates of those words (ordered
   * before thread 0 by the __syncthreads) precede its arrival; acquire: the last to arrive sees
   * every other block's before the reset below. Without, the count orders nothing (the next
   * kernel sees `launches` through the kernel boundary), and skipping the fences saves the wait
   * for this block's writes and the L1 invalidation at every block's end. */
  unsigned prev = 0; /* one block: it is the last, its updates ordered before thread 0 by the barrier */
  if (gridDim.x > 1 && P.nsems == 0 && P.nbarriers == 0) /* nothing of the others' to read: counting only */
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(P.done) : "memory");
  else if (gridDim.x > 1)
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(P.done) : "memory");
  if (prev + 1 != gridDim.x) return;
  *P.done = 0;
  for (int i = 0; i < P.nsems; i++) P.sems[i] = (unsigned long long)P.sem_init[i];
  for (int i = 0; i < P.nbarriers; i++) P.bar_count[i] = 0;
  P.words->launches = launch; /* the next launch (a later kernel) reads it */
}

/* The block's start, every thread: copies the parameters to Ps, the call's buffer table to io
 * and, when staged, the block's program segment (from) to seg and its op table (tab, if any) to
 * stab (all shared: seg is always the shared copy's place, so the stores are shared-memory
 * stores), one item per thread and round, so that a small block issues every load at once.
 * Reading the parameters through a pointer (as the ops do, by k.P) would go to memory once per
 * line and launch; from shared memory it costs nothing. */
__device__ void xk_stage(const xg_params& P, const char* from, const char* tab, xg_params* Ps, char** io, char* seg,
                         char* stab) {
  uint32_t nio = 5u * (uint32_t)P.nranks, n2 = 2u * (uint32_t)P.nranks, npar = sizeof(xg_params) / 8u;
  uint32_t nvec = P.stage && from ? P.seg_stride / 16u : 0u, ntab = tab ? P.tab_stride / 16u : 0u;
  for (uint32_t i = threadIdx.x; i < npar + nio + nvec + ntab; i += blockDim.x) {
    if (i < npar) {
      ((uint2*)Ps)[i] = ((const uint2*)&P)[i];
    } else if (i < npar + nio) {
      uint32_t j = i - npar, at = j < n2 ? j : j < 2 * n2 ? j - n2 : j - 2 * n2;
      char* const* t = j < n2 ? P.io : j < 2 * n2 ? P.io_reg : P.scr;
      io[j] = t ? t[at] : NULL; /* no table: the plan uses no such buffer (no scratch, say) */
    } else if (i < npar + nio + nvec) {
      uint32_t v = i - npar - nio;
      ((uint4*)seg)[v] = ((const uint4*)from)[v];
    } else {
      uint32_t v = i - npar - nio - nvec;
      ((uint4*)stab)[v] = ((const uint4*)tab)[v];
    }
  }
}

/* Thread 0: where the block's ops, references, channel references and table lie in the segment
 * seg (and the table stab) whose header is h (none for a block beyond the plan's: seg NULL). Only
 * addresses: the staged copies may still be in flight (the caller's barrier orders them). */
__device__ void xk_program(xk& k, const char* seg, const char* stab, xg_seg_head h) {
  k.nops = 0;
  k.win = NULL, k.tptr = NULL;
  if (!seg) return;
  struct xg_seg sg;
  xg_seg_layout(h.nops, h.nrefs, h.nchans, &sg);
  k.nops = h.nops;
  k.ops = (const plan_op*)(seg + sg.ops);
  k.refs = (const plan_ref*)(seg + sg.refs);
  k.routes = (const int32_t*)(seg + sg.routes);
  k.chans = (const plan_chanref*)(seg + sg.chans);
  k.slots = (const int32_t*)(seg + sg.slots);
  if (!stab) return;
  k.win = (const xg_win*)stab;
  k.tptr = (char* const*)(stab + xg_tab_ptrs(h.nops, h.nrefs, k.half ? 1u : 0u)); /* this call's half */
}

template <bool LEAN>
__global__ void __launch_bounds__(XG_MAX_THREADS, 1) xg_kernel(const __grid_constant__ xg_params P) {
  extern __shared__ __align__(16) char xg_smem[];
  __shared__ int rc;
  /* The block's view and the parameters are the same for all its threads: one copy of each in
   * shared memory (a per-thread view would live in local memory, its address being taken). */
  __shared__ xk k;
  __shared__ xg_params Ps;
  const char* from = (int)blockIdx.x < P.nblocks ? P.prog + (uint64_t)blockIdx.x * P.seg_stride : NULL;
  char** io = (char**)(xg_smem + P.smem_io);
  const char* seg = P.stage || !from ? xg_smem + P.smem_prog : from;
  const char* tab = from && P.tab ? P.tab + (uint64_t)blockIdx.x * P.tab_stride : NULL; /* only when staged */
  /* Thread 0 issues the reads of the call counter and of the segment's header first and uses them
   * only after staging, so their latency overlaps the staging loads instead of preceding them, and
   * it lays out the block's view from its own copy of the header: one barrier for both. */
  uint64_t launch = threadIdx.x == 0 ? *(volatile uint64_t*)&P.words->launches + 1 : 0;
  xg_seg_head head = {0, 0, 0, 0};
  if (threadIdx.x == 0 && from) head = *(const xg_seg_head*)from;
  xk_stage(P, from, tab, &Ps, io, xg_smem + P.smem_prog, xg_smem + P.smem_tab);
  if (threadIdx.x == 0) {
    rc = 0;
    k.P = &Ps;
    k.b = blockIdx.x;
    k.op_index = 0;
    k.code = -1;
    k.launch = launch;
    k.flag = (uint32_t)launch ? (uint32_t)launch : 1u;
    k.pkt = P.pkt;
    k.half = P.double_scratch ? (launch & 1ull) * P.layout.scr_stride : 0;
    k.ptrs = (char**)xg_smem;
    k.io = io, k.io_reg = io + 2 * P.nranks, k.scr = io + 4 * P.nranks;
    k.rc = &rc;
    xk_program(k, from ? seg : NULL, tab ? xg_smem + P.smem_tab : NULL, head);
  }
  __syncthreads();
  xk_block<LEAN>(k);
  xk_finish(P, k.launch);
}

extern "C" int xg_launch(const struct xg_params* p, int lean, int grid, int threads, size_t smem, void* stream) {
  if (lean)
    xg_kernel<true><<<grid, threads, smem, (cudaStream_t)stream>>>(*p);
  else
    xg_kernel<false><<<grid, threads, smem, (cudaStream_t)stream>>>(*p);
  return (int)cudaGetLastError();
}

extern "C" int xg_smem_optin(int lean, size_t smem) {
  return (int)cudaFuncSetAttribute(lean ? xg_kernel<true> : xg_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)smem);
}

extern "C" int xg_occupancy(int lean, int threads, size_t smem, int* per_sm) {
  return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, lean ? xg_kernel<true> : xg_kernel<false>, threads,
                                                            smem);
}
