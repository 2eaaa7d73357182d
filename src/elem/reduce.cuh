/* reduce.cuh - the reductions of GPU code (the built-in collectives and the plan executor), per
 * datatype x operator (templates replace that expansion only). Same semantics as the CPU ranks (redop.h, reduce.c): inputs convert once into
 * the accumulator family, combine in rank order, avg divides once, and the result rounds once.
 * Pre-multiplied sums are scaled at the sender: each rank's part is multiplied by its own scalar
 * and rounded to the datatype before it travels (scale8 / scale_elem), then summed. */
#ifndef MPP_ELEM_REDUCE_CUH_
#define MPP_ELEM_REDUCE_CUH_

#include <stdint.h>
#include <string.h>

#include "elem/dtype.h"
#include "elem/redop.h"

/* Storage type T, accumulator A, and the conversions of one datatype. */
template <int DT>
struct Ty;

#define GX_INT_TY(ID, TT, AA, SCALE)                                                             \
  template <>                                                                                  \
  struct Ty<ID> {                                                                              \
    typedef TT T;                                                                              \
    typedef AA A;                                                                              \
    static __device__ __forceinline__ A in(T x) { return (A)x; }                               \
    static __device__ __forceinline__ T out(A a) { return (T)a; }                              \
    static __device__ __forceinline__ T div(A a, int n) { return (T)((T)a / (T)n); }           \
    static __device__ __forceinline__ A scale(A x, elem_scalar s) { return SCALE; }            \
  };
GX_INT_TY(0, int8_t, int64_t, elem_mul_i64(x, s.i))
GX_INT_TY(1, uint8_t, uint64_t, x* s.u)
GX_INT_TY(2, int32_t, int64_t, elem_mul_i64(x, s.i))
GX_INT_TY(3, uint32_t, uint64_t, x* s.u)
GX_INT_TY(4, int64_t, int64_t, elem_mul_i64(x, s.i))
GX_INT_TY(5, uint64_t, uint64_t, x* s.u)
#undef GX_INT_TY

/* Narrow floats: IN widens, OUT rounds; a premulsum product rounds to the type (reduce.c). */
#define GX_NARROW_TY(ID, TT, IN, OUT)                                                            \
  template <>                                                                                  \
  struct Ty<ID> {                                                                              \
    typedef TT T;                                                                              \
    typedef float A;                                                                           \
    static __device__ __forceinline__ A in(T x) { return IN(x); }                              \
    static __device__ __forceinline__ T out(A a) { return OUT(a); }                            \
    static __device__ __forceinline__ T div(A a, int n) { return OUT(a / (float)n); }          \
    static __device__ __forceinline__ A scale(A x, elem_scalar s) { return IN(OUT(x * s.f)); } \
  };
GX_NARROW_TY(6, uint16_t, elem_half_to_float, elem_float_to_half)
GX_NARROW_TY(9, uint16_t, elem_bf16_to_float, elem_float_to_bf16)
GX_NARROW_TY(10, uint8_t, elem_e4m3_to_float, elem_float_to_e4m3)
GX_NARROW_TY(11, uint8_t, elem_e5m2_to_float, elem_float_to_e5m2)
#undef GX_NARROW_TY

/* float and double: accumulate in the type itself. */
#define GX_WIDE_TY(ID, TT, FIELD)                                                                \
  template <>                                                                                  \
  struct Ty<ID> {                                                                              \
    typedef TT T;                                                                              \
    typedef TT A;                                                                              \
    static __device__ __forceinline__ A in(T x) { return x; }                                  \
    static __device__ __forceinline__ T out(A a) { return a; }                                 \
    static __device__ __forceinline__ T div(A a, int n) { return a / (TT)n; }                  \
    static __device__ __forceinline__ A scale(A x, elem_scalar s) { return x * s.FIELD; }      \
  };
GX_WIDE_TY(7, float, f)
GX_WIDE_TY(8, double, d)
#undef GX_WIDE_TY

__device__ __forceinline__ int64_t gx_comb(int64_t a, int64_t b, int op) { return elem_combine_i64(a, b, op); }
__device__ __forceinline__ uint64_t gx_comb(uint64_t a, uint64_t b, int op) { return elem_combine_u64(a, b, op); }
__device__ __forceinline__ float gx_comb(float a, float b, int op) { return elem_combine_f32(a, b, op); }
__device__ __forceinline__ double gx_comb(double a, double b, int op) { return elem_combine_f64(a, b, op); }

/* avg and premulsum combine as sum. */
template <int OP>
struct CombOp {
  enum { v = (OP == ELEM_OP_AVG || OP == ELEM_OP_PREMUL) ? ELEM_OP_SUM : OP };
};

/* Reduces the 8-byte payloads pl[0..n) (rank order) element-wise; every lane is computed (lanes
 * past the data are garbage the caller does not store). PAR: the loop over payloads is unrolled
 * (constant indices, so a caller's array of them can stay in registers). */
