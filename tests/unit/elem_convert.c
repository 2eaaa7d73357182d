/* Element conversions of src/elem/dtype.h, exhaustively:
 *  - widening: every bit pattern of float16, bfloat16, fp8 e4m3 and e5m2 against a value built
 *    from sign, exponent and mantissa with ldexp;
 *  - narrowing: every representable value maps back to itself; for every pair of neighbours
 *    (including the largest finite value and the overflow boundary) the midpoint rounds to the
 *    even one and the floats just below and above it round down and up; NaN, Inf, saturation,
 *    subnormals and signed zeros as documented in dtype.h;
 *  - fp8 also against a brute-force nearest-value search over 2^18 random floats;
 *  - float16 also against the compiler's _Float16 where it has one. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "elem/dtype.h"
#include "helpers.h"

struct fmt {
  const char* name;
  int bits, mbits, bias;
  int has_inf;         /* IEEE-like top exponent (float16, bfloat16, e5m2); e4m3 has none */
  int saturate;        /* fp8: out of range goes to the largest finite value */
  uint32_t nan_result; /* what float NaN converts to (without the sign) */
  float (*widen)(uint32_t);
  uint32_t (*narrow)(float);
};

static float w_half(uint32_t v) { return elem_half_to_float((uint16_t)v); }
static float w_bf16(uint32_t v) { return elem_bf16_to_float((uint16_t)v); }
static float w_e4m3(uint32_t v) { return elem_e4m3_to_float((uint8_t)v); }
static float w_e5m2(uint32_t v) { return elem_e5m2_to_float((uint8_t)v); }
static uint32_t n_half(float f) { return elem_float_to_half(f); }
static uint32_t n_bf16(float f) { return elem_float_to_bf16(f); }
static uint32_t n_e4m3(float f) { return elem_float_to_e4m3(f); }
static uint32_t n_e5m2(float f) { return elem_float_to_e5m2(f); }

static const struct fmt fmts[] = {
    {"float16", 16, 10, 15, 1, 0, 0x7fff, w_half, n_half},
    {"bfloat16", 16, 7, 127, 1, 0, 0x7fff, w_bf16, n_bf16},
    {"e4m3", 8, 3, 7, 0, 1, 0x7f, w_e4m3, n_e4m3},
    {"e5m2", 8, 2, 15, 1, 1, 0x7f, w_e5m2, n_e5m2},
};

static int is_nan_pattern(const struct fmt* f, uint32_t v) {
  uint32_t mag = v & ((1u << (f->bits - 1)) - 1), emax = (1u << (f->bits - 1 - f->mbits)) - 1;
  uint32_t e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1);
  return f->has_inf ? (e == emax && m != 0) : (mag == ((emax << f->mbits) | ((1u << f->mbits) - 1)));
}

/* The value of pattern v computed from its fields (NaN for NaN patterns). */
static double reference(const struct fmt* f, uint32_t v) {
  if (is_nan_pattern(f, v)) return NAN;
  uint32_t sign = v >> (f->bits - 1), mag = v & ((1u << (f->bits - 1)) - 1);
  uint32_t e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1), emax = (1u << (f->bits - 1 - f->mbits)) - 1;
  double x;
  if (f->has_inf && e == emax) x = INFINITY;
  else if (e == 0) x = ldexp((double)m, 1 - f->bias - f->mbits);
  else x = ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
  return sign ? -x : x;
}

static void check_widen(const struct fmt* f) {
  for (uint32_t v = 0; v < (1u << f->bits); v++) {
    double want = reference(f, v);
    float got = f->widen(v);
    if (isnan(want)) CHECK_MSG(isnan(got), "%s 0x%x: expected NaN, got %g", f->name, v, got);
    else CHECK_MSG((double)got == want && !signbit(got) == !signbit(want), "%s 0x%x: expected %g, got %g", f->name, v, want, got);
  }
}

/* What converting x must give: n (the exact result) when positive, the same with the sign bit set
 * when negative. */
static void expect(const struct fmt* f, float x, uint32_t want) {
  uint32_t sign = 1u << (f->bits - 1);
  uint32_t got = f->narrow(x), gotn = f->narrow(-x);
  CHECK_MSG(got == want, "%s(%.9g): expected 0x%x, got 0x%x", f->name, (double)x, want, got);
  CHECK_MSG(gotn == (want | sign), "%s(%.9g): expected 0x%x, got 0x%x", f->name, -(double)x, want | sign, gotn);
}

/* For every pair of neighbouring non-negative values a, a+1 (the top one may be the overflow
 * result): exact values, the midpoint (ties to even) and the floats either side of it. */
