/* redop.h - the reduction operators on one element, as plain inline C for the CPU ranks and GPU
 * code (MSCCLPP_HOST_DEVICE_INLINE), and the datatype table.
 *
 * Every datatype reduces in an accumulator family: signed integers in int64, unsigned integers in
 * uint64 (both with wrap-around arithmetic: sum and product modulo 2^bits, truncated to the type at
 * the end, which equals reducing in the type itself), float16, bfloat16, fp8 and float32 in float,
 * float64 in double. Narrow floats are converted once on the way in and rounded once on the way out
 * (dtype.h), so a reduction of n inputs rounds once instead of n-1 times.
 *
 * Semantics of the operators:
 *   sum, prod   in the accumulator, inputs in rank order
 *   max, min    IEEE maxNum/minNum: a NaN input is ignored unless every input is NaN (as fmaxf and
 *               CUDA's __hmax); equal values keep the earlier input
 *   avg         the sum divided by the number of inputs: floats divide in the accumulator, integers
 *               truncate the wrapped sum to the type and divide with C's truncating division
 *   premulsum   sum of scalar * input (scalar converted to the accumulator, products wrap for
 *               integers)
 */
#ifndef MPP_ELEM_REDOP_H_
#define MPP_ELEM_REDOP_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/device.h>

/* Internal operator kinds: the four built-ins, avg, and the pre-multiplied sum. */
enum elem_op { ELEM_OP_SUM = 0, ELEM_OP_PROD = 1, ELEM_OP_MAX = 2, ELEM_OP_MIN = 3, ELEM_OP_AVG = 4, ELEM_OP_PREMUL = 5 };
#define ELEM_OP_COUNT 6

/* The most sources one GPU reduction (reduce.cuh) takes: its unrolled loads keep one value per
 * source in registers. Callers check their source counts against it. */
#define ELEM_MAX_SRCS 8

enum elem_acc { ELEM_ACC_I64 = 0, ELEM_ACC_U64 = 1, ELEM_ACC_F32 = 2, ELEM_ACC_F64 = 3 };

/* The scalar of a pre-multiplied sum, converted to the accumulator family of its datatype. */
typedef union {
  int64_t i;
  uint64_t u;
  float f;
  double d;
} elem_scalar;

MSCCLPP_HOST_DEVICE_INLINE int64_t elem_add_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
MSCCLPP_HOST_DEVICE_INLINE int64_t elem_mul_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

MSCCLPP_HOST_DEVICE_INLINE float elem_fmax(float a, float b) { return a != a ? b : b != b ? a : (a < b ? b : a); }
MSCCLPP_HOST_DEVICE_INLINE float elem_fmin(float a, float b) { return a != a ? b : b != b ? a : (b < a ? b : a); }
MSCCLPP_HOST_DEVICE_INLINE double elem_dmax(double a, double b) { return a != a ? b : b != b ? a : (a < b ? b : a); }
MSCCLPP_HOST_DEVICE_INLINE double elem_dmin(double a, double b) { return a != a ? b : b != b ? a : (b < a ? b : a); }

/* Combines accumulator a with input b for the four combining ops (avg and premulsum combine as sum,
 * premulsum after scaling b). */
#define ELEM_COMBINE_INT(T, a, b, op)                                                  \
  ((op) == ELEM_OP_PROD ? (T)((uint64_t)(a) * (uint64_t)(b))                          \
   : (op) == ELEM_OP_MAX ? ((a) < (b) ? (b) : (a))                                    \
   : (op) == ELEM_OP_MIN ? ((b) < (a) ? (b) : (a))                                    \
                         : (T)((uint64_t)(a) + (uint64_t)(b)))

MSCCLPP_HOST_DEVICE_INLINE int64_t elem_combine_i64(int64_t a, int64_t b, int op) { return ELEM_COMBINE_INT(int64_t, a, b, op); }
MSCCLPP_HOST_DEVICE_INLINE uint64_t elem_combine_u64(uint64_t a, uint64_t b, int op) { return ELEM_COMBINE_INT(uint64_t, a, b, op); }

MSCCLPP_HOST_DEVICE_INLINE float elem_combine_f32(float a, float b, int op) {
  return op == ELEM_OP_PROD ? a * b : op == ELEM_OP_MAX ? elem_fmax(a, b) : op == ELEM_OP_MIN ? elem_fmin(a, b) : a + b;
}

MSCCLPP_HOST_DEVICE_INLINE double elem_combine_f64(double a, double b, int op) {
  return op == ELEM_OP_PROD ? a * b : op == ELEM_OP_MAX ? elem_dmax(a, b) : op == ELEM_OP_MIN ? elem_dmin(a, b) : a + b;
}

/* ---- datatypes (values of mscclppDataType_t) -------------------------------------------------- */

#define ELEM_DTYPE_COUNT 12

/* Element size in bytes, 0 for an unknown type. */
MSCCLPP_HOST_DEVICE_INLINE size_t elem_dtype_size(int dtype) {
  switch (dtype) {
    case 0: case 1: case 10: case 11: return 1;
    case 6: case 9: return 2;
    case 2: case 3: case 7: return 4;
    case 4: case 5: case 8: return 8;
    default: return 0;
  }
}

/* The accumulator family of a datatype. */
MSCCLPP_HOST_DEVICE_INLINE enum elem_acc elem_dtype_acc(int dtype) {
  switch (dtype) {
    case 0: case 2: case 4: return ELEM_ACC_I64;
    case 1: case 3: case 5: return ELEM_ACC_U64;
    case 8: return ELEM_ACC_F64;
    default: return ELEM_ACC_F32;
  }
}

/* "int8", ..., "f8e5m2" (nccl-tests' names), "?" when unknown (names.c). */
const char* elem_dtype_name(int dtype);
/* "sum", "prod", "max", "min", "avg", "premulsum"; "?" when unknown (names.c). */
const char* elem_op_name(enum elem_op op);

#endif /* MPP_ELEM_REDOP_H_ */
