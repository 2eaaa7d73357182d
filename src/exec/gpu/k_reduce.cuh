/* k_reduce.cuh - the executor's reductions, per datatype x reduce_op (sum, prod, max, min), with the
 * semantics of the CPU ranks (elem/reduce.c, elem/reduce.cuh): every source converts once into
 * the datatype's accumulator family, they combine in the order listed, the result rounds once.
 *
 * Work goes in 8-byte words (16 bytes at a time when every pointer is 16-aligned): a word holds
 * whole elements (the op's length is a multiple of the element size, checked on the host), and a
 * last, partial word is loaded and stored byte by byte; its unused lanes are computed and dropped.
 * The templates are instantiated for the 48 pairs once each (noinline), behind one switch. */
#ifndef MPP_EXEC_GPU_K_REDUCE_CUH_
#define MPP_EXEC_GPU_K_REDUCE_CUH_

#include "elem/reduce.cuh"
#include "exec/gpu/k_common.cuh"

/* The accumulators of one 8-byte word of datatype DT. */
template <int DT>
struct XAcc {
  typedef typename Ty<DT>::T T;
  typedef typename Ty<DT>::A A;
  enum { E = 8 / sizeof(T) };
  A a[E];
  __device__ __forceinline__ void set(uint64_t w) {
    T v[E];
    memcpy(v, &w, 8);
#pragma unroll
    for (int e = 0; e < E; e++) a[e] = Ty<DT>::in(v[e]);
  }
  template <int OP>
  __device__ __forceinline__ void add(uint64_t w) {
    T v[E];
    memcpy(v, &w, 8);
#pragma unroll
    for (int e = 0; e < E; e++) a[e] = gx_comb(a[e], Ty<DT>::in(v[e]), OP);
  }
  __device__ __forceinline__ uint64_t get() const {
    T v[E];
#pragma unroll
    for (int e = 0; e < E; e++) v[e] = Ty<DT>::out(a[e]);
    uint64_t w;
    memcpy(&w, v, 8);
    return w;
  }
};

/* dsts[d][0, n) = reduction over srcs[0..nsrc) for every d < ndst (thread tid of nt). */
template <int DT, int OP>
__device__ __noinline__ void xr_rows(char* const* srcs, int nsrc, char* const* dsts, int ndst, uint64_t n, int al16) {
  uint32_t tid = xk_tid(), nt = xk_nt();
  uint64_t done = 0;
  if (al16) {
    uint64_t nv = n / 16;
    for (uint64_t v = tid; v < nv; v += nt) {
      uint4 x = ((const uint4*)srcs[0])[v];
      XAcc<DT> lo, hi;
      lo.set((uint64_t)x.x | ((uint64_t)x.y << 32));
      hi.set((uint64_t)x.z | ((uint64_t)x.w << 32));
      for (int r = 1; r < nsrc; r++) {
        x = ((const uint4*)srcs[r])[v];
        lo.template add<OP>((uint64_t)x.x | ((uint64_t)x.y << 32));
        hi.template add<OP>((uint64_t)x.z | ((uint64_t)x.w << 32));
      }
      uint64_t a = lo.get(), b = hi.get();
      x = make_uint4((uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32));
      for (int d = 0; d < ndst; d++) ((uint4*)dsts[d])[v] = x;
    }
    done = nv * 16;
  }
  uint64_t words = (n - done + 7) / 8;
  for (uint64_t u = tid; u < words; u += nt) {
    uint64_t at = done + u * 8;
    uint32_t len = n - at < 8 ? (uint32_t)(n - at) : 8u;
    XAcc<DT> acc;
    acc.set(mscclppLoadBytes(srcs[0] + at, len));
    for (int r = 1; r < nsrc; r++) acc.template add<OP>(mscclppLoadBytes(srcs[r] + at, len));
    uint64_t w = acc.get();
    for (int d = 0; d < ndst; d++) mscclppStoreBytes(dsts[d] + at, w, len);
  }
}

