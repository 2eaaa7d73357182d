/* k_pkt.cuh - the executor kernel's packet ops (LL16 or LL8, flag = this call's number) and the
 * switch-channel ops, emulated over peer memory: every member's buffer is mapped here, a reduce
 * loads from all of them and a store writes to all of them (no multicast object is ever made).
 * Packets carry their own flag: no signal is needed, a reader spins (bounded) per packet. */
#ifndef MPP_EXEC_GPU_K_PKT_CUH_
#define MPP_EXEC_GPU_K_PKT_CUH_

#include "exec/gpu/k_data.cuh"

/* cpkt / ppkt: the source as packets to every destination. */
__device__ void xk_put_pkts(const xk& k, const char* src, char* const* dsts, int ndst, uint64_t n) {
  uint32_t U = xk_unit(k);
  uint64_t units = xk_units(n, U);
  for (uint64_t u = xk_tid(); u < units; u += xk_nt()) {
    uint32_t len = n - u * U < U ? (uint32_t)(n - u * U) : U;
    uint64_t v = mscclppLoadBytes(src + u * U, len);
    for (int d = 0; d < ndst; d++) xk_pk_write(k, dsts[d], u, U, v, len);
  }
}

/* upkt (ndst == 0, data to dst) and rppkt (packets forwarded, re-flagged, to every pdst). */
__device__ void xk_get_pkts(const xk& k, const char* pkts, char* dst, char* const* pdsts, int ndst, uint64_t n) {
  uint32_t U = xk_unit(k);
  uint64_t units = xk_units(n, U);
  for (uint64_t u = xk_tid(); u < units; u += xk_nt()) {
    uint32_t len = n - u * U < U ? (uint32_t)(n - u * U) : U;
    uint64_t v = 0;
    int rc = xk_pk_read(k, pkts, u, U, len, &v);
    if (rc != MSCCLPP_DEVICE_OK) {
      xk_fail(k, rc, -1);
      return;
    }
    if (dst) mscclppStoreBytes(dst + u * U, v, len);
    for (int d = 0; d < ndst; d++) xk_pk_write(k, pdsts[d], u, U, v, len);
  }
}

/* cpkt / ppkt: the source as packets to every destination, or source i to destination i (a
 * fused ppkt); p as for xk_move. */
__device__ void xk_pkt_copy(const xk& k, const plan_op& op, uint64_t s, uint64_t n, char* const* p) {
  if (!p) p = xk_ptrs(k, op, s);
  if (op.nsrc == 1) {
    xk_put_pkts(k, p[0], p + 1, op.ndst, n);
    return;
  }
  for (int d = 0; d < op.ndst; d++) xk_put_pkts(k, p[d], p + op.nsrc + d, 1, n);
}

/* upkt: packets to data. */
__device__ void xk_pkt_unpack(const xk& k, const plan_op& op, uint64_t s, uint64_t n, char* const* p) {
  if (!p) p = xk_ptrs(k, op, s);
  xk_get_pkts(k, p[0], p[1], NULL, 0, n);
}

/* rppkt: packets forwarded as packets (source i to destination i when there are several). */
__device__ void xk_pkt_forward(const xk& k, const plan_op& op, uint64_t s, uint64_t n, char* const* p) {
  if (!p) p = xk_ptrs(k, op, s);
  if (op.nsrc == 1) {
    xk_get_pkts(k, p[0], NULL, p + 1, op.ndst, n);
    return;
  }
  for (int d = 0; d < op.ndst; d++) xk_get_pkts(k, p[d], NULL, p + op.nsrc + d, 1, n);
}

/* rppkt over port channels (the reference's ppkt over a port channel, lowered at load: scratch
 * that already holds this call's packets, copied as they are): the block waits for every source's
 * packets, then one proxy put per destination carries their bytes (peers of another host too). */
__device__ void xk_pkt_port_forward(const xk& k, const plan_op& op, uint64_t s, uint64_t n) {
  char* const* p = xk_ptrs(k, op, s);
  for (int i = 0; i < op.nsrc; i++) xk_get_pkts(k, p[i], NULL, NULL, 0, n); /* waits only */
  __syncthreads(); /* every thread reaches it; *k.rc is the same for all after it */
  if (*k.rc) return;
  uint64_t bytes = xk_units(n, xk_unit(k)) * (uint64_t)k.pkt;
  for (int d = (int)xk_tid(); d < op.ndst; d += (int)xk_nt()) {
    int si = op.nsrc == op.ndst ? d : 0;
    if (xk_port_put(k, op, op.nsrc + d, p[op.nsrc + d], p[si], k.refs[op.first_ref + si].btype, bytes, 0)) break;
  }
}

/* repkt, respkt, recpkt, recspkt: the first source is data, the others packets; the result goes
 * to the first destination as data and to the others as packets. */
__device__ void xk_pkt_reduce(const xk& k, const plan_op& op, uint64_t s, uint64_t n, char* const* p) {
  if (!p) p = xk_ptrs(k, op, s);
  uint32_t U = k.pkt == 8 && k.P->esize < 8 ? 4u : 8u;
  xr_reduce_pkts(k, op.redop, p[0], p + 1, op.nsrc - 1, p[op.nsrc], p + op.nsrc + 1, op.ndst - 1, n, U);
}

/* Pointers of a switch op: each switch reference expands to its group's members (in group
 * order), a local reference is one pointer; pkt: every reference holds packets (at twice the data
 * offset). *ns / *nd: how many are sources / destinations. Thread 0 fills them; ends with a
 * __syncthreads. */
__device__ void xk_sw_ptrs(const xk& k, const plan_op& op, uint64_t s, int pkt, int* ns, int* nd) {
  int c = 0;
  for (int i = 0; i < op.nsrc + op.ndst; i++) {
    const plan_ref& r = k.refs[op.first_ref + i];
    int m = r.kind == PLAN_REF_SWITCH ? xk_sw_size(k, r) : 1;
    for (int g = 0; g < m && xk_tid() == 0; g++)
      k.ptrs[c + g] = r.kind == PLAN_REF_SWITCH ? xk_sw_ptr(k, r, g, s, pkt) : xk_ptr(k, r, s, pkt);
    c += m;
    if (i == op.nsrc - 1) *ns = c;
  }
  *nd = c - *ns;
  __syncthreads();
}

/* What a switch op does with its group's members. */
enum xk_sw_mode { XK_SW_REDUCE, XK_SW_STORE, XK_SW_STORE_PKT };

/* glre / glres (XK_SW_REDUCE), gstore (XK_SW_STORE), gstorepkt (XK_SW_STORE_PKT: its source
 * holds packets made earlier in the call; each is awaited and stored again as packets). */
__device__ void xk_switch(const xk& k, const plan_op& op, uint64_t s, uint64_t n, enum xk_sw_mode mode) {
  int ns = 0, nd = 0;
  xk_sw_ptrs(k, op, s, mode == XK_SW_STORE_PKT, &ns, &nd);
  char* const* p = k.ptrs;
  switch (mode) {
    case XK_SW_STORE_PKT: xk_get_pkts(k, p[0], NULL, p + ns, nd, n); return;
    case XK_SW_STORE:
      for (int d = 0; d < nd; d++) xk_copy(p[ns + d], p[0], n);
      return;
    case XK_SW_REDUCE: xr_reduce_rows(k.P->dtype, op.redop, p, ns, p + ns, nd, n, xk_al16(p, ns + nd, n)); return;
  }
}

#endif /* MPP_EXEC_GPU_K_PKT_CUH_ */
