/* json.c - checked field readers for the plan loader (json.h). */
#include "plan/load/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char* pj_at(const struct pj_where* w, char* buf, size_t len) {
  int n = snprintf(buf, len, "%s", w->plan ? w->plan : "plan");
  if (w->gpu >= 0 && n < (int)len) n += snprintf(buf + n, len - n, ": gpu %d", w->gpu);
  if (w->tb >= 0 && n < (int)len) n += snprintf(buf + n, len - n, " threadblock %d", w->tb);
  if (w->op >= 0 && n < (int)len) n += snprintf(buf + n, len - n, " op %d", w->op);
  if (w->nested >= 0 && n < (int)len) snprintf(buf + n, len - n, " (nested op %d)", w->nested);
  return buf;
}

mscclppResult_t pj_fail(const struct pj_where* w, const char* key, const char* fmt, ...) {
  char at[256], what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  return MPP_ERR(mscclppInvalidArgument, "%s: field '%s': %s", pj_at(w, at, sizeof(at)), key, what);
}

mscclppResult_t pj_int(const struct pj_where* w, const json_t* o, const char* key, int optional, int64_t def,
                       int64_t lo, int64_t hi, int64_t* out) {
  const json_t* v = json_object_get(o, key);
  if (!v) {
    if (!optional) return pj_fail(w, key, "missing");
    *out = def;
    return mscclppSuccess;
  }
  if (!json_is_integer(v)) return pj_fail(w, key, "not an integer");
  int64_t x = (int64_t)json_integer_value(v);
  if (x < lo || x > hi) return pj_fail(w, key, "%lld out of range [%lld, %lld]", (long long)x, (long long)lo, (long long)hi);
  *out = x;
  return mscclppSuccess;
}

mscclppResult_t pj_u64(const struct pj_where* w, const json_t* o, const char* key, uint64_t def, uint64_t* out) {
  const json_t* v = json_object_get(o, key);
  *out = def;
  if (!v) return mscclppSuccess;
  if (json_is_integer(v)) {
    if (json_integer_value(v) == -1) { /* a literal of 2^63 or more (load_top.c: big_ints) */
      *out = UINT64_MAX;
      return mscclppSuccess;
    }
    if (json_integer_value(v) < 0) return pj_fail(w, key, "negative");
    *out = (uint64_t)json_integer_value(v);
    return mscclppSuccess;
  }
  if (json_is_real(v)) { /* 2^64-1 does not fit json_int_t: jansson gives a real */
    double d = json_real_value(v);
    if (!(d >= 0) || d != floor(d)) return pj_fail(w, key, "not a non-negative integer");
    *out = d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d;
    return mscclppSuccess;
  }
  return pj_fail(w, key, "not an integer");
}

mscclppResult_t pj_bool(const struct pj_where* w, const json_t* o, const char* key, int def, int* out) {
  const json_t* v = json_object_get(o, key);
  *out = def;
  if (!v) return mscclppSuccess;
  if (!json_is_boolean(v)) return pj_fail(w, key, "not true or false");
  *out = json_is_true(v);
  return mscclppSuccess;
}

mscclppResult_t pj_str(const struct pj_where* w, const json_t* o, const char* key, const char* def, const char** out) {
  const json_t* v = json_object_get(o, key);
  if (!v) {
    if (!def) return pj_fail(w, key, "missing");
    *out = def;
    return mscclppSuccess;
  }
  if (!json_is_string(v)) return pj_fail(w, key, "not a string");
  *out = json_string_value(v);
  return mscclppSuccess;
}

mscclppResult_t pj_arr(const struct pj_where* w, const json_t* o, const char* key, int optional, const json_t** out,
                       size_t* n) {
  const json_t* v = json_object_get(o, key);
  *out = NULL, *n = 0;
  if (!v) return optional ? mscclppSuccess : pj_fail(w, key, "missing");
  if (!json_is_array(v)) return pj_fail(w, key, "not an array");
  *out = v, *n = json_array_size(v);
  return mscclppSuccess;
}

mscclppResult_t pj_elem_obj(const struct pj_where* w, const json_t* a, size_t i, const char* key, const json_t** out) {
  const json_t* v = json_array_get(a, i);
  if (!json_is_object(v)) return pj_fail(w, key, "element %zu is not an object", i);
  *out = v;
  return mscclppSuccess;
}

mscclppResult_t pj_enum(const struct pj_where* w, const char* key, const char* s, const char* const* names, int n,
                        int* out) {
  char allowed[256] = "";
  for (int i = 0; i < n; i++) {
    if (strcmp(s, names[i]) == 0) {
      *out = i;
      return mscclppSuccess;
    }
    if (names[i][0]) snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s", i ? " " : "", names[i]);
  }
  return pj_fail(w, key, "'%s' is not one of: %s", s, allowed);
}
