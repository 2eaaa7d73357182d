/* reduce.c - element-wise reductions on the CPU. Elements go through a small block of
 * accumulators (redop.h's families): every source of a block is converted in, combined with the
 * running block, and the block is finished (avg's division) and converted out. The loops are
 * simple enough for the compiler to vectorize the common cases. */
#include "elem/reduce.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "elem/dtype.h"

#define BLK 256
/* The block functions are inlined into both calls of reduce_block, so that the loops of full
 * blocks see a constant trip count (gcc -O2 vectorizes only those). */
#define INLINE_BLOCK static inline __attribute__((always_inline))

/* fp8 widening by table on the CPU (256 floats per format, filled once from dtype.h). */
static float fp8_table[2][256];
static pthread_once_t fp8_once = PTHREAD_ONCE_INIT;

static void fp8_init(void) {
  for (int v = 0; v < 256; v++) {
    fp8_table[0][v] = elem_e4m3_to_float((uint8_t)v);
    fp8_table[1][v] = elem_e5m2_to_float((uint8_t)v);
  }
}
#define E4M3_F(x) fp8_table[0][(x)]
#define E5M2_F(x) fp8_table[1][(x)]

typedef union {
  int64_t i[BLK];
  uint64_t u[BLK];
  float f[BLK];
  double d[BLK];
} acc_block;

#define LOAD_LOOP(field, T, expr)                        \
  do {                                                   \
    const T* s_ = (const T*)src;                         \
    for (size_t j = 0; j < n; j++) b->field[j] = (expr); \
  } while (0)

/* Converts n elements of src into b's family. */
INLINE_BLOCK void load_block(acc_block* b, const void* src, size_t n, int dtype) {
  switch (dtype) {
    case 0: LOAD_LOOP(i, int8_t, s_[j]); break;
    case 1: LOAD_LOOP(u, uint8_t, s_[j]); break;
    case 2: LOAD_LOOP(i, int32_t, s_[j]); break;
    case 3: LOAD_LOOP(u, uint32_t, s_[j]); break;
    case 4: LOAD_LOOP(i, int64_t, s_[j]); break;
    case 5: LOAD_LOOP(u, uint64_t, s_[j]); break;
    case 6: LOAD_LOOP(f, uint16_t, elem_half_to_float(s_[j])); break;
    case 7: LOAD_LOOP(f, float, s_[j]); break;
    case 8: LOAD_LOOP(d, double, s_[j]); break;
    case 9: LOAD_LOOP(f, uint16_t, elem_bf16_to_float(s_[j])); break;
    case 10: LOAD_LOOP(f, uint8_t, E4M3_F(s_[j])); break;
    default: LOAD_LOOP(f, uint8_t, E5M2_F(s_[j])); break;
  }
}

#define STORE_LOOP(T, expr)                        \
  do {                                             \
    T* d_ = (T*)dst;                               \
    for (size_t j = 0; j < n; j++) d_[j] = (expr); \
  } while (0)

/* Integer avg: truncate the wrapped sum to the type, then divide in the type. */
#define IDIV(T, v) (div > 0 ? (T)((T)(v) / (T)div) : (T)(v))

/* Converts n accumulators of b to dtype at dst; div > 0 divides first (avg). */
INLINE_BLOCK void store_block(void* dst, acc_block* b, size_t n, int dtype, int div) {
  if (div > 0 && elem_dtype_acc(dtype) == ELEM_ACC_F32)
    for (size_t j = 0; j < n; j++) b->f[j] /= (float)div;
  if (div > 0 && dtype == 8)
    for (size_t j = 0; j < n; j++) b->d[j] /= (double)div;
  switch (dtype) {
    case 0: STORE_LOOP(int8_t, IDIV(int8_t, b->i[j])); break;
    case 1: STORE_LOOP(uint8_t, IDIV(uint8_t, b->u[j])); break;
    case 2: STORE_LOOP(int32_t, IDIV(int32_t, b->i[j])); break;
    case 3: STORE_LOOP(uint32_t, IDIV(uint32_t, b->u[j])); break;
    case 4: STORE_LOOP(int64_t, IDIV(int64_t, b->i[j])); break;
    case 5: STORE_LOOP(uint64_t, IDIV(uint64_t, b->u[j])); break;
    case 6: STORE_LOOP(uint16_t, elem_float_to_half(b->f[j])); break;
    case 7: STORE_LOOP(float, b->f[j]); break;
    case 8: STORE_LOOP(double, b->d[j]); break;
    case 9: STORE_LOOP(uint16_t, elem_float_to_bf16(b->f[j])); break;
    case 10: STORE_LOOP(uint8_t, elem_float_to_e4m3(b->f[j])); break;
    default: STORE_LOOP(uint8_t, elem_float_to_e5m2(b->f[j])); break;
  }
}

