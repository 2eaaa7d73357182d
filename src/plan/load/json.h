/* json.h - field readers over jansson for the plan loader: each names the field and where it is
 * (plan, gpu, threadblock, op) when the field is missing, of the wrong type or out of range. */
#ifndef MPP_PLAN_LOAD_JSON_H_
#define MPP_PLAN_LOAD_JSON_H_

#include <jansson.h>
#include <stdint.h>

#include "util/err.h"

/* Where the loader is: -1 fields are left out of messages. */
struct pj_where {
  const char* plan;
  int gpu, tb, op, nested;
};

/* Formats "PLAN: gpu G threadblock T op O" into buf. */
const char* pj_at(const struct pj_where* w, char* buf, size_t len);
/* InvalidArgument "<where>: field 'key': <what>". */
mscclppResult_t pj_fail(const struct pj_where* w, const char* key, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Integer field in [lo, hi]; absent: def when optional, else an error. */
mscclppResult_t pj_int(const struct pj_where* w, const json_t* o, const char* key, int optional, int64_t def,
                       int64_t lo, int64_t hi, int64_t* out);
/* Unsigned 64-bit field (numbers above 2^63 arrive as reals; both are accepted when integral). */
mscclppResult_t pj_u64(const struct pj_where* w, const json_t* o, const char* key, uint64_t def, uint64_t* out);
mscclppResult_t pj_bool(const struct pj_where* w, const json_t* o, const char* key, int def, int* out);
/* String field; absent: def (NULL def = required). */
mscclppResult_t pj_str(const struct pj_where* w, const json_t* o, const char* key, const char* def, const char** out);
/* Array field; absent: an empty array when optional (*out NULL, *n 0). */
mscclppResult_t pj_arr(const struct pj_where* w, const json_t* o, const char* key, int optional, const json_t** out,
                       size_t* n);
/* Object element i of array a named key[i]. */
mscclppResult_t pj_elem_obj(const struct pj_where* w, const json_t* a, size_t i, const char* key, const json_t** out);
/* Index of s in names[0..n), or an error listing what is allowed. */
mscclppResult_t pj_enum(const struct pj_where* w, const char* key, const char* s, const char* const* names, int n,
                        int* out);

#endif /* MPP_PLAN_LOAD_JSON_H_ */