static void check_narrow(const struct fmt* f) {
  uint32_t top = 0; /* the largest finite pattern */
  for (uint32_t v = 0; v < (1u << (f->bits - 1)); v++)
    if (!isnan(reference(f, v)) && !isinf(reference(f, v))) top = v;
  double maxv = reference(f, top), ulp_top = maxv - reference(f, top - 1);
  for (uint32_t v = 0; v <= top; v++) {
    double a = reference(f, v), b = v < top ? reference(f, v + 1) : maxv + ulp_top; /* past the end */
    uint32_t up = v < top ? v + 1 : (f->saturate ? top : v + 1); /* v + 1 of top is Inf */
    expect(f, (float)a, v);
    float mid = (float)((a + b) / 2);
    CHECK_MSG((double)mid == (a + b) / 2, "%s: midpoint of 0x%x not exact in float", f->name, v);
    if (f->saturate && v == top) continue; /* checked in check_specials */
    expect(f, mid, (v & 1) ? up : v);
    expect(f, nextafterf(mid, 0.0f), v);
    expect(f, nextafterf(mid, INFINITY), up);
  }
}

static void check_specials(const struct fmt* f) {
  uint32_t sign = 1u << (f->bits - 1);
  CHECK(f->narrow(NAN) == f->nan_result && f->narrow(-NAN) == f->nan_result); /* canonical, no sign */
  uint32_t snan = 0x7f800001u;
  float fsnan;
  memcpy(&fsnan, &snan, 4);
  CHECK(f->narrow(fsnan) == f->nan_result);
  CHECK(f->narrow(0.0f) == 0 && f->narrow(-0.0f) == sign);
  float tiny = (float)(reference(f, 1) / 4); /* a quarter of the smallest subnormal */
  CHECK(f->narrow(tiny) == 0 && f->narrow(-tiny) == sign);
  uint32_t inf_pattern = ((1u << (f->bits - 1 - f->mbits)) - 1) << f->mbits, max_pattern = f->mbits == 3 ? 0x7eu : 0x7bu;
  uint32_t inf_or_max = f->saturate ? max_pattern : inf_pattern;
  expect(f, INFINITY, inf_or_max);
  expect(f, FLT_MAX, inf_or_max);
  if (f->saturate) { /* the saturation thresholds of dtype.h */
    float edge = f->mbits == 3 ? 464.0f : 61440.0f;
    expect(f, edge, inf_or_max);
    expect(f, nextafterf(edge, INFINITY), inf_or_max);
  }
}

/* fp8: nearest of all finite values by search, ties to the even pattern, then saturation. */
static uint32_t brute_fp8(const double values[0x80], float x) {
  uint32_t best = 0, sign = signbit(x) ? 0x80u : 0;
  double ax = fabs((double)x), bestd = INFINITY;
  for (uint32_t v = 0; v < 0x80; v++) {
    double r = values[v];
    if (isnan(r) || isinf(r)) continue;
    double d = fabs(r - ax);
    if (d < bestd || (d == bestd && !(v & 1))) best = v, bestd = d;
  }
  return best | sign;
}

static void check_fp8_random(const struct fmt* f) {
  double values[0x80];
  for (uint32_t v = 0; v < 0x80; v++) values[v] = reference(f, v);
  uint64_t state = 12345;
  for (int i = 0; i < (1 << 18); i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = (uint32_t)(state >> 32);
    int exp = (int)((state >> 20) % 40) - 22; /* around the fp8 range */
    float x = ldexpf(1.0f + (float)(bits & 0x7fffff) / 8388608.0f, exp) * ((bits >> 31) ? -1.0f : 1.0f);
    double lim = f->mbits == 3 ? 464.0 : 61440.0;
    if (fabs((double)x) >= lim) continue; /* saturation is checked above */
    uint32_t want = brute_fp8(values, x), got = f->narrow(x);
    CHECK_MSG(got == want, "%s(%.9g): expected 0x%x, got 0x%x", f->name, (double)x, want, got);
  }
}

#ifdef __FLT16_MAX__
static void check_half_compiler(void) {
  uint64_t state = 99;
  for (int i = 0; i < (1 << 21); i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = (uint32_t)(state >> 32);
    if ((bits & 0x7f800000u) == 0x7f800000u) continue; /* NaN payloads differ by design */
    float x;
    memcpy(&x, &bits, 4);
    _Float16 h = (_Float16)x;
    uint16_t want;
    memcpy(&want, &h, 2);
    CHECK_MSG(elem_float_to_half(x) == want, "half(%.9g): compiler 0x%x, ours 0x%x", (double)x, want, elem_float_to_half(x));
  }
}
#endif

int main(void) {
  for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
    check_widen(&fmts[i]);
    check_narrow(&fmts[i]);
    check_specials(&fmts[i]);
    if (fmts[i].bits == 8) check_fp8_random(&fmts[i]);
  }
#ifdef __FLT16_MAX__
  check_half_compiler();
  printf("elem_convert: also matched the compiler's _Float16\n");
#endif
  printf("elem_convert: float16, bfloat16, e4m3, e5m2 OK\n");
  return 0;
}
