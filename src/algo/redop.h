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
#ifndef MPP_ALGO_REDOP_H_
#define MPP_ALGO_REDOP_H_

#include <stddef.h>
#include <stdint.h>

#include <mscclpp/device.h>

/* Internal operator kinds: the four built-ins, avg, and the pre-multiplied sum. */
enum algo_op { ALGO_OP_SUM = 0, ALGO_OP_PROD = 1, ALGO_OP_MAX = 2, ALGO_OP_MIN = 3, ALGO_OP_AVG = 4, ALGO_OP_PREMUL = 5 };
#define ALGO_OP_COUNT 6

enum algo_acc { ALGO_ACC_I64 = 0, ALGO_ACC_U64 = 1, ALGO_ACC_F32 = 2, ALGO_ACC_F64 = 3 };

/* The scalar of a pre-multiplied sum, converted to the accumulator family of its datatype. */
typedef union {
  int64_t i;
  uint64_t u;
  float f;
  double d;
} algo_scalar;

MSCCLPP_HOST_DEVICE_INLINE int64_t algo_add_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
MSCCLPP_HOST_DEVICE_INLINE int64_t algo_mul_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

MSCCLPP_HOST_DEVICE_INLINE float algo_fmax(float a, float b) { return a != a ? b : b != b ? a : (a < b ? b : a); }
MSCCLPP_HOST_DEVICE_INLINE float algo_fmin(float a, float b) { return a != a ? b : b != b ? a : (b < a ? b : a); }
MSCCLPP_HOST_DEVICE_INLINE double algo_dmax(double a, double b) { return a != a ? b : b != b ? a : (a < b ? b : a); }
MSCCLPP_HOST_DEVICE_INLINE double algo_dmin(double a, double b) { return a != a ? b : b != b ? a : (b < a ? b : a); }

/* Combines accumulator a with input b for the four combining ops (avg and premulsum combine as sum,
 * premulsum after scaling b). */
#define ALGO_COMBINE_INT(T, a, b, op)                                                  \
  ((op) == ALGO_OP_PROD ? (T)((uint64_t)(a) * (uint64_t)(b))                          \
   : (op) == ALGO_OP_MAX ? ((a) < (b) ? (b) : (a))                                    \
   : (op) == ALGO_OP_MIN ? ((b) < (a) ? (b) : (a))                                    \
                         : (T)((uint64_t)(a) + (uint64_t)(b)))

MSCCLPP_HOST_DEVICE_INLINE int64_t algo_combine_i64(int64_t a, int64_t b, int op) { return ALGO_COMBINE_INT(int64_t, a, b, op); }
MSCCLPP_HOST_DEVICE_INLINE uint64_t algo_combine_u64(uint64_t a, uint64_t b, int op) { return ALGO_COMBINE_INT(uint64_t, a, b, op); }

MSCCLPP_HOST_DEVICE_INLINE float algo_combine_f32(float a, float b, int op) {
  return op == ALGO_OP_PROD ? a * b : op == ALGO_OP_MAX ? algo_fmax(a, b) : op == ALGO_OP_MIN ? algo_fmin(a, b) : a + b;
}

MSCCLPP_HOST_DEVICE_INLINE double algo_combine_f64(double a, double b, int op) {
  return op == ALGO_OP_PROD ? a * b : op == ALGO_OP_MAX ? algo_dmax(a, b) : op == ALGO_OP_MIN ? algo_dmin(a, b) : a + b;
}

/* ---- datatypes (values of mscclppDataType_t) -------------------------------------------------- */

#define ALGO_DTYPE_COUNT 12

/* Element size in bytes, 0 for an unknown type. */
MSCCLPP_HOST_DEVICE_INLINE size_t algo_dtype_size(int dtype) {
  switch (dtype) {
    case 0: case 1: case 10: case 11: return 1;
    case 6: case 9: return 2;
    case 2: case 3: case 7: return 4;
    case 4: case 5: case 8: return 8;
    default: return 0;
  }
}

/* The accumulator family of a datatype. */
MSCCLPP_HOST_DEVICE_INLINE enum algo_acc algo_dtype_acc(int dtype) {
  switch (dtype) {
    case 0: case 2: case 4: return ALGO_ACC_I64;
    case 1: case 3: case 5: return ALGO_ACC_U64;
    case 8: return ALGO_ACC_F64;
    default: return ALGO_ACC_F32;
  }
}

#endif /* MPP_ALGO_REDOP_H_ */
