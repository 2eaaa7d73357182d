/* k_data.cuh - the executor kernel's data ops: put / get / copy (and pws / pwsf), the reductions re
 * / res / rre / rres, and the pointer setup every op starts with.
 *
 * Memory channels (and channel type none) move data with loads and stores through peer memory:
 * every buffer of every rank is mapped here. Port channels send their puts through the proxy
 * (port_channel.h): a trigger per destination, whose offsets count from the start of the
 * registrations on both sides; get and the remote reads of rre/rres have no proxy form and read
 * through peer memory on port channels too. */
#ifndef MPP_EXEC_GPU_K_DATA_CUH_
#define MPP_EXEC_GPU_K_DATA_CUH_

#include <mscclpp/copy.h>

#include "exec/gpu/k_reduce.cuh"
#include "exec/gpu/k_sync.cuh"

/* The op's sources, then destinations, at window start s (packet references, xg_ref_pkt: at twice
 * the data offset). With an op table and s its window start: the staged table itself (the
 * addresses for the call's scratch half). Otherwise the shared pointer array, filled from the
 * table (moved to s: a pipeline's iteration) or worked out, and a __syncthreads after (every
 * thread calls it; the choice is the same in all). */
__device__ char* const* xk_ptrs(const xk& k, const plan_op& op, uint64_t s) {
  uint64_t ds = k.win ? s - k.win[k.op_index].s : 0;
  if (k.win && ds == 0) return k.tptr + op.first_ref;
  int n = op.nsrc + op.ndst;
  for (int i = (int)xk_tid(); i < n; i += (int)xk_nt()) {
    int pkt = xg_ref_pkt(op.code, i, op.nsrc);
    k.ptrs[i] = k.win ? k.tptr[op.first_ref + i] + (pkt ? 2 * ds : ds) : xk_ptr(k, k.refs[op.first_ref + i], s, pkt);
  }
  __syncthreads();
  return k.ptrs;
}

/* 1 when every pointer of ptrs[0..n) is 16-byte aligned (the vector path of the reductions). */
__device__ __forceinline__ int xk_al16(char* const* p, int n, uint64_t len) {
  uintptr_t any = (uintptr_t)len;
  for (int i = 0; i < n; i++) any |= (uintptr_t)p[i];
  return (any & 15) == 0;
}

/* memmove of n bytes between ranges that overlap (rare: an in-place plan copying within one
 * buffer): the block copies nt bytes at a time through registers, in the direction that never
 * overwrites a byte before it is read. Every thread calls it. */
__device__ void xk_memmove(char* d, const char* s, uint64_t n) {
  uint32_t tid = xk_tid(), nt = xk_nt();
  uint64_t steps = (n + nt - 1) / nt;
  for (uint64_t st = 0; st < steps; st++) {
    uint64_t i = (d < s ? st : steps - 1 - st) * nt + tid;
    char v = i < n ? s[i] : 0;
    __syncthreads();
    if (i < n) d[i] = v;
    __syncthreads();
  }
}

/* memmove semantics, cooperative (the pointers are the same in every thread). */
__device__ __forceinline__ void xk_copy(char* d, const char* s, uint64_t n) {
  if (d == s || n == 0) return;
  if (d < s + n && s < d + n) {
    xk_memmove(d, s, n);
    return;
  }
  mscclppCopy(d, s, n, xk_tid(), xk_nt());
}

/* put / get / copy through memory: one source to every destination, or source i to destination i.
 * p: the op's pointers when the caller has them (the op table's, as they are), NULL: xk_ptrs. */
__device__ void xk_move(const xk& k, const plan_op& op, uint64_t s, uint64_t n, char* const* p) {
  if (!p) p = xk_ptrs(k, op, s);
  for (int d = 0; d < op.ndst; d++) xk_copy(p[op.nsrc + d], p[op.nsrc == op.ndst ? d : 0], n);
}

/* One port put: n bytes from src (this rank's buffer of type sbt) to destination reference di of
 * the op (dst: its mapped address), through the port the host bound for it. extra:
 * MSCCLPP_TRIGGER_FLAG / _SYNC carried by the same trigger (SYNC: waits for the proxy). */
