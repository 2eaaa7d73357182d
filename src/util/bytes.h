/* bytes.h - little-endian field access for wire formats and blobs, and the FNV-1a hash. Every
 * format that crosses a socket or a process boundary is written with these, never by casting a
 * struct. */
#ifndef MPP_UTIL_BYTES_H_
#define MPP_UTIL_BYTES_H_

#include <stddef.h>
#include <stdint.h>

static inline void le_put16(uint8_t* p, uint16_t v) {
  for (int i = 0; i < 2; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void le_put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void le_put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t le_get16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t le_get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static inline uint64_t le_get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

#define FNV1A_INIT 0xcbf29ce484222325ull
/* Folds n bytes into the 64-bit FNV-1a hash h (start with FNV1A_INIT). */
static inline uint64_t fnv1a_bytes(uint64_t h, const void* data, size_t n) {
  const uint8_t* p = (const uint8_t*)data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

#endif /* MPP_UTIL_BYTES_H_ */
