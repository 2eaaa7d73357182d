// The conversions of src/elem/dtype.h against CUDA's own (cuda_fp16.h, cuda_bf16.h, cuda_fp8.h,
// host implementations; built where the CUDA toolkit is installed, needs no GPU): every float16,
// bfloat16 and fp8 pattern widened, and floats narrowed: every 257th bit pattern plus the
// neighbourhood of every float16 value, NaNs and infinities included. fp8 uses the default
// (satfinite) constructors of __nv_fp8_e4m3 and __nv_fp8_e5m2.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "elem/dtype.h"

static long bad = 0;

static void report(const char* what, uint32_t in, unsigned cuda, unsigned ours) {
  if (bad++ < 10) std::printf("%s(0x%08x): cuda 0x%x, ours 0x%x\n", what, in, cuda, ours);
}

static void narrow(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  uint16_t hb = __half_raw(__float2half_rn(x)).x;
  if (hb != elem_float_to_half(x)) report("half", u, hb, elem_float_to_half(x));
  uint16_t bb = __nv_bfloat16_raw(__float2bfloat16_rn(x)).x;
  if (bb != elem_float_to_bf16(x)) report("bf16", u, bb, elem_float_to_bf16(x));
  __nv_fp8_e4m3 e4(x);
  if (e4.__x != elem_float_to_e4m3(x)) report("e4m3", u, e4.__x, elem_float_to_e4m3(x));
  __nv_fp8_e5m2 e5(x);
  if (e5.__x != elem_float_to_e5m2(x)) report("e5m2", u, e5.__x, elem_float_to_e5m2(x));
}

static void same_float(const char* what, uint32_t in, float cuda, float ours) {
  if (std::memcmp(&cuda, &ours, 4) != 0 && !(std::isnan(cuda) && std::isnan(ours))) {
    uint32_t a, b;
    std::memcpy(&a, &cuda, 4);
    std::memcpy(&b, &ours, 4);
    report(what, in, a, b);
  }
}

int main() {
  for (uint64_t b = 0; b < (1ull << 32); b += 257) narrow((uint32_t)b);
  for (uint32_t v = 0; v < 65536; v++) {
    uint16_t s = (uint16_t)v;
    __half_raw hr;
    hr.x = s;
    same_float("half->float", v, __half2float(__half(hr)), elem_half_to_float(s));
    __nv_bfloat16_raw br;
    br.x = s;
    __nv_bfloat16 bf(br);
    same_float("bf16->float", v, __bfloat162float(bf), elem_bf16_to_float(s));
    uint32_t f = elem_f32_bits(elem_half_to_float(s)); // every half value and its float neighbours
    for (int d = -2; d <= 2; d++) narrow(f + (uint32_t)d);
  }
  for (uint32_t v = 0; v < 256; v++) {
    __nv_fp8_e4m3 e4;
    e4.__x = (__nv_fp8_storage_t)v;
    same_float("e4m3->float", v, (float)e4, elem_e4m3_to_float((uint8_t)v));
    __nv_fp8_e5m2 e5;
    e5.__x = (__nv_fp8_storage_t)v;
    same_float("e5m2->float", v, (float)e5, elem_e5m2_to_float((uint8_t)v));
  }
  std::printf("elem_convert_cuda: %ld differences from CUDA's conversions\n", bad);
  return bad == 0 ? 0 : 1;
}