/* Multiplies n accumulators by a premulsum scalar and rounds each product to dtype (integers need
 * no rounding: their sums wrap modulo 2^bits anyway). */
INLINE_BLOCK void scale_block(acc_block* b, size_t n, int dtype, elem_scalar s) {
  switch (dtype) {
    case 0: case 2: case 4: for (size_t j = 0; j < n; j++) b->i[j] = elem_mul_i64(b->i[j], s.i); break;
    case 1: case 3: case 5: for (size_t j = 0; j < n; j++) b->u[j] *= s.u; break;
    case 6: for (size_t j = 0; j < n; j++) b->f[j] = elem_half_to_float(elem_float_to_half(b->f[j] * s.f)); break;
    case 7: for (size_t j = 0; j < n; j++) b->f[j] *= s.f; break;
    case 8: for (size_t j = 0; j < n; j++) b->d[j] *= s.d; break;
    case 9: for (size_t j = 0; j < n; j++) b->f[j] = elem_bf16_to_float(elem_float_to_bf16(b->f[j] * s.f)); break;
    case 10: for (size_t j = 0; j < n; j++) b->f[j] = E4M3_F(elem_float_to_e4m3(b->f[j] * s.f)); break;
    default: for (size_t j = 0; j < n; j++) b->f[j] = E5M2_F(elem_float_to_e5m2(b->f[j] * s.f)); break;
  }
}

/* a (op)= the n elements of src, converted: one fused loop per (datatype, op) so that each
 * vectorizes on its own and no element makes a second trip through memory. */
#define ACC_LOOPS(field, T, CONV, FN)                                                                   \
  do {                                                                                                  \
    const T* s_ = (const T*)src;                                                                        \
    if (op == ELEM_OP_PROD) for (size_t j = 0; j < n; j++) a->field[j] = FN(a->field[j], CONV(s_[j]), ELEM_OP_PROD); \
    else if (op == ELEM_OP_MAX) for (size_t j = 0; j < n; j++) a->field[j] = FN(a->field[j], CONV(s_[j]), ELEM_OP_MAX); \
    else if (op == ELEM_OP_MIN) for (size_t j = 0; j < n; j++) a->field[j] = FN(a->field[j], CONV(s_[j]), ELEM_OP_MIN); \
    else for (size_t j = 0; j < n; j++) a->field[j] = FN(a->field[j], CONV(s_[j]), ELEM_OP_SUM);      \
  } while (0)
#define AS_I64(x) ((int64_t)(x))
#define AS_U64(x) ((uint64_t)(x))
#define AS_F32(x) ((float)(x))
#define AS_F64(x) ((double)(x))

INLINE_BLOCK void accumulate(acc_block* a, const void* src, size_t n, int dtype, enum elem_op op) {
  switch (dtype) {
    case 0: ACC_LOOPS(i, int8_t, AS_I64, elem_combine_i64); break;
    case 1: ACC_LOOPS(u, uint8_t, AS_U64, elem_combine_u64); break;
    case 2: ACC_LOOPS(i, int32_t, AS_I64, elem_combine_i64); break;
    case 3: ACC_LOOPS(u, uint32_t, AS_U64, elem_combine_u64); break;
    case 4: ACC_LOOPS(i, int64_t, AS_I64, elem_combine_i64); break;
    case 5: ACC_LOOPS(u, uint64_t, AS_U64, elem_combine_u64); break;
    case 6: ACC_LOOPS(f, uint16_t, elem_half_to_float, elem_combine_f32); break;
    case 7: ACC_LOOPS(f, float, AS_F32, elem_combine_f32); break;
    case 8: ACC_LOOPS(d, double, AS_F64, elem_combine_f64); break;
    case 9: ACC_LOOPS(f, uint16_t, elem_bf16_to_float, elem_combine_f32); break;
    case 10: ACC_LOOPS(f, uint8_t, E4M3_F, elem_combine_f32); break;
    default: ACC_LOOPS(f, uint8_t, E5M2_F, elem_combine_f32); break;
  }
}