/* The packet reduction (repkt family) over [0, n): dst0 = reduce(data0, the packets at psrc[0 ..
 * np)), then the result as packets to pdst[0 .. nq). Units of U bytes (k_common.cuh). Returns
 * MSCCLPP_DEVICE_OK or a failed wait's code (recorded). */
template <int DT, int OP>
__device__ __noinline__ int xr_pkts(const xk& k, const char* data0, char* const* psrc, int np, char* dst0,
                                    char* const* pdst, int nq, uint64_t n, uint32_t U) {
  uint64_t units = xk_units(n, U);
  for (uint64_t u = xk_tid(); u < units; u += xk_nt()) {
    uint32_t len = n - u * U < U ? (uint32_t)(n - u * U) : U;
    XAcc<DT> acc;
    acc.set(mscclppLoadBytes(data0 + u * U, len));
    for (int r = 0; r < np; r++) {
      uint64_t v = 0;
      int rc = xk_pk_read(k, psrc[r], u, U, len, &v);
      if (rc != MSCCLPP_DEVICE_OK) {
        xk_fail(k, rc, -1);
        return rc;
      }
      acc.template add<OP>(v);
    }
    uint64_t w = xk_mask(acc.get(), len);
    mscclppStoreBytes(dst0 + u * U, w, len);
    for (int d = 0; d < nq; d++) xk_pk_write(k, pdst[d], u, U, w, len);
  }
  return MSCCLPP_DEVICE_OK;
}

/* The runtime (datatype, reduce_op) -> instantiation switch, once per kind of reduction. */
#define XR_BY_OP(CALL, DT)                        \
  switch (op) {                                   \
    case ELEM_OP_PROD: return CALL(DT, ELEM_OP_PROD); \
    case ELEM_OP_MAX: return CALL(DT, ELEM_OP_MAX);   \
    case ELEM_OP_MIN: return CALL(DT, ELEM_OP_MIN);   \
    default: return CALL(DT, ELEM_OP_SUM);            \
  }
#define XR_BY_TYPE(CALL)                                                           \
  switch (dtype) {                                                                 \
    case 0: XR_BY_OP(CALL, 0)                                                      \
    case 1: XR_BY_OP(CALL, 1)                                                      \
    case 2: XR_BY_OP(CALL, 2)                                                      \
    case 3: XR_BY_OP(CALL, 3)                                                      \
    case 4: XR_BY_OP(CALL, 4)                                                      \
    case 5: XR_BY_OP(CALL, 5)                                                      \
    case 6: XR_BY_OP(CALL, 6)                                                      \
    case 7: XR_BY_OP(CALL, 7)                                                      \
    case 8: XR_BY_OP(CALL, 8)                                                      \
    case 9: XR_BY_OP(CALL, 9)                                                      \
    case 10: XR_BY_OP(CALL, 10)                                                    \
    default: XR_BY_OP(CALL, 11)                                                    \
  }

__device__ __forceinline__ void xr_reduce_rows(int dtype, int op, char* const* srcs, int nsrc, char* const* dsts,
                                               int ndst, uint64_t n, int al16) {
#define XR_ROWS(DT, OP) xr_rows<DT, OP>(srcs, nsrc, dsts, ndst, n, al16)
  XR_BY_TYPE(XR_ROWS)
#undef XR_ROWS
}

__device__ __forceinline__ int xr_reduce_pkts(const xk& k, int op, const char* data0, char* const* psrc, int np,
                                              char* dst0, char* const* pdst, int nq, uint64_t n, uint32_t U) {
  int dtype = k.P->dtype;
#define XR_PKTS(DT, OP) xr_pkts<DT, OP>(k, data0, psrc, np, dst0, pdst, nq, n, U)
  XR_BY_TYPE(XR_PKTS)
#undef XR_PKTS
}

#endif /* MPP_EXEC_GPU_K_REDUCE_CUH_ */