__device__ int xk_port_put(const xk& k, const plan_op& op, int di, const char* dst, const char* src, int sbt, uint64_t n,
                           uint32_t extra) {
  const plan_ref& r = k.refs[op.first_ref + di];
  int route = k.routes[op.first_ref + di];
  mscclppPortChannel ch = k.P->pch[k.P->pch_slot[route / 9]];
  ch.port = k.P->port_ids[route];
  uint64_t dst_off = (uint64_t)(dst - xk_reg(k, r.rank, r.btype));
  uint64_t src_off = (uint64_t)(src - xk_reg(k, k.P->rank, sbt));
  uint64_t seq = 0;
  int rc = mscclppPortChannelPush(&ch, extra, dst_off, src_off, n, &seq);
  if (rc == MSCCLPP_DEVICE_OK && (extra & MSCCLPP_TRIGGER_SYNC)) rc = mscclppFifoSync(&ch.fifo, seq);
  if (rc != MSCCLPP_DEVICE_OK) xk_fail(k, rc, r.rank);
  return rc;
}

/* put / pws / pwsf over port channels. Paired ops (destination d through channel d) send put,
 * signal and flush as one trigger per destination; others put every destination, then signal
 * (and flush) every listed channel, in FIFO order after the puts (the __syncthreads between). */
__device__ void xk_port_move(const xk& k, const plan_op& op, uint64_t s, uint64_t n) {
  char* const* p = xk_ptrs(k, op, s);
  int paired = (op.pad & XG_OP_PAIRED) && op.code != PLAN_OP_PUT;
  uint32_t extra = !paired ? 0u : op.code == PLAN_OP_PWSF ? MSCCLPP_TRIGGER_FLAG | MSCCLPP_TRIGGER_SYNC : MSCCLPP_TRIGGER_FLAG;
  for (int d = (int)xk_tid(); d < op.ndst; d += (int)xk_nt()) {
    int si = op.nsrc == op.ndst ? d : 0;
    if (xk_port_put(k, op, op.nsrc + d, p[op.nsrc + d], p[si], k.refs[op.first_ref + si].btype, n, extra)) break;
  }
  if (paired || op.code == PLAN_OP_PUT) return;
  __syncthreads(); /* every thread reaches it; *k.rc is the same for all after it */
  if (*k.rc) return;
  xk_signal(k, op, 0);
  if (op.code != PLAN_OP_PWSF) return;
  __syncthreads();
  if (*k.rc) return;
  xk_flush(k, op);
}

/* pws / pwsf through memory: the data, then (after the block's stores, and for pwsf a system
 * fence by each signalling thread) a release signal on every listed channel. */
__device__ void xk_mem_pws(const xk& k, const plan_op& op, uint64_t s, uint64_t n) {
  xk_move(k, op, s, n, NULL);
  __syncthreads();
  /* pwsf: the block's stores (ordered before this thread by the barrier) are visible system-wide
   * before this thread's signal; the signal's release would order them too, the fence is the
   * op's explicit flush. */
  if (op.code == PLAN_OP_PWSF && xk_tid() < op.nchan) mscclppFenceSys();
  xk_signal(k, op, 0);
}

/* re / res / rre / rres: dst[0] = reduce_op over the sources in order; the result also goes to
 * the other destinations (stored with it through memory, or put from dst[0] on port channels). */
__device__ void xk_reduce(const xk& k, const plan_op& op, uint64_t s, uint64_t n) {
  char* const* p = xk_ptrs(k, op, s);
  int port = op.chan_type == PLAN_CH_PORT, ndst = port ? 1 : op.ndst;
  int al = xk_al16(p, op.nsrc + ndst, n);
  xr_reduce_rows(k.P->dtype, op.redop, p, op.nsrc, p + op.nsrc, ndst, n, al);
  if (!port || op.ndst < 2) return;
  __syncthreads();
  int dbt = k.refs[op.first_ref + op.nsrc].btype;
  for (int d = 1 + (int)xk_tid(); d < op.ndst; d += (int)xk_nt())
    if (xk_port_put(k, op, op.nsrc + d, p[op.nsrc + d], p[op.nsrc], dbt, n, 0)) break;
}

#endif /* MPP_EXEC_GPU_K_DATA_CUH_ */
