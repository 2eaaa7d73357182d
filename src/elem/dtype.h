/* dtype.h - the element formats of the collectives and their conversions to and from float, as
 * plain inline C that gcc compiles for the CPU ranks and nvcc can compile for GPU code
 * (MSCCLPP_HOST_DEVICE_INLINE).
 *
 * Conversion semantics are CUDA's defaults, so that a value converted here and on a GPU is the same:
 *   float16 (IEEE binary16), bfloat16: round to nearest even; overflow becomes Inf; NaN becomes the
 *     canonical 0x7fff (CUDA's __float2half / __float2bfloat16).
 *   fp8 e4m3 (no Inf; 0x7f/0xff are NaN; largest finite 448) and fp8 e5m2 (IEEE-like, largest finite
 *     57344): round to nearest even, saturating: finite values beyond the largest finite one, and
 *     +-Inf, become +-largest finite (e4m3: above 464, e5m2: from 61440 on); NaN becomes the
 *     canonical 0x7f (both formats). This is __nv_fp8_e4m3(float) / __nv_fp8_e5m2(float), i.e.
 *     __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...); tests/unit/elem_convert_cuda.cpp compares
 *     every conversion with CUDA's headers where the toolkit is installed.
 * Widening to float is exact for all four formats. */
#ifndef MPP_ELEM_DTYPE_H_
#define MPP_ELEM_DTYPE_H_

#include <stdint.h>
#include <string.h>

#include <mscclpp/device.h>

MSCCLPP_HOST_DEVICE_INLINE uint32_t elem_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

MSCCLPP_HOST_DEVICE_INLINE float elem_f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

/* ---- float16 ---------------------------------------------------------------------------------- */

MSCCLPP_HOST_DEVICE_INLINE float elem_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return elem_f32_from_bits(sign | 0x7f800000u | (man << 13)); /* Inf, NaN (payload kept) */
  if (exp != 0) return elem_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
  /* zero or subnormal: man * 2^-24, exact in float */
  float v = (float)man * (1.0f / 16777216.0f);
  return sign ? -v : v;
}

/* Rounds the magnitude bits u (a finite float's, as uint32) right by shift with ties to even. */
MSCCLPP_HOST_DEVICE_INLINE uint32_t elem_round_shift(uint32_t u, uint32_t shift) {
  uint32_t kept = u >> shift, rest = u & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  return kept + (rest > half || (rest == half && (kept & 1u)));
}

MSCCLPP_HOST_DEVICE_INLINE uint16_t elem_float_to_half(float f) {
  uint32_t x = elem_f32_bits(f), u = x & 0x7fffffffu;
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  if (u >= 0x7f800000u) return u == 0x7f800000u ? (uint16_t)(sign | 0x7c00u) : (uint16_t)0x7fffu;
  if (u >= 0x38800000u) { /* normal in half (or overflow): rebias, round; a carry may reach Inf */
    uint32_t r = elem_round_shift(u - 0x38000000u, 13);
    return (uint16_t)(sign | (r >= 0x7c00u ? 0x7c00u : r));
  }
  if (u < 0x33000001u) return sign; /* below half of the smallest subnormal (ties go to 0) */
  /* subnormal result: value = mantissa(24 bits with the hidden one) * 2^(exp-150) */
  uint32_t exp = u >> 23, man = (u & 0x7fffffu) | 0x800000u;
  return (uint16_t)(sign | elem_round_shift(man, 126u - exp));
}

/* ---- bfloat16 --------------------------------------------------------------------------------- */

MSCCLPP_HOST_DEVICE_INLINE float elem_bf16_to_float(uint16_t b) { return elem_f32_from_bits((uint32_t)b << 16); }

MSCCLPP_HOST_DEVICE_INLINE uint16_t elem_float_to_bf16(float f) {
  uint32_t x = elem_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  /* ties to even; a carry into the exponent is the right result (up to Inf) */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ---- fp8 -------------------------------------------------------------------------------------- */

MSCCLPP_HOST_DEVICE_INLINE float elem_e4m3_to_float(uint8_t v) {
  uint32_t sign = (uint32_t)(v & 0x80u) << 24, exp = (v >> 3) & 0xfu, man = v & 0x7u;
  if (exp == 0xf && man == 0x7) return elem_f32_from_bits(sign | 0x7fc00000u);
  if (exp != 0) return elem_f32_from_bits(sign | ((exp + 120u) << 23) | (man << 20));
  float r = (float)man * (1.0f / 512.0f); /* subnormal: man * 2^-9 */
  return sign ? -r : r;
}

MSCCLPP_HOST_DEVICE_INLINE float elem_e5m2_to_float(uint8_t v) {
  /* e5m2 is the upper byte of a float16 */
  return elem_half_to_float((uint16_t)((uint16_t)v << 8));
}

/* The magnitude bits of a finite float in a small format with mbits mantissa bits, exponent bias
 * bias and smallest normal exponent 1: rounded to nearest even, without overflow handling (the
 * caller saturates). u must be below the format's overflow threshold. */
MSCCLPP_HOST_DEVICE_INLINE uint32_t elem_float_to_small(uint32_t u, uint32_t mbits, uint32_t bias) {
  uint32_t exp = u >> 23; /* float exponent field (biased by 127) */
  if (exp >= 128u - bias) /* normal in the small format: rebias then round */
    return elem_round_shift(u - ((127u - bias) << 23), 23u - mbits);
  /* subnormal or zero: value = (man | hidden) * 2^(exp-150); target unit 2^(1-bias-mbits) */
  if (exp == 0) return 0; /* float subnormals are far below half of any fp8 subnormal */
  uint32_t man = (u & 0x7fffffu) | 0x800000u, shift = (127u - bias) + 23u - mbits + 1u - exp;
  return shift > 31u ? 0u : elem_round_shift(man, shift);
}

MSCCLPP_HOST_DEVICE_INLINE uint8_t elem_float_to_e4m3(float f) {
  uint32_t x = elem_f32_bits(f), u = x & 0x7fffffffu;
  uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
  if (u > 0x7f800000u) return 0x7fu;
  if (u > 0x43e80000u) return (uint8_t)(sign | 0x7eu); /* above 464 (and Inf): saturate to 448 */
  return (uint8_t)(sign | elem_float_to_small(u, 3, 7));
}

MSCCLPP_HOST_DEVICE_INLINE uint8_t elem_float_to_e5m2(float f) {
  uint32_t x = elem_f32_bits(f), u = x & 0x7fffffffu;
  uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
  if (u > 0x7f800000u) return 0x7fu;
  if (u >= 0x47700000u) return (uint8_t)(sign | 0x7bu); /* from 61440 (and Inf): saturate to 57344 */
  return (uint8_t)(sign | elem_float_to_small(u, 2, 15));
}

#endif /* MPP_ELEM_DTYPE_H_ */