/* One loop per (family, op) so that each vectorizes on its own. */
#define COMBINE_LOOPS(field, fn)                                                               \
  do {                                                                                         \
    switch (op) {                                                                              \
      case ELEM_OP_PROD: for (size_t j = 0; j < n; j++) a->field[j] = fn(a->field[j], x->field[j], ELEM_OP_PROD); break; \
      case ELEM_OP_MAX: for (size_t j = 0; j < n; j++) a->field[j] = fn(a->field[j], x->field[j], ELEM_OP_MAX); break;   \
      case ELEM_OP_MIN: for (size_t j = 0; j < n; j++) a->field[j] = fn(a->field[j], x->field[j], ELEM_OP_MIN); break;   \
      default: for (size_t j = 0; j < n; j++) a->field[j] = fn(a->field[j], x->field[j], ELEM_OP_SUM); break;            \
    }                                                                                          \
  } while (0)

/* a = a (op) x for n accumulators; avg and premulsum combine as sum. */
INLINE_BLOCK void combine_block(acc_block* a, const acc_block* x, size_t n, enum elem_acc acc, enum elem_op op) {
  switch (acc) {
    case ELEM_ACC_I64: COMBINE_LOOPS(i, elem_combine_i64); break;
    case ELEM_ACC_U64: COMBINE_LOOPS(u, elem_combine_u64); break;
    case ELEM_ACC_F32: COMBINE_LOOPS(f, elem_combine_f32); break;
    default: COMBINE_LOOPS(d, elem_combine_f64); break;
  }
}

/* Reduces elements [base, base+n) of every source into dst. Inlined twice by elem_reduce: with
 * n = BLK (a constant, so that the loops vectorize) and once for the tail. */
INLINE_BLOCK void reduce_block(void* dst, const void* const* srcs, int nsrc, size_t base, size_t n, int dtype,
                               enum elem_op op, int div, const elem_scalar* scalars) {
  size_t es = elem_dtype_size(dtype);
  acc_block a, x;
  load_block(&a, (const char*)srcs[0] + base * es, n, dtype);
  if (op == ELEM_OP_PREMUL) { /* scaled and rounded per source: converted through x */
    scale_block(&a, n, dtype, scalars[0]);
    for (int s = 1; s < nsrc; s++) {
      load_block(&x, (const char*)srcs[s] + base * es, n, dtype);
      scale_block(&x, n, dtype, scalars[s]);
      combine_block(&a, &x, n, elem_dtype_acc(dtype), ELEM_OP_SUM);
    }
  } else {
    for (int s = 1; s < nsrc; s++) accumulate(&a, (const char*)srcs[s] + base * es, n, dtype, op);
  }
  store_block((char*)dst + base * es, &a, n, dtype, div);
}

void elem_reduce(void* dst, const void* const* srcs, int nsrc, size_t count, int dtype, enum elem_op op, int divisor,
                 const elem_scalar* scalars) {
  int div = op == ELEM_OP_AVG ? divisor : 0;
  if (dtype >= 10) pthread_once(&fp8_once, fp8_init);
  size_t base = 0;
  for (; base + BLK <= count; base += BLK) reduce_block(dst, srcs, nsrc, base, BLK, dtype, op, div, scalars);
  if (base < count) reduce_block(dst, srcs, nsrc, base, count - base, dtype, op, div, scalars);
}

elem_scalar elem_scalar_from(const void* src, int dtype) {
  pthread_once(&fp8_once, fp8_init);
  acc_block b;
  elem_scalar s;
  load_block(&b, src, 1, dtype);
  switch (elem_dtype_acc(dtype)) {
    case ELEM_ACC_I64: s.i = b.i[0]; break;
    case ELEM_ACC_U64: s.u = b.u[0]; break;
    case ELEM_ACC_F32: s.f = b.f[0]; break;
    default: s.d = b.d[0]; break;
  }
  return s;
}