template <int DT, int OP, bool PAR = false>
__device__ __forceinline__ uint64_t red8(const uint64_t* pl, int n) {
  typedef typename Ty<DT>::T T;
  typedef typename Ty<DT>::A A;
  enum { E = 8 / sizeof(T) };
  T v[E];
  A acc[E];
  memcpy(v, &pl[0], 8);
#pragma unroll
  for (int e = 0; e < E; e++) acc[e] = Ty<DT>::in(v[e]);
  if (PAR) {
#pragma unroll
    for (int r = 1; r < ELEM_MAX_SRCS && r < n; r++) {
      memcpy(v, &pl[r], 8);
#pragma unroll
      for (int e = 0; e < E; e++) acc[e] = gx_comb(acc[e], Ty<DT>::in(v[e]), (int)CombOp<OP>::v);
    }
  } else {
    for (int r = 1; r < n; r++) {
      memcpy(v, &pl[r], 8);
#pragma unroll
      for (int e = 0; e < E; e++) acc[e] = gx_comb(acc[e], Ty<DT>::in(v[e]), (int)CombOp<OP>::v);
    }
  }
#pragma unroll
  for (int e = 0; e < E; e++) v[e] = OP == ELEM_OP_AVG ? Ty<DT>::div(acc[e], n) : Ty<DT>::out(acc[e]);
  uint64_t out;
  memcpy(&out, v, 8);
  return out;
}

/* One element of the datatype, scaled by a premulsum scalar and rounded to the type. */
template <int DT>
__device__ __forceinline__ typename Ty<DT>::T scale_elem(typename Ty<DT>::T x, elem_scalar s) {
  return Ty<DT>::out(Ty<DT>::scale(Ty<DT>::in(x), s));
}

/* The premulsum scalar of a plan: the host's value, or the device-resident value of the datatype
 * converted to the accumulator family (every union member starts at offset 0). */
template <int DT>
__device__ __forceinline__ elem_scalar plan_scalar(elem_scalar host, const void* dev) {
  if (dev == NULL) return host;
  typename Ty<DT>::A a = Ty<DT>::in(*(const typename Ty<DT>::T*)dev);
  elem_scalar s;
  memset(&s, 0, sizeof(s));
  memcpy(&s, &a, sizeof(a));
  return s;
}

/* Every element of an 8-byte payload scaled. */
template <int DT>
__device__ __forceinline__ uint64_t scale8(uint64_t p, elem_scalar s) {
  typedef typename Ty<DT>::T T;
  enum { E = 8 / sizeof(T) };
  T v[E];
  memcpy(v, &p, 8);
#pragma unroll
  for (int e = 0; e < E; e++) v[e] = scale_elem<DT>(v[e], s);
  memcpy(&p, v, 8);
  return p;
}

/* dsts[k][i] = reduction over r < n of srcs[r][i] for every k < ndst, i < count, thread tid of nt
 * (element-wise; 8-byte or 16-byte units when every pointer is 8- or 16-aligned). The thread that
 * reads element i of the sources writes element i of the destinations, so a destination may be a
 * source (in place). PAR: every source's load of a unit is issued before any is used (the loop
 * over sources unrolled to ELEM_MAX_SRCS, the values in registers); without, the loop to n keeps
 * them in local memory and the loads follow one another. PAR more than halves the time of a
 * reduction of 4 to 8 local sources that miss in L2 (one H200), but costs registers and code:
 * on one rank, where a zero-copy allreduce reduces one source, it made 1 and 16 MiB slower and
 * 256 MiB faster; on 4 H100 ranks it made the zero-copy and staged allreduce 7-10% faster at 4 and
 * 16 MiB and the bulk kernel's 2-4% (docs/measurements.md), so those use it. */
template <int DT, int OP, bool PAR = false>
__device__ __forceinline__ void red_range_to(char* const* dsts, int ndst, const char* const* srcs, int n, uint64_t count,
                                             uint32_t tid, uint32_t nt) {
  typedef typename Ty<DT>::T T;
  typedef typename Ty<DT>::A A;
  uintptr_t mis = 0;
  for (int k = 0; k < ndst; k++) mis |= (uintptr_t)dsts[k];
  for (int r = 0; r < n; r++) mis |= (uintptr_t)srcs[r];
  uint64_t first = 0;
  if ((mis & 15) == 0) { /* 16-byte loads and stores: half the memory instructions of 8 */
    uint64_t units = count * sizeof(T) / 16;
    uint64_t lo[ELEM_MAX_SRCS], hi[ELEM_MAX_SRCS];
    for (uint64_t u = tid; u < units; u += nt) {
      if (PAR) {
#pragma unroll
        for (int r = 0; r < ELEM_MAX_SRCS && r < n; r++) {
          ulonglong2 v = ((const ulonglong2*)srcs[r])[u];
          lo[r] = v.x, hi[r] = v.y;
        }
      } else {
        for (int r = 0; r < n; r++) {
          ulonglong2 v = ((const ulonglong2*)srcs[r])[u];
          lo[r] = v.x, hi[r] = v.y;
        }
      }
      ulonglong2 res = make_ulonglong2(red8<DT, OP, PAR>(lo, n), red8<DT, OP, PAR>(hi, n));
      for (int k = 0; k < ndst; k++) ((ulonglong2*)dsts[k])[u] = res;
    }
    first = units * 16 / sizeof(T);
  } else if ((mis & 7) == 0) {
    uint64_t units = count * sizeof(T) / 8;
    uint64_t pl[ELEM_MAX_SRCS];
    for (uint64_t u = tid; u < units; u += nt) {
      if (PAR) {
#pragma unroll
        for (int r = 0; r < ELEM_MAX_SRCS && r < n; r++) pl[r] = ((const uint64_t*)srcs[r])[u];
      } else {
        for (int r = 0; r < n; r++) pl[r] = ((const uint64_t*)srcs[r])[u];
      }
      uint64_t res = red8<DT, OP, PAR>(pl, n);
      for (int k = 0; k < ndst; k++) ((uint64_t*)dsts[k])[u] = res;
    }
    first = units * 8 / sizeof(T);
  }
  for (uint64_t i = first + tid; i < count; i += nt) {
    A acc = Ty<DT>::in(((const T*)srcs[0])[i]);
    for (int r = 1; r < n; r++) acc = gx_comb(acc, Ty<DT>::in(((const T*)srcs[r])[i]), (int)CombOp<OP>::v);
    T v = OP == ELEM_OP_AVG ? Ty<DT>::div(acc, n) : Ty<DT>::out(acc);
    for (int k = 0; k < ndst; k++) ((T*)dsts[k])[i] = v;
  }
}

