/* vec.h - growable arrays: room for one more element, doubling. */
#ifndef MPP_UTIL_VEC_H_
#define MPP_UTIL_VEC_H_

#include <stdlib.h>

/* Makes *a (of *cap elements of elem bytes) hold at least need elements, doubling from 16.
 * Returns 0, or -1 when out of memory (then *a and *cap are unchanged). */
static inline int vec_reserve(void** a, size_t* cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  void* q = realloc(*a, n * elem);
  if (!q) return -1;
  *a = q, *cap = n;
  return 0;
}

#endif /* MPP_UTIL_VEC_H_ */
