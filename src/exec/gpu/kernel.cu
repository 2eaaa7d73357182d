/* kernel.cu - the executor kernel: one launch per call, one block per threadblock of this rank's
 * part of the plan, every op of the block in order (a pipeline repeats its nested ops over its
 * windows), a switch on the op code to small device functions (k_*.cuh).
 *
 * Per call (device state, so CUDA graph replays advance too): the call's number is the device
 * word `launches` + 1; its packet flag is that number (never 0) and, with double scratch, its
 * scratch half is its parity. The last block to finish resets the plan's semaphores and barrier
 * counts and advances `launches`. */
#include <cuda_runtime.h>

#include "exec/gpu/k_pkt.cuh"
#include "exec/gpu/launch.h"

/* One op over its window [s, s + n). */
__device__ void xk_op(const xk& k, const plan_op& op, uint64_t s, uint64_t n) {
  int port = op.chan_type == PLAN_CH_PORT;
  switch (op.code) {
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
      else xk_move(k, op, s, n);
      return;
    case PLAN_OP_GET:
    case PLAN_OP_COPY: xk_move(k, op, s, n); return;
    case PLAN_OP_PWS:
    case PLAN_OP_PWSF:
      if (port) xk_port_move(k, op, s, n);
      else xk_mem_pws(k, op, s, n);
      return;
    case PLAN_OP_RE:
    case PLAN_OP_RES:
    case PLAN_OP_RRE:
    case PLAN_OP_RRES: xk_reduce(k, op, s, n); return;
    case PLAN_OP_GLRE:
    case PLAN_OP_GLRES:
    case PLAN_OP_GSTORE:
    case PLAN_OP_GSTOREPKT: xk_switch(k, op, s, n); return;
    default: xk_pkt(k, op, s, n); return;
  }
}

/* Runs op (index `index` in the block) at pipeline iteration it of unit u (0: no pipeline), then
 * the block barrier. Returns nonzero once any thread of the block failed (the same in all). */
__device__ int xk_run(xk& k, const plan_op& op, uint32_t index, uint64_t it, uint64_t u) {
  k.op_index = index;
  k.code = op.code;
  uint64_t len = xg_op_len(&k.P->layout, k.refs + op.first_ref, op.nsrc + op.ndst), s = 0, n = 0;
  xg_window(len, it, u, op.tbg_id, op.tbg_size, k.P->align, &s, &n);
  xk_op(k, op, s, n);
  __syncthreads();
  return *k.rc;
}

/* Every op of the block, in order. */
__device__ void xk_block(xk& k) {
  const xg_block bl = k.P->blocks[k.b];
  const plan_op* ops = k.P->ops + bl.op0;
  for (uint32_t i = 0; i < bl.nops; i++) {
    const plan_op op = ops[i];
    if (op.code != PLAN_OP_PIPELINE) {
      if (xk_run(k, op, i, 0, 0)) return;
      continue;
    }
    uint64_t iters = xg_pipe_iters(&k.P->layout, &op);
    for (uint64_t it = 0; it < iters; it++)
      for (uint32_t j = 1; j <= op.nested; j++) {
        const plan_op nested = ops[i + j];
        if (xk_run(k, nested, i + j, it, op.unit_size)) return;
      }
    i += op.nested;
  }
}

/* The call's end: the last block to arrive resets the per-call state and advances `launches`. */
__device__ void xk_finish(const xg_params& P, uint64_t launch) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  /* Release: this block's updates of the semaphores and barrier words precede its arrival. */
  __threadfence();
  if (atomicAdd(P.done, 1u) + 1 != gridDim.x) return;
  /* Acquire: every other block's updates are visible before the reset below. */
  __threadfence();
  *P.done = 0;
  for (int i = 0; i < P.nsems; i++) P.sems[i] = (unsigned long long)P.sem_init[i];
  for (int i = 0; i < P.nbarriers; i++) P.bar_count[i] = 0;
  P.words->launches = launch; /* the next launch (a later kernel) reads it */
}

extern "C" __global__ void __launch_bounds__(XG_MAX_THREADS, 1) xg_kernel(const __grid_constant__ xg_params P) {
  extern __shared__ char* xg_shared_ptrs[];
  __shared__ int rc;
  __shared__ unsigned long long launch;
  if (threadIdx.x == 0) {
    rc = 0;
    launch = *(volatile uint64_t*)&P.words->launches + 1;
  }
  __syncthreads();
  xk k;
  k.P = &P;
  k.b = blockIdx.x;
  k.op_index = 0;
  k.code = -1;
  k.launch = launch;
  k.flag = (uint32_t)launch ? (uint32_t)launch : 1u;
  k.half = P.double_scratch ? (launch & 1ull) * P.layout.scr_stride : 0;
  k.ptrs = xg_shared_ptrs;
  k.rc = &rc;
  if ((int)blockIdx.x < P.nblocks) {
    const xg_block& bl = P.blocks[blockIdx.x];
    k.refs = P.refs + bl.ref0;
    k.chans = P.chans + bl.chan0;
    k.slots = P.chan_slot + bl.chan0;
    k.routes = P.ref_route + bl.ref0;
    xk_block(k);
  }
  xk_finish(P, launch);
}

extern "C" int xg_launch(const struct xg_params* p, int grid, int threads, size_t smem, void* stream) {
  xg_kernel<<<grid, threads, smem, (cudaStream_t)stream>>>(*p);
  return (int)cudaGetLastError();
}

extern "C" int xg_occupancy(int threads, size_t smem, int* per_sm) {
  return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, xg_kernel, threads, smem);
}