/* red_range_to with one destination. */
template <int DT, int OP, bool PAR = false>
__device__ __forceinline__ void red_range(char* dst, const char* const* srcs, int n, uint64_t count, uint32_t tid,
                                          uint32_t nt) {
  red_range_to<DT, OP, PAR>(&dst, 1, srcs, n, count, tid, nt);
}

/* dst[i] = scale_elem(src[i]), i < count (premulsum parts on their way out, or the own part). */
template <int DT>
__device__ __forceinline__ void scale_range(char* dst, const char* src, uint64_t count, elem_scalar s, uint32_t tid,
                                            uint32_t nt) {
  typedef typename Ty<DT>::T T;
  for (uint64_t i = tid; i < count; i += nt) ((T*)dst)[i] = scale_elem<DT>(((const T*)src)[i], s);
}

/* Calls F<DT, OP>::get() for runtime dtype and op (the only place the 72 pairs are spelled). */
template <template <int, int> class F>
struct GxPick {
  template <int DT>
  static typename F<0, 0>::fn by_op(int op) {
    switch (op) {
      case ELEM_OP_PROD: return F<DT, ELEM_OP_PROD>::get();
      case ELEM_OP_MAX: return F<DT, ELEM_OP_MAX>::get();
      case ELEM_OP_MIN: return F<DT, ELEM_OP_MIN>::get();
      case ELEM_OP_AVG: return F<DT, ELEM_OP_AVG>::get();
      case ELEM_OP_PREMUL: return F<DT, ELEM_OP_PREMUL>::get();
      default: return F<DT, ELEM_OP_SUM>::get();
    }
  }
  static typename F<0, 0>::fn pick(int dtype, int op) {
    switch (dtype) {
      case 0: return by_op<0>(op);
      case 1: return by_op<1>(op);
      case 2: return by_op<2>(op);
      case 3: return by_op<3>(op);
      case 4: return by_op<4>(op);
      case 5: return by_op<5>(op);
      case 6: return by_op<6>(op);
      case 7: return by_op<7>(op);
      case 8: return by_op<8>(op);
      case 9: return by_op<9>(op);
      case 10: return by_op<10>(op);
      default: return by_op<11>(op);
    }
  }
  /* Loads every instantiation now (cudaFuncGetAttributes forces the load). With CUDA's lazy
   * loading a kernel is otherwise loaded at its first launch, and a load can wait for kernels
   * already running: a collective kernel first launched beside a kernel that spins on a peer
   * (another stream, another communicator) could then hang both GPUs. NCCL loads eagerly too. */
  static cudaError_t preload() {
    for (int dt = 0; dt < ELEM_DTYPE_COUNT; dt++)
      for (int op = 0; op < ELEM_OP_COUNT; op++) {
        cudaFuncAttributes attr;
        cudaError_t e = cudaFuncGetAttributes(&attr, (const void*)pick(dt, op));
        if (e != cudaSuccess) return e;
      }
    return cudaSuccess;
  }
  /* The fewest blocks of `threads` threads that one SM holds at once, over every instantiation
   * (their registers and shared memory decide), into *per_sm. */
  static cudaError_t min_resident(int threads, int* per_sm) {
    *per_sm = 1 << 30;
    for (int dt = 0; dt < ELEM_DTYPE_COUNT; dt++)
      for (int op = 0; op < ELEM_OP_COUNT; op++) {
        int nb = 0;
        cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, (const void*)pick(dt, op), threads, 0);
        if (e != cudaSuccess) return e;
        if (nb < *per_sm) *per_sm = nb;
      }
    return cudaSuccess;
  }
};

#endif /* MPP_ELEM_REDUCE_CUH_ */
