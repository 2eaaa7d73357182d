/* Reductions of src/elem/reduce.c:
 *  - every datatype x operator with 1 to 6 sources and counts around the block size, against the
 *    reference of src/algo/verify.c (exact inputs), with dst separate, equal to the first and equal
 *    to the last source;
 *  - hand-computed cases for what the reference shares with the code under test: integer wrap and
 *    truncating avg, NaN in max/min, one rounding per reduction, fp8 saturation, premulsum
 *    rounding, per-source scalars. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elem/dtype.h"
#include "elem/reduce.h"
#include "algo/verify.h"
#include "helpers.h"

#define MAXSRC 6

static void run_case(int dtype, int op, int nsrc, size_t count, int where) {
  size_t es = elem_dtype_size(dtype);
  struct verify_spec spec = {.dtype = dtype, .op = op, .nranks = nsrc, .seed = (uint64_t)(dtype * 131 + op * 17 + nsrc)};
  void* src[MAXSRC];
  elem_scalar scal[MAXSRC];
  for (int s = 0; s < nsrc; s++) {
    src[s] = malloc(count * es + 1);
    CHECK(src[s] != NULL);
    verify_fill(&spec, s, 0, count, src[s]);
    unsigned char raw[8] = {0};
    verify_scalar(&spec, s, raw);
    scal[s] = elem_scalar_from(raw, dtype);
  }
  void* own = malloc(count * es + 1);
  void* dst = where == 0 ? own : where == 1 ? src[0] : src[nsrc - 1];
  elem_reduce(dst, (const void* const*)src, nsrc, count, dtype, (enum elem_op)op, nsrc, scal);
  size_t wrong = verify_check_reduced(&spec, 0, count, dst);
  CHECK_MSG(wrong == 0, "dtype %d op %d nsrc %d count %zu dst %d: %zu wrong", dtype, op, nsrc, count, where, wrong);
  for (int s = 0; s < nsrc; s++) free(src[s]);
  free(own);
}

static void matrix(void) {
  static const size_t counts[] = {1, 7, 255, 256, 257, 1000};
  for (int dtype = 0; dtype < ELEM_DTYPE_COUNT; dtype++)
    for (int op = 0; op < ELEM_OP_COUNT; op++)
      for (int nsrc = 1; nsrc <= MAXSRC; nsrc++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) run_case(dtype, op, nsrc, counts[c], (int)(c % 3));
}

/* Two-source reduction of one element each; returns the result's bits. */
static uint64_t reduce2(int dtype, int op, uint64_t a, uint64_t b, elem_scalar sa, elem_scalar sb) {
  uint64_t out = 0;
  const void* srcs[2] = {&a, &b};
  elem_scalar sc[2] = {sa, sb};
  elem_reduce(&out, srcs, 2, 1, dtype, (enum elem_op)op, 2, sc);
  return out;
}

static uint64_t fbits(int dtype, float v) {
  switch (dtype) {
    case 6: return elem_float_to_half(v);
    case 9: return elem_float_to_bf16(v);
    case 10: return elem_float_to_e4m3(v);
    case 11: return elem_float_to_e5m2(v);
    default: {
      uint32_t u;
      memcpy(&u, &v, 4);
      return u;
    }
  }
}

static void hand_cases(void) {
  elem_scalar none = {0}, half = {.f = 0.5f}, two = {.f = 2.0f};
  CHECK(reduce2(0, ELEM_OP_SUM, 100, 100, none, none) == (uint8_t)(int8_t)-56);    /* int8 wraps */
  CHECK((int8_t)reduce2(0, ELEM_OP_AVG, (uint8_t)-7, 0, none, none) == -3);        /* truncates */
  CHECK(reduce2(1, ELEM_OP_AVG, 250, 10, none, none) == 2);                         /* (260 mod 256) / 2 */
  CHECK(reduce2(3, ELEM_OP_PROD, 0x10000, 0x10000, none, none) == 0);               /* uint32 wraps */
  CHECK((int32_t)reduce2(2, ELEM_OP_MIN, (uint32_t)-5, 3, none, none) == -5);       /* signed compare */
  CHECK(reduce2(3, ELEM_OP_MAX, (uint32_t)-5, 3, none, none) == (uint32_t)-5);      /* unsigned compare */
  CHECK(reduce2(7, ELEM_OP_MAX, fbits(7, NAN), fbits(7, 1.0f), none, none) == fbits(7, 1.0f));
  CHECK(reduce2(6, ELEM_OP_MIN, fbits(6, 2.0f), fbits(6, NAN), none, none) == fbits(6, 2.0f));
  CHECK(reduce2(10, ELEM_OP_SUM, fbits(10, 300.0f), fbits(10, 300.0f), none, none) == 0x7e); /* e4m3 saturates */
  CHECK(reduce2(11, ELEM_OP_SUM, fbits(11, 49152.0f), fbits(11, 49152.0f), none, none) == 0x7b); /* e5m2 too */
  CHECK(reduce2(7, ELEM_OP_AVG, fbits(7, 1.0f), fbits(7, 2.0f), none, none) == fbits(7, 1.5f));
  /* premulsum: each source by its own scalar, product rounded to the type: 3 * 0.5 + 5 * 2 = 11.5 */
  CHECK(reduce2(6, ELEM_OP_PREMUL, fbits(6, 3.0f), fbits(6, 5.0f), half, two) == fbits(6, 11.5f));
  /* e4m3: 7 * 0.7 = 4.9 rounds to 5 before the sum; 5 + 4.5 = 9.5 ties to 10 (4.9 + 4.5 would give 9) */
  CHECK(reduce2(10, ELEM_OP_PREMUL, fbits(10, 7.0f), fbits(10, 4.5f), (elem_scalar){.f = 0.7f}, (elem_scalar){.f = 1.0f}) ==
        fbits(10, 10.0f));
  elem_scalar i3 = {.i = 3}, im1 = {.i = -1};
  CHECK((int32_t)reduce2(2, ELEM_OP_PREMUL, 7, 4, i3, im1) == 17);
  /* one rounding: 2048 + 1 + 1 in float16 is 2050, where pairwise half additions would give 2048 */
  uint16_t h[3] = {elem_float_to_half(2048.0f), elem_float_to_half(1.0f), elem_float_to_half(1.0f)}, out = 0;
  const void* srcs[3] = {&h[0], &h[1], &h[2]};
  elem_reduce(&out, srcs, 3, 1, 6, ELEM_OP_SUM, 3, NULL);
  CHECK(elem_half_to_float(out) == 2050.0f);
  /* a single source still scales (premulsum) and divides (avg) */
  float one = 4.0f, res = 0;
  const void* s1[1] = {&one};
  elem_reduce(&res, s1, 1, 1, 7, ELEM_OP_PREMUL, 1, &half);
  CHECK(res == 2.0f);
  elem_reduce(&res, s1, 1, 1, 7, ELEM_OP_AVG, 4, NULL);
  CHECK(res == 1.0f);
}

int main(void) {
  hand_cases();
  matrix();
  printf("elem_reduce: %d datatypes x %d operators OK\n", ELEM_DTYPE_COUNT, ELEM_OP_COUNT);
  return 0;
}
