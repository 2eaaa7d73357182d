/* verify.h - inputs and expected results for checking collectives (mscclpp-perf and the tests).
 *
 * Every rank's input element i is a function of (seed, rank, i), so any rank can compute any
 * other's input and the expected result locally. Inputs of reductions are chosen so that the
 * reduction is exact in every order and every datatype, fp8 included:
 *   sum, avg    integers in [-V, V]; only k = min(nranks, B) ranks (a window that moves with i) are
 *               nonzero, with k * V <= B, B the largest integer bound below which the datatype
 *               holds every integer (fp8 e5m2 8, e4m3 16, bfloat16 256, float16 2048; wider types
 *               are capped at V = 1024), so every partial sum is an exact integer
 *   premulsum   as sum with k * V * 4 <= B; rank r's scalar is 2^((r mod 3) - 1) (0.5, 1 or 2) for
 *               floats, (r mod 3) + 1 for integers
 *   prod        +-1 or +-2, with +-2 only on at most M ranks per element (2^M exact: e4m3 8,
 *               e5m2 and float16 15, wider 127)
 *   max, min    integers in [-V, V]
 * Integer types take random values of their full width (odd ones for prod): their sum and product
 * wrap modulo 2^bits, which is exact in any order. Data movement (no op) uses random bit patterns.
 * The check is bit-exact except avg and premulsum on floats, which allow 2 units in the last place
 * (the division of avg, and a reduction that may round differently from the double-precision
 * reference). */
#ifndef MPP_ALGO_VERIFY_H_
#define MPP_ALGO_VERIFY_H_

#include <stddef.h>
#include <stdint.h>

struct verify_spec {
  int dtype;     /* mscclppDataType_t */
  int op;        /* enum elem_op for reductions, -1 for data movement */
  int nranks;
  uint64_t seed; /* vary it between calls so that stale data cannot pass */
};

/* Writes rank r's input elements i0 .. i0+n-1 to buf. */
void verify_fill(const struct verify_spec* s, int r, size_t i0, size_t n, void* buf);
/* Writes rank r's premulsum scalar, a value of s->dtype, to out (8 bytes of room). */
void verify_scalar(const struct verify_spec* s, int r, void* out);
/* How many of the n elements in buf differ from elements i0 .. i0+n-1 of the reduction (s->op)
 * over every rank's input. */
size_t verify_check_reduced(const struct verify_spec* s, size_t i0, size_t n, const void* buf);
/* How many of the n elements in buf differ from rank src's input elements i0 .. i0+n-1. */
size_t verify_check_copy(const struct verify_spec* s, int src, size_t i0, size_t n, const void* buf);

#endif /* MPP_ALGO_VERIFY_H_ */
