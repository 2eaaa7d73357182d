/* verify.c - the input patterns and reference reductions of verify.h. */
#include "algo/verify.h"

#include <string.h>

#include "elem/dtype.h"
#include "elem/redop.h"

static uint64_t mix(uint64_t seed, int r, size_t i) {
  uint64_t z = seed ^ ((uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)i * 0xd1b54a32d192ed03ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int is_int(int dtype) { return dtype <= 5; }
static int is_signed(int dtype) { return dtype == 0 || dtype == 2 || dtype == 4; }

/* Largest B such that every integer in [-B, B] is exact in dtype (floats). */
static int64_t exact_bound(int dtype) {
  switch (dtype) {
    case 6: return 2048;
    case 9: return 256;
    case 10: return 16;
    case 11: return 8;
    default: return 1 << 24;
  }
}

/* Largest M with 2^M exact and finite (floats). */
static int max_pow2(int dtype) { return dtype == 10 ? 8 : (dtype == 11 || dtype == 6) ? 15 : 127; }

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* An integer in [-v, v] from h. */
static double pick(uint64_t h, int64_t v) { return (double)((int64_t)(h % (uint64_t)(2 * v + 1)) - v); }

/* Rank r's input element i of a float reduction, as a double (exact in dtype). */
static double fvalue(const struct verify_spec* s, int r, size_t i) {
  uint64_t h = mix(s->seed, r, i) >> 8;
  int64_t n = s->nranks, b = exact_bound(s->dtype), pos = (int64_t)(((size_t)r + i) % (size_t)n);
  switch (s->op) {
    case ELEM_OP_PROD: {
      double mag = (pos < max_pow2(s->dtype) && (h & 2)) ? 2.0 : 1.0;
      return (h & 1) ? -mag : mag;
    }
    case ELEM_OP_MAX:
    case ELEM_OP_MIN: return pick(h, min64(b, 1024));
    case ELEM_OP_PREMUL: {
      int64_t k = min64(n, b / 4), v = min64(b / (4 * k), 1024);
      return pos < k ? pick(h, v) : 0.0;
    }
    default: {
      int64_t k = min64(n, b), v = min64(b / k, 1024);
      return pos < k ? pick(h, v) : 0.0;
    }
  }
}

static double fscalar(int r) { return r % 3 == 0 ? 0.5 : r % 3 == 1 ? 1.0 : 2.0; }

/* Stores v (exact, or to be rounded) as a value of a float dtype. */
static void fstore(int dtype, double v, void* out) {
  float f = (float)v;
  uint16_t h;
  uint8_t b;
  switch (dtype) {
    case 6: h = elem_float_to_half(f); memcpy(out, &h, 2); break;
    case 7: memcpy(out, &f, 4); break;
    case 8: memcpy(out, &v, 8); break;
    case 9: h = elem_float_to_bf16(f); memcpy(out, &h, 2); break;
    case 10: b = elem_float_to_e4m3(f); memcpy(out, &b, 1); break;
    default: b = elem_float_to_e5m2(f); memcpy(out, &b, 1); break;
  }
}

/* Rank r's input element i of an integer reduction, sign- or zero-extended from the type's width. */
static uint64_t ivalue(const struct verify_spec* s, int r, size_t i) {
  uint64_t h = mix(s->seed, r, i);
  if (s->op == ELEM_OP_PROD) h |= 1;
  unsigned bits = (unsigned)elem_dtype_size(s->dtype) * 8;
  if (bits == 64) return h;
  h &= (1ull << bits) - 1;
  if (is_signed(s->dtype) && (h >> (bits - 1))) h |= ~0ull << bits;
  return h;
}

void verify_fill(const struct verify_spec* s, int r, size_t i0, size_t n, void* buf) {
  size_t es = elem_dtype_size(s->dtype);
  for (size_t j = 0; j < n; j++) {
    char* out = (char*)buf + j * es;
    if (s->op < 0 || is_int(s->dtype)) {
      uint64_t v = s->op < 0 ? mix(s->seed, r, i0 + j) : ivalue(s, r, i0 + j);
      memcpy(out, &v, es); /* little endian: the low bytes */
    } else {
      fstore(s->dtype, fvalue(s, r, i0 + j), out);
    }
  }
}

void verify_scalar(const struct verify_spec* s, int r, void* out) {
  if (is_int(s->dtype)) {
    uint64_t v = (uint64_t)(r % 3) + 1;
    memcpy(out, &v, elem_dtype_size(s->dtype));
  } else {
    fstore(s->dtype, fscalar(r), out);
  }
}

/* The reduction of element i over every rank for integer types, as the type's bits. */
static uint64_t iexpected(const struct verify_spec* s, size_t i) {
  uint64_t acc = ivalue(s, 0, i); /* rank 0's premulsum scalar is 1 */
  int sg = is_signed(s->dtype);
  for (int r = 1; r < s->nranks; r++) {
    uint64_t v = ivalue(s, r, i);
    switch (s->op) {
      case ELEM_OP_PROD: acc *= v; break;
      case ELEM_OP_MAX: if (sg ? (int64_t)v > (int64_t)acc : v > acc) acc = v; break;
      case ELEM_OP_MIN: if (sg ? (int64_t)v < (int64_t)acc : v < acc) acc = v; break;
      case ELEM_OP_PREMUL: acc += v * ((uint64_t)(r % 3) + 1); break;
      default: acc += v; break;
    }
  }
  if (s->op == ELEM_OP_AVG) { /* the wrapped sum in the type, divided in the type */
    unsigned bits = (unsigned)elem_dtype_size(s->dtype) * 8;
    if (bits < 64) acc &= (1ull << bits) - 1;
    if (sg && bits < 64 && (acc >> (bits - 1))) acc |= ~0ull << bits;
    acc = sg ? (uint64_t)((int64_t)acc / s->nranks) : acc / (uint64_t)s->nranks;
  }
  return acc;
}

/* The reduction of element i over every rank for float types, in double. */
static double fexpected(const struct verify_spec* s, size_t i) {
  double acc = fvalue(s, 0, i) * (s->op == ELEM_OP_PREMUL ? fscalar(0) : 1.0);
  for (int r = 1; r < s->nranks; r++) {
    double v = fvalue(s, r, i);
    switch (s->op) {
      case ELEM_OP_PROD: acc *= v; break;
      case ELEM_OP_MAX: acc = v > acc ? v : acc; break;
      case ELEM_OP_MIN: acc = v < acc ? v : acc; break;
      case ELEM_OP_PREMUL: acc += v * fscalar(r); break;
      default: acc += v; break;
    }
  }
  return s->op == ELEM_OP_AVG ? acc / s->nranks : acc;
}

/* The value of float bits as an integer that grows with the value (sign-magnitude to linear). */
static int64_t ordered(int dtype, const void* p) {
  uint64_t u = 0;
  size_t es = elem_dtype_size(dtype);
  memcpy(&u, p, es);
  uint64_t sign = 1ull << (es * 8 - 1);
  return (u & sign) ? -(int64_t)(u & (sign - 1)) : (int64_t)u;
}

size_t verify_check_reduced(const struct verify_spec* s, size_t i0, size_t n, const void* buf) {
  size_t es = elem_dtype_size(s->dtype), wrong = 0;
  int tol = (!is_int(s->dtype) && (s->op == ELEM_OP_AVG || s->op == ELEM_OP_PREMUL)) ? 2 : 0;
  for (size_t j = 0; j < n; j++) {
    unsigned char want[8];
    const char* got = (const char*)buf + j * es;
    if (is_int(s->dtype)) {
      uint64_t v = iexpected(s, i0 + j);
      memcpy(want, &v, es);
    } else {
      fstore(s->dtype, fexpected(s, i0 + j), want);
    }
    if (memcmp(want, got, es) == 0) continue;
    int64_t d = ordered(s->dtype, want) - ordered(s->dtype, got);
    wrong += !(tol > 0 && d <= tol && d >= -tol);
  }
  return wrong;
}

size_t verify_check_copy(const struct verify_spec* s, int src, size_t i0, size_t n, const void* buf) {
  size_t es = elem_dtype_size(s->dtype), wrong = 0;
  for (size_t j = 0; j < n; j++) {
    uint64_t v = mix(s->seed, src, i0 + j);
    wrong += memcmp(&v, (const char*)buf + j * es, es) != 0;
  }
  return wrong;
}
